package lazyfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testLimit bounds each test: these run in `go test ./...`, which a wedged mount must
// not hang (nor leave mounted when go test's own -timeout kills the binary).
const testLimit = 2 * time.Minute

// mount mounts a fresh backing directory, skipping where FUSE is unavailable, and
// unmounts at cleanup even if the test fails. Past testLimit the mount is aborted, which
// fails whatever of the test waits on it, and the test fails.
func mount(t *testing.T) (*FS, string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("FUSE tests skipped: %v", err)
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Skipf("cannot mount FUSE here (unprivileged?): %v", err)
	}
	stop, expired := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(expired)
		select {
		case <-stop:
		case <-time.After(testLimit):
			t.Errorf("still running after %v: mount aborted", testLimit)
			if err := f.Abort(); err != nil {
				t.Error(err)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-expired
		if t.Failed() {
			// Whatever failed may have left the mount wedged: no clean unmount to wait for.
			if err := f.Abort(); err != nil {
				t.Error(err)
			}
		}
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f, mnt
}

func write(t *testing.T, path string, data []byte, off int64, sync bool) {
	t.Helper()
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := file.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func cut(t *testing.T, f *FS) int {
	t.Helper()
	n, err := f.Cut()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), got, want)
	}
}

func TestUnsyncedWriteIsLost(t *testing.T) {
	f, mnt := mount(t)
	p := filepath.Join(mnt, "a")
	write(t, p, []byte("hello"), 0, false)
	wantContent(t, p, []byte("hello"))
	if n := cut(t, f); n != 1 {
		t.Fatalf("cut rolled back %d files, want 1", n)
	}
	// Directory entries are not modelled: the file stays, empty.
	wantContent(t, p, nil)
}

func TestSyncedWriteIsKept(t *testing.T) {
	f, mnt := mount(t)
	p := filepath.Join(mnt, "a")
	write(t, p, []byte("synced"), 0, true)
	if f.Pending() != 0 {
		t.Fatalf("%d files pending after fsync", f.Pending())
	}
	cut(t, f)
	wantContent(t, p, []byte("synced"))
}

// Appends and overwrites after a sync go; the synced bytes come back, including those
// overwritten and those truncated away.
func TestRollBackToLastSync(t *testing.T) {
	f, mnt := mount(t)
	p := filepath.Join(mnt, "log")
	write(t, p, []byte("0123456789"), 0, true)
	write(t, p, []byte("abc"), 10, false) // append
	write(t, p, []byte("XY"), 2, false)   // overwrite synced bytes
	write(t, p, []byte("Z"), 3, false)    // and again
	if err := os.Truncate(p, 5); err != nil {
		t.Fatal(err)
	}
	write(t, p, []byte("QQQQ"), 6, false) // past the truncation, inside the synced size
	file, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := file.Truncate(4); err != nil {
		t.Fatal(err)
	}
	file.Close()
	cut(t, f)
	wantContent(t, p, []byte("0123456789"))

	// A second round from the restored state: a sync in the middle keeps what came
	// before it.
	write(t, p, []byte("AB"), 0, false)
	write(t, p, []byte("cd"), 10, true)
	write(t, p, []byte("ef"), 12, false)
	write(t, p, []byte("--"), 0, false)
	cut(t, f)
	wantContent(t, p, []byte("AB23456789cd"))
}

// Files are tracked by inode: a rename keeps the record, so the renamed file rolls back;
// the rename itself (a directory entry) survives the cut.
func TestRenameKeepsTrack(t *testing.T) {
	f, mnt := mount(t)
	p, q := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	write(t, p, []byte("base"), 0, true)
	write(t, p, []byte("-more"), 4, false)
	if err := os.Rename(p, q); err != nil {
		t.Fatal(err)
	}
	write(t, q, []byte("!"), 0, false)
	cut(t, f)
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("old name after cut: %v", err)
	}
	wantContent(t, q, []byte("base"))

	// Synced through the new name: kept.
	write(t, q, []byte("BASE+"), 0, true)
	cut(t, f)
	wantContent(t, q, []byte("BASE+"))
}

// A shared writable mapping reaches the file system through the kernel's writeback;
// msync makes it durable, like fsync. The mapping is written by a child process: a page
// fault on the mount taken by this process, which serves the mount, can deadlock against
// the Go runtime stopping the world (the faulting thread cannot stop until the fault is
// served, and the goroutines that would serve it are stopped).
func TestMmapWrites(t *testing.T) {
	f, mnt := mount(t)
	p := filepath.Join(mnt, "idx")
	write(t, p, make([]byte, 8192), 0, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMmapChild$", "-test.count=1")
	child.Env = append(os.Environ(), "LAZYFS_MMAP_CHILD="+p)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("mmap child: %v\n%s", err, out)
	}
	cut(t, f)
	want := make([]byte, 8192)
	copy(want, "synced")
	wantContent(t, p, want)
}

// TestMmapChild is TestMmapWrites's child process; on its own it does nothing.
func TestMmapChild(t *testing.T) {
	p := os.Getenv("LAZYFS_MMAP_CHILD")
	if p == "" {
		t.Skip("run by TestMmapWrites")
	}
	m := mapFile(t, p, 8192)
	copy(m[0:], "synced")
	msync(t, m)
	copy(m[4096:], "lost")
	unmapFile(t, m)
}

// Abort frees a process stuck in a request the server does not answer, detaches the
// mount, and is final: a cut after it fails rather than mount again. The server is
// wedged by holding the lock its write handler takes.
func TestAbortUnblocksAWedgedMount(t *testing.T) {
	f, mnt := mount(t)
	_, release, err := fusectl()
	if err != nil {
		t.Skipf("Abort cannot abort a connection here: %v", err)
	}
	release()
	p := filepath.Join(mnt, "a")
	file, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	f.mu.Lock()
	locked := true
	defer func() {
		if locked {
			f.mu.Unlock()
		}
	}()
	written := make(chan error, 1)
	go func() {
		_, err := file.WriteAt([]byte("stuck"), 0)
		written <- err
	}()
	aborted := make(chan error, 1)
	go func() { aborted <- f.Abort() }()
	select {
	case err := <-written:
		if err == nil {
			t.Fatal("a write to an aborted mount succeeded")
		}
		t.Logf("the write failed as it should: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("a write stuck in the server was not freed by Abort within 60s")
	}
	// Only now may the wedged handler go on (its answer goes nowhere), and the server end.
	f.mu.Unlock()
	locked = false
	select {
	case err := <-aborted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Abort did not return within 60s")
	}
	var mst, dst unix.Stat_t
	if err := unix.Stat(mnt, &mst); err != nil {
		t.Fatalf("mount point after abort: %v", err)
	}
	if err := unix.Stat(filepath.Dir(mnt), &dst); err != nil {
		t.Fatal(err)
	}
	if mst.Dev != dst.Dev {
		t.Fatalf("%s still a mount point after abort", mnt)
	}
	if _, err := f.Cut(); err == nil {
		t.Fatal("a cut after abort mounted again")
	}
}
