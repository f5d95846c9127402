package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileSystem is every file operation the log performs, so that tests can inject the
// faults a real disk produces (ENOSPC on a reservation, EIO on fsync) without one.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(path string, perm os.FileMode) error
	RemoveAll(path string) error
	// SyncDir makes renames and removals inside the directory durable.
	SyncDir(path string) error
	// Lock takes an exclusive advisory lock on the file at path (creating it), failing
	// at once if another holder has it; closing the result releases it.
	Lock(path string) (io.Closer, error)
}

// file is an open file of a fileSystem.
type file interface {
	Name() string
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	// Allocate reserves real disk blocks for [off, off+n) without changing the file size
	// when the range lies inside it, so that later writes through a mapping cannot fault.
	Allocate(off, n int64) error
	// Sync makes the file's data durable (fdatasync).
	Sync() error
	// Writeback starts writing the dirty pages of [off, off+n) to disk and returns
	// without waiting (sync_file_range SYNC_FILE_RANGE_WRITE): it bounds dirty data, it
	// makes nothing durable. Where unsupported it fails with ENOSYS or EINVAL.
	Writeback(off, n int64) error
	// Map maps the first length bytes of the file, shared, readable and optionally
	// writable. The mapping outlives Close and is released with unmap.
	Map(length int, writable bool) ([]byte, error)
	Close() error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }

func (osFS) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Lock(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, errLocked
		}
		return nil, err
	}
	return f, nil
}

type osFile struct {
	f *os.File
	// noFallocate is set once the file system said it cannot fallocate; reservations
	// then write zeros, which allocates blocks just as well, only slower.
	noFallocate bool
}

func (o *osFile) Name() string                             { return o.f.Name() }
func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Close() error                             { return o.f.Close() }

func (o *osFile) Stat() (os.FileInfo, error) { return o.f.Stat() }

func (o *osFile) Sync() error {
	for {
		err := unix.Fdatasync(int(o.f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

func (o *osFile) Writeback(off, n int64) error {
	return syncFileRangeWrite(int(o.f.Fd()), off, n)
}

func (o *osFile) Allocate(off, n int64) error {
	if n <= 0 {
		return nil
	}
	if !o.noFallocate {
		for {
			err := unix.Fallocate(int(o.f.Fd()), 0, off, n)
			if err == nil {
				return nil
			}
			if err == unix.EINTR {
				continue
			}
			if err != unix.EOPNOTSUPP && err != unix.ENOSYS {
				return err
			}
			o.noFallocate = true
			break
		}
	}
	// The range is always beyond the last written byte, so zeros destroy nothing.
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		w := min(n, int64(len(zeros)))
		if _, err := o.f.WriteAt(zeros[:w], off); err != nil {
			return err
		}
		off += w
		n -= w
	}
	return nil
}

func (o *osFile) Map(length int, writable bool) ([]byte, error) {
	if length <= 0 {
		return nil, nil
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(int(o.f.Fd()), 0, length, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", o.f.Name(), err)
	}
	return b, nil
}

// writevAt writes a then b at off with one pwritev.
func (o *osFile) writevAt(a, b []byte, off int64) (int, error) {
	for {
		n, err := unix.Pwritev(int(o.f.Fd()), [][]byte{a, b}, off)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// writeVectorAt writes a then b to f at off: in one system call when f can (the real
// file system), else with WriteAt (the tests' fault-injecting wrappers see every byte).
func writeVectorAt(f file, a, b []byte, off int64) error {
	if v, ok := f.(interface {
		writevAt(a, b []byte, off int64) (int, error)
	}); ok {
		n, err := v.writevAt(a, b, off)
		if err != nil {
			return err
		}
		if n == len(a)+len(b) {
			return nil
		}
		// A short write (a signal, or the disk filling up): finish what is left, which
		// reports the error if there is one.
		if n < len(a) {
			a = a[n:]
		} else {
			b, a = b[n-len(a):], nil
		}
		off += int64(n)
	}
	if len(a) > 0 {
		if _, err := f.WriteAt(a, off); err != nil {
			return err
		}
		off += int64(len(a))
	}
	_, err := f.WriteAt(b, off)
	return err
}

// pageFloor rounds off down to a page boundary.
func pageFloor(off int64) int64 { return off &^ int64(os.Getpagesize()-1) }

// unmap releases a mapping made by file.Map.
func unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}

// populate pre-faults a writable mapping's pages so that appends copy into resident
// pages instead of taking a page fault every 4 KiB. It is only an optimisation: kernels
// without MADV_POPULATE_WRITE (before 5.14) just skip it.
func populate(b []byte) { advise(b, unix.MADV_POPULATE_WRITE) }

// advise passes a hint about a mapping to the kernel. Every use is an optimisation, so
// a kernel that refuses one only loses the speed-up.
func advise(b []byte, advice int) {
	if len(b) > 0 {
		_ = unix.Madvise(b, advice)
	}
}

// adviseRandom turns off read-around for faults in a writable mapping, from the page
// holding off onwards. A fault on a page that is not cached reads around it
// (read_ahead_kb, often several MiB); ahead of the write position those pages are
// preallocated, unwritten blocks that the kernel zero-fills in one non-preemptible stretch.
// With read_ahead_kb=8192 that was 2048 pages and about 20 ms of CPU per fault, during
// which nothing else ran on that core (PREEMPT_NONE kernels). That showed as 20-40 ms
// stalls in produce and fetch latency. Each fault now brings in only its own page.
func adviseRandom(b []byte, off int64) {
	off = off &^ int64(os.Getpagesize()-1)
	if off < int64(len(b)) {
		advise(b[off:], unix.MADV_RANDOM)
	}
}

// adviseNormal restores default read-around, for a sealed segment that is only read.
func adviseNormal(b []byte) { advise(b, unix.MADV_NORMAL) }

// adviseSequential tells the kernel a mapping is about to be read front to back.
func adviseSequential(b []byte) { advise(b, unix.MADV_SEQUENTIAL) }

// readWholeFile reads a small file through fsys.
func readWholeFile(fsys fileSystem, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	if size > 1<<20 {
		return nil, fmt.Errorf("%s: %d bytes is too large for a checkpoint", name, size)
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		return b, nil
	}
	return nil, err
}

// writeFileAtomic replaces name with data durably: write a temporary file, fsync it,
// rename it over name and fsync the directory, so a crash leaves the old or the new
// content, never a torn one.
func writeFileAtomic(fsys fileSystem, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(name))
}

// isNotExist reports whether err says a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// fileSize returns the size of an open file.
func fileSize(f file) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
