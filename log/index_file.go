package log

import (
	"fmt"
	"os"
	"sync/atomic"
)

// indexFile is a file of fixed-size entries, mapped into memory: the storage under both
// the offset index and the time index. A writable one is preallocated (sparse) to its
// capacity, with blocks reserved ahead of the last entry; a read-only one maps exactly
// the entries of a sealed segment. Readers see entries [0, n) through the atomic n; the
// single writer fills an entry before publishing it.
type indexFile struct {
	entrySize int64
	f         file
	data      []byte
	n         atomic.Int64
	capacity  int64        // entries the mapping holds
	res       *reservation // nil when read-only
}

// createIndexFile creates an empty, writable index of capacity entries at path,
// replacing any file there with a new one (a mapping of the old stays valid).
func createIndexFile(fsys fileSystem, path string, entrySize, capacity int64) (*indexFile, error) {
	if err := fsys.Remove(path); err != nil && !isNotExist(err) {
		return nil, storageError("remove stale index", err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, storageError("create index", err)
	}
	x, err := mapIndexWritable(f, entrySize, capacity, 0)
	if err != nil {
		f.Close()
		fsys.Remove(path)
		return nil, err
	}
	return x, nil
}

// openIndexFileWritable reopens the index at path for appending: the entries it holds
// are kept and it is extended to capacity entries (or one more than it holds).
func openIndexFileWritable(fsys fileSystem, path string, entrySize, capacity int64) (*indexFile, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	size, err := fileSize(f)
	if err != nil {
		f.Close()
		return nil, storageError("stat index", err)
	}
	if size%entrySize != 0 {
		f.Close()
		return nil, fmt.Errorf("%w: index %s has %d bytes, not a multiple of %d", errCorruptIndex, path, size, entrySize)
	}
	n := size / entrySize
	x, err := mapIndexWritable(f, entrySize, max(capacity, n+1), n)
	if err != nil {
		f.Close()
		return nil, err
	}
	return x, nil
}

func mapIndexWritable(f file, entrySize, capacity, n int64) (*indexFile, error) {
	size := capacity * entrySize
	if err := f.Truncate(size); err != nil {
		return nil, storageError("preallocate index", err)
	}
	data, err := f.Map(int(size), true)
	if err != nil {
		return nil, storageError("map index", err)
	}
	// Lookups are binary searches, and the preallocated tail is unwritten: read-around
	// would only zero-fill pages nobody asked for (see adviseRandom).
	adviseRandom(data, 0)
	x := &indexFile{entrySize: entrySize, f: f, data: data, capacity: capacity}
	x.res = &reservation{f: f, mapping: data, limit: size, chunk: indexReserveChunk}
	x.res.startAt(n * entrySize)
	x.n.Store(n)
	// Entries left from before (a reopened index) were written when the file was
	// written; reserve from there so that new entries never land in a hole.
	if err := x.res.ensure(min(size, (n+1)*entrySize)); err != nil {
		unmap(data)
		return nil, err
	}
	return x, nil
}

// openIndexFileReadOnly maps a sealed segment's index. A size that is not a whole
// number of entries means the file is damaged.
func openIndexFileReadOnly(fsys fileSystem, path string, entrySize int64) (*indexFile, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	size, err := fileSize(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if size%entrySize != 0 {
		f.Close()
		return nil, fmt.Errorf("%w: index %s has %d bytes, not a multiple of %d", errCorruptIndex, path, size, entrySize)
	}
	data, err := f.Map(int(size), false)
	if err != nil {
		f.Close()
		return nil, err
	}
	x := &indexFile{entrySize: entrySize, f: f, data: data, capacity: size / entrySize}
	x.n.Store(size / entrySize)
	return x, nil
}

// entries is the number of published entries.
func (x *indexFile) entries() int64 { return x.n.Load() }

// entry returns the bytes of entry i.
func (x *indexFile) entry(i int64) []byte {
	off := i * x.entrySize
	return x.data[off : off+x.entrySize]
}

// appendEntry writes e as the next entry and publishes it.
func (x *indexFile) appendEntry(e []byte) error {
	n := x.n.Load()
	if x.res == nil || n >= x.capacity {
		return fmt.Errorf("%w: index is read-only or full", errCorruptIndex)
	}
	end := (n + 1) * x.entrySize
	if err := x.res.ensure(end); err != nil {
		return err
	}
	if err := copyGuarded(x.data[n*x.entrySize:end], e); err != nil {
		return err
	}
	x.n.Store(n + 1)
	return nil
}

// reserveNext makes sure the next entry can be written, so that an append can fail
// before anything of it becomes visible.
func (x *indexFile) reserveNext() error {
	n := x.n.Load()
	if x.res == nil || n >= x.capacity {
		return nil
	}
	return x.res.ensure((n + 1) * x.entrySize)
}

// truncateEntries forgets entries [n, ...).
func (x *indexFile) truncateEntries(n int64) {
	if n < x.n.Load() {
		x.n.Store(n)
	}
}

// trim cuts the file to its entries, as a sealed or cleanly closed index is stored.
// The mapping stays valid for the entries.
func (x *indexFile) trim() error {
	if x.f == nil || x.res == nil { // read-only: a sealed index is stored trimmed
		return nil
	}
	if err := x.f.Truncate(x.n.Load() * x.entrySize); err != nil {
		return storageError("trim index", err)
	}
	return nil
}

// sync makes the entries durable.
func (x *indexFile) sync() error {
	if x.f == nil {
		return nil
	}
	if err := x.f.Sync(); err != nil {
		return storageError("sync index", err)
	}
	return nil
}

// close releases the mapping and the file.
func (x *indexFile) close() error {
	err := unmap(x.data)
	x.data = nil
	if x.f != nil {
		if cerr := x.f.Close(); err == nil {
			err = cerr
		}
		x.f = nil
	}
	return err
}
