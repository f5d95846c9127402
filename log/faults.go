package log

import (
	"errors"
	"os"
	"sync"
)

// Faults injects the failures of a broken disk into the logs opened with it
// (Config.Faults): for the tests of the packages built on the log, which cannot wrap its
// file system themselves, and for simulations. The zero Faults injects nothing; its
// methods may be called at any time from any goroutine. A log keeps the Faults it was
// opened with: SetConfig does not change it.
type Faults struct {
	mu      sync.Mutex
	syncErr error
	// dur, when set, tracks what is durable (TrackDurability).
	dur *durability
}

// FailSyncs makes every fsync of the logs opened with f, of a file or of a directory,
// fail with err (syscall.EIO, say) until it is called again with nil.
func (f *Faults) FailSyncs(err error) {
	f.mu.Lock()
	f.syncErr = err
	f.mu.Unlock()
}

func (f *Faults) syncFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncErr
}

// faultyFS is a fileSystem with Faults applied.
type faultyFS struct {
	fileSystem
	f *Faults
}

func (fs faultyFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	track := fs.f.tracking() != nil
	created := false
	if track && flag&os.O_CREATE != 0 {
		_, err := os.Lstat(name)
		created = errors.Is(err, os.ErrNotExist)
	}
	inner, err := fs.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	ff := faultyFile{file: inner, f: fs.f}
	if track {
		ff.id = fs.f.opened(name, inner, created)
	}
	return ff, nil
}

func (fs faultyFS) SyncDir(path string) error {
	if err := fs.f.syncFault(); err != nil {
		return err
	}
	if err := fs.fileSystem.SyncDir(path); err != nil {
		return err
	}
	if fs.f.tracking() != nil {
		fs.f.syncedDir(path)
	}
	return nil
}

func (fs faultyFS) Rename(oldpath, newpath string) error {
	if err := fs.fileSystem.Rename(oldpath, newpath); err != nil {
		return err
	}
	if fs.f.tracking() != nil {
		fs.f.renamed(oldpath, newpath)
	}
	return nil
}

func (fs faultyFS) Remove(name string) error {
	if err := fs.fileSystem.Remove(name); err != nil {
		return err
	}
	if fs.f.tracking() != nil {
		fs.f.removed(name)
	}
	return nil
}

func (fs faultyFS) RemoveAll(path string) error {
	if err := fs.fileSystem.RemoveAll(path); err != nil {
		return err
	}
	if fs.f.tracking() != nil {
		fs.f.removedAll(path)
	}
	return nil
}

type faultyFile struct {
	file
	f *Faults
	// id is the tracker's id of the file, 0 when durability is not tracked.
	id uint64
}

func (ff faultyFile) Sync() error {
	if err := ff.f.syncFault(); err != nil {
		return err
	}
	if err := ff.file.Sync(); err != nil {
		return err
	}
	if ff.id != 0 {
		ff.f.synced(ff.file, ff.id)
	}
	return nil
}
