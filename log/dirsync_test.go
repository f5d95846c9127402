package log

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// dirCrashFS is the real file system that remembers which names were added to a
// directory since that directory was last fsynced. fdatasync on a file makes its bytes
// durable but not its name: on a power loss the kernel may lose every directory entry
// not yet synced, and the file with it, however often the file itself was synced.
// crash simulates that moment: it freezes the file system (every later change fails, so
// that nothing still running in the background can write after the "power loss") and
// returns the names a crash may lose.
//
// Simplifications: a rename counts as adding its target (losing it stands for recovering
// from the older checkpoint, which is more pessimistic than reverting it), and removals
// that were not synced are not brought back.
type dirCrashFS struct {
	osFS
	mu       sync.Mutex
	pending  map[string]bool // names added whose directory was not synced since
	frozen   bool
	dirSyncs int
}

func newDirCrashFS() *dirCrashFS { return &dirCrashFS{pending: map[string]bool{}} }

// crash freezes the file system and returns the names whose directory entries are not
// yet durable, sorted.
func (f *dirCrashFS) crash() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
	var lost []string
	for name := range f.pending {
		lost = append(lost, name)
	}
	sort.Strings(lost)
	return lost
}

func (f *dirCrashFS) syncsOfDir() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dirSyncs
}

func (f *dirCrashFS) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

func (f *dirCrashFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen && flag&(os.O_CREATE|os.O_WRONLY|os.O_RDWR|os.O_TRUNC) != 0 {
		return nil, errEIO
	}
	added := false
	if flag&os.O_CREATE != 0 {
		if _, err := os.Stat(name); os.IsNotExist(err) {
			added = true
		}
	}
	inner, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if added {
		f.pending[filepath.Clean(name)] = true
	}
	return &dirCrashFile{file: inner, fs: f}, nil
}

func (f *dirCrashFS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return errEIO
	}
	delete(f.pending, filepath.Clean(name))
	return f.osFS.Remove(name)
}

func (f *dirCrashFS) Rename(oldpath, newpath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return errEIO
	}
	if err := f.osFS.Rename(oldpath, newpath); err != nil {
		return err
	}
	delete(f.pending, filepath.Clean(oldpath))
	f.pending[filepath.Clean(newpath)] = true
	return nil
}

func (f *dirCrashFS) MkdirAll(path string, perm os.FileMode) error {
	if f.isFrozen() {
		return errEIO
	}
	return f.osFS.MkdirAll(path, perm)
}

func (f *dirCrashFS) RemoveAll(path string) error {
	if f.isFrozen() {
		return errEIO
	}
	return f.osFS.RemoveAll(path)
}

func (f *dirCrashFS) SyncDir(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return errEIO
	}
	if err := f.osFS.SyncDir(path); err != nil {
		return err
	}
	f.dirSyncs++
	dir := filepath.Clean(path)
	for name := range f.pending {
		if filepath.Dir(name) == dir {
			delete(f.pending, name)
		}
	}
	return nil
}

type dirCrashFile struct {
	file
	fs *dirCrashFS
}

func (f *dirCrashFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.isFrozen() {
		return 0, errEIO
	}
	return f.file.WriteAt(p, off)
}

func (f *dirCrashFile) Truncate(size int64) error {
	if f.fs.isFrozen() {
		return errEIO
	}
	return f.file.Truncate(size)
}

func (f *dirCrashFile) Allocate(off, n int64) error {
	if f.fs.isFrozen() {
		return errEIO
	}
	return f.file.Allocate(off, n)
}

func (f *dirCrashFile) Sync() error {
	if f.fs.isFrozen() {
		return errEIO
	}
	return f.file.Sync()
}

// TestFlushMessagesSyncsNewSegmentsDirectory: under flush.messages=1 every append below
// the flushed offset is durable. A roll creates a new segment file, and fdatasync
// of that file does not make its directory entry durable, so the flush after a roll must
// sync the log directory too: a crash that loses the unsynced directory entries must
// lose no appended record.
func TestFlushMessagesSyncsNewSegmentsDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.FlushMessages = 1
	fsys := newDirCrashFS()
	l, err := openLog(dir, cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the background flusher out until the crash: its recovery-point checkpoint
	// syncs the directory too, which would hide the bug some of the time. The group
	// commit never takes flushMu.
	l.flushMu.Lock()
	before := fsys.syncsOfDir()
	for i := 0; i < 10; i++ {
		mustAppend(t, l, sizedBatch(t, 1000, int64(i)), 0)
	}
	waitFlushed(t, l) // acknowledged: the group commit covered every append
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments: the test needs rolls", l.NumSegments())
	}
	if fsys.syncsOfDir() == before {
		t.Errorf("no directory sync in %d appends under flush.messages=1 that rolled %d segments", 10, l.NumSegments()-1)
	}
	want := readAll(t, l, 0)
	lost := fsys.crash()
	l.flushMu.Unlock()
	l.crashForTest()
	for _, name := range lost {
		t.Logf("crash loses the directory entry of %s", filepath.Base(name))
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	reopenAndCheck(t, dir, cfg, want)
}
