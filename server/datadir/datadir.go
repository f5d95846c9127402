// Package datadir keeps two Shale processes out of one data directory (log.dirs).
//
// Without it a second `shale serve` on a directory in use blocks for ever on the Raft
// store's own file lock, says nothing and ignores SIGTERM. A lock file taken before
// anything else opens the directory turns that into an immediate error that names the
// process holding it.
//
// The lock is a flock(2) on <dir>/.lock, so the kernel drops it when the holder exits,
// however it exits (kill -9 included): a stale file never keeps a directory locked.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileName is the lock file's name inside the data directory. A dot file, so that the
// partition manager (which only looks at "<topic>-<n>" directories) ignores it.
const FileName = ".lock"

// ErrInUse is what errors.Is finds in the error of Acquire when another process (or
// another Acquire in this process) holds the directory.
var ErrInUse = errors.New("data directory in use")

// InUseError says who holds the directory, as far as its lock file tells.
type InUseError struct {
	Dir string
	// PID is the holder's process id, 0 when the file did not say (yet).
	PID int
	// Host is the holder's host name when the file names one other than this host.
	Host string
}

func (e *InUseError) Error() string {
	who := "pid unknown"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
	}
	if e.Host != "" {
		who += " on host " + e.Host
	}
	return fmt.Sprintf("log.dirs %s is in use by another shale process (%s); stop it or choose another directory", e.Dir, who)
}

func (e *InUseError) Unwrap() error { return ErrInUse }

// Lock is a held data directory lock.
type Lock struct {
	f    *os.File
	path string
}

// pidWait bounds how long Acquire waits for a new holder to write its pid: the holder
// writes it right after taking the lock, so an empty file is only ever seen briefly.
const pidWait = 200 * time.Millisecond

// Acquire takes the lock on dir, which must exist, without blocking. If another process
// holds it, the error is an *InUseError (errors.Is(err, ErrInUse)) naming that process.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, FileName)
	// No O_TRUNC: opening must not wipe the holder's pid before we know we are the holder.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, holder(dir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	if err := writeOwner(f, os.Getpid(), host); err != nil {
		f.Close() // drops the flock too
		return nil, fmt.Errorf("write lock file %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}

func writeOwner(f *os.File, pid int, host string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	line := fmt.Sprintf("pid=%d\nhost=%s\n", pid, host)
	if _, err := f.WriteAt([]byte(line), 0); err != nil {
		return err
	}
	return nil
}

// holder builds the error for a directory someone else holds, reading who from the file.
func holder(dir, path string) error {
	e := &InUseError{Dir: dir}
	deadline := time.Now().Add(pidWait)
	for {
		pid, host := readOwner(path)
		if pid > 0 {
			e.PID = pid
			if me, _ := os.Hostname(); host != me {
				e.Host = host
			}
			return e
		}
		if time.Now().After(deadline) {
			return e
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readOwner(path string) (pid int, host string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "pid":
			pid, _ = strconv.Atoi(v)
		case "host":
			host = v
		}
	}
	return pid, host
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release gives the directory up. The file stays (removing it would let a process that
// opened it just before take a lock on an unlinked file while a third creates a new one);
// its contents are cleared so that it names no one.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	terr := l.f.Truncate(0)
	cerr := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	if terr != nil {
		return fmt.Errorf("clear lock file %s: %w", l.path, terr)
	}
	if cerr != nil {
		return fmt.Errorf("close lock file %s: %w", l.path, cerr)
	}
	return nil
}
