package datadir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// envHolder makes the test binary a lock holder: it takes the lock on the named
// directory, says so on stdout, and waits to be killed.
const envHolder = "SHALE_DATADIR_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHolder); dir != "" {
		l, err := Acquire(dir)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked", l.Path())
		select {}
	}
	os.Exit(m.Run())
}

func TestAcquireWritesOwner(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	pid, host := readOwner(filepath.Join(dir, FileName))
	if pid != os.Getpid() {
		t.Fatalf("lock file pid = %d, want %d", pid, os.Getpid())
	}
	if me, _ := os.Hostname(); host != me {
		t.Fatalf("lock file host = %q, want %q", host, me)
	}
}

func TestSecondAcquireFailsNamingHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	// flock locks belong to open file descriptions, so a second open in this process
	// conflicts just as another process would.
	l2, err := Acquire(dir)
	if err == nil {
		l2.Release()
		t.Fatal("second Acquire succeeded")
	}
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("err = %v, want ErrInUse", err)
	}
	var iu *InUseError
	if !errors.As(err, &iu) || iu.PID != os.Getpid() || iu.Host != "" {
		t.Fatalf("err = %#v, want pid %d and no host", err, os.Getpid())
	}
	want := fmt.Sprintf("log.dirs %s is in use by another shale process (pid %d); stop it or choose another directory", dir, os.Getpid())
	if err.Error() != want {
		t.Fatalf("message:\n got %q\nwant %q", err.Error(), want)
	}
}

func TestReleaseThenRelock(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if pid, _ := readOwner(filepath.Join(dir, FileName)); pid != 0 {
		t.Fatalf("released lock file still names pid %d", pid)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("relock after release: %v", err)
	}
	if err := l2.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestStaleFileDoesNotLock(t *testing.T) {
	dir := t.TempDir()
	// A file left by a holder that died: it names a pid, but nobody holds the flock.
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("pid=999999\nhost=elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("stale lock file blocked Acquire: %v", err)
	}
	defer l.Release()
	if pid, host := readOwner(l.Path()); pid != os.Getpid() || strings.Contains(host, "elsewhere") {
		t.Fatalf("lock file not rewritten: pid=%d host=%q", pid, host)
	}
}

func TestUnknownHolder(t *testing.T) {
	e := &InUseError{Dir: "/x"}
	if got := e.Error(); !strings.Contains(got, "(pid unknown)") {
		t.Fatalf("message %q does not say the pid is unknown", got)
	}
	e = &InUseError{Dir: "/x", PID: 7, Host: "h1"}
	if got := e.Error(); !strings.Contains(got, "(pid 7 on host h1)") {
		t.Fatalf("message %q does not name pid and host", got)
	}
}

func TestMissingDir(t *testing.T) {
	_, err := Acquire(filepath.Join(t.TempDir(), "absent"))
	if err == nil || errors.Is(err, ErrInUse) {
		t.Fatalf("err = %v, want an open error", err)
	}
}

// TestOtherProcessAndKill9: a lock held by another process names that process, and the
// kernel drops it when the process is killed with SIGKILL.
func TestOtherProcessAndKill9(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHolder+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "locked ") {
		t.Fatalf("holder said %q, %v", line, err)
	}

	_, err = Acquire(dir)
	var iu *InUseError
	if !errors.As(err, &iu) || iu.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while another process holds it: err = %v, want in use by pid %d", err, cmd.Process.Pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The kernel releases the flock as the process's files close; Wait returns after
	// that, but allow for a slow reap rather than assert on timing.
	var l *Lock
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err = Acquire(dir)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("lock still held after kill -9 of its holder: %v", err)
	}
	if pid, _ := readOwner(l.Path()); pid != os.Getpid() {
		t.Fatalf("lock file names pid %d after relock, want %d", pid, os.Getpid())
	}
	l.Release()
}
