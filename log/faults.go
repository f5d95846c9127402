package log

import (
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
	inner, err := fs.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultyFile{file: inner, f: fs.f}, nil
}

func (fs faultyFS) SyncDir(path string) error {
	if err := fs.f.syncFault(); err != nil {
		return err
	}
	return fs.fileSystem.SyncDir(path)
}

type faultyFile struct {
	file
	f *Faults
}

func (ff faultyFile) Sync() error {
	if err := ff.f.syncFault(); err != nil {
		return err
	}
	return ff.file.Sync()
}
