package chaos

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// supervised is a client process of a chaos run (a transactional pipeline, a share-group
// worker) run as a supervisor would: one instance at a time, restarted when it exits on
// its own (which is recorded), each instance writing to a log of its own that the checkers
// read back.
type supervised struct {
	t    *testing.T
	name string
	dir  string
	// command makes the command of instance n (1, 2, ...).
	command func(n int) *exec.Cmd

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
	instances int
	logs      []string
	exits     []string // unexpected exits, for the report
}

func (s *supervised) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instances++
	path := filepath.Join(s.dir, fmt.Sprintf("%s.%d.log", s.name, s.instances))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := s.command(s.instances)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	s.logs = append(s.logs, path)
	return nil
}

// superviseOnce restarts the process if it has exited on its own.
func (s *supervised) superviseOnce() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	select {
	case <-done:
		s.mu.Lock()
		s.exits = append(s.exits, fmt.Sprintf("instance %d exited (%v): %s", s.instances, cmd.ProcessState, tail(s.logs[len(s.logs)-1], 5)))
		s.mu.Unlock()
		if err := s.start(); err != nil {
			s.t.Log(err)
		}
	default:
	}
}

func (s *supervised) kill9() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop ends the current instance with SIGTERM (it finishes what it holds), then SIGKILL
// after d.
func (s *supervised) stop(d time.Duration) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// lines is every log line of every instance, split into fields.
func (s *supervised) lines() [][]string {
	s.mu.Lock()
	logs := slices.Clone(s.logs)
	s.mu.Unlock()
	var out [][]string
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out = append(out, strings.Fields(sc.Text()))
		}
		f.Close()
	}
	return out
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, " | ")
}
