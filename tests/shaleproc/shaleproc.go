// Package shaleproc runs `shale serve` as real processes for the test suites that need
// them: which binary to run, and one process that can be started, killed and restarted on
// the same arguments, with its output in a log file per start.
package shaleproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binary is the binary under test: $SHALE_BIN, else the repository's bin/shale (what
// `make build` writes, and what `make test` and `make chaos` build first), else one built
// from this tree into a temporary directory, which cleanup removes.
func Binary() (bin string, cleanup func(), err error) {
	if bin := os.Getenv("SHALE_BIN"); bin != "" {
		return bin, func() {}, nil
	}
	if root, err := RepoRoot(); err == nil {
		bin := filepath.Join(root, "bin", "shale")
		if _, err := os.Stat(bin); err == nil {
			return bin, func() {}, nil
		}
	}
	dir, err := os.MkdirTemp("", "shale-test-bin")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", bin, "github.com/shalelog/shale/cmd/shale")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("build shale: %w", err)
	}
	return bin, cleanup, nil
}

// RepoRoot is the directory holding go.mod, above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Proc is one process of Bin with Args, restartable; each start logs to a file of its
// own in LogDir. Its methods may be called from several goroutines (a test's watchdog
// kills what the test started).
type Proc struct {
	Name   string // for messages and log file names
	Bin    string
	Args   []string
	LogDir string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	starts  int
	logPath string
}

// Start starts the process. It must not outlive the test binary: it gets SIGKILL when
// the thread that started it goes.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return fmt.Errorf("%s is already running", p.Name)
	}
	p.starts++
	p.logPath = filepath.Join(p.LogDir, fmt.Sprintf("%s.%d.log", p.Name, p.starts))
	f, err := os.Create(p.logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

// Running reports whether the process was started and has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

func (p *Proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig without waiting.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Wait waits up to timeout for the process to exit.
func (p *Proc) Wait(timeout time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %v", p.Name, timeout)
	}
}

// Kill9 kills the process if it runs and waits (bounded) for it to be gone.
func (p *Proc) Kill9() error {
	p.mu.Lock()
	if !p.running() {
		p.mu.Unlock()
		return nil
	}
	// Already reaped (killed a moment ago, its exit not yet seen by Running): just wait.
	err := p.cmd.Process.Signal(syscall.SIGKILL)
	p.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	return p.Wait(10 * time.Second)
}

// LogPath is the log of the latest start.
func (p *Proc) LogPath() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logPath
}

// LogTail is the last lines of the latest start's log.
func (p *Proc) LogTail(lines int) string {
	b, err := os.ReadFile(p.LogPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
