package log

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGuardsTurnSIGBUSIntoErrors maps a file past its end and touches the pages beyond
// it, which raises SIGBUS: the guards must report ErrStorage instead of crashing.
func TestGuardsTurnSIGBUSIntoErrors(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "short"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := os.Getpagesize()
	if err := f.Truncate(int64(page)); err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	if err := copyGuarded(data[:page], []byte("inside the file")); err != nil {
		t.Fatalf("copy inside the file: %v", err)
	}
	if err := copyGuarded(data[2*page:], []byte("beyond the end")); !isErr(err, ErrStorage) || !isErr(err, errFault) {
		t.Fatalf("copy beyond the end: %v", err)
	}
	var got byte
	err = guardFault(func() error {
		got = data[3*page] // a read beyond the end faults too
		return nil
	})
	if !isErr(err, ErrStorage) {
		t.Fatalf("read beyond the end: %v (read %d)", err, got)
	}
	// Other panics are not swallowed.
	defer func() {
		if recover() == nil {
			t.Fatal("a non-fault panic was swallowed")
		}
	}()
	guardFault(func() error { panic("not a fault") })
}

func TestOpenTwiceIsRefused(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(nil))
	if _, err := Open(dir, testConfig(nil)); !isErr(err, errLocked) {
		t.Fatalf("second Open of an open log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(nil))
	l.Close()
}
