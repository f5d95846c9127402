package log

import (
	"sync"
	"sync/atomic"
)

// reserveChunk is how much of the active segment one fallocate reserves: large enough
// that it runs once per several MiB of appends, small enough that a nearly full disk is
// noticed early and little space sits idle.
const reserveChunk = 4 << 20

// reserveAhead is how far ahead of the write position the background keeps the active
// segment reserved and pre-faulted, so that appends rarely wait for either.
const reserveAhead = 2 * reserveChunk

// indexReserveChunk is the same for index files, which grow 8 or 12 bytes per
// index.interval.bytes of log; they are reserved synchronously.
const indexReserveChunk = 64 << 10

// reservation keeps real disk blocks allocated (fallocate) ahead of the write position
// of a preallocated (sparse) file. Writing into a hole of a mapping on a full disk raises
// SIGBUS; writing into a reserved block cannot fail for lack of space. A failed
// reservation becomes ErrStorage before anything is written. Segments are written with
// pwrite, which would report ENOSPC by itself, but reserving ahead still fails early, in
// one place, and keeps the file's blocks contiguous.
//
// (Zero-filling the reserved range with pwrite, to bring its pages in more cheaply than
// faults do, was measured and rejected: it dirties the pages twice, and appends were
// several times slower with it.)
//
// A reservation starts at the end of the data already in the file, which is allocated.
//
// With background set, a short-lived goroutine keeps reserveAhead bytes reserved and,
// when there is a mapping to write through, pre-faults them (MADV_POPULATE_WRITE), off
// the appender's path: fallocate waits on the file system journal and faults cost a
// trap per page, either of which can take longer than the copy itself. The appender
// reserves synchronously only when it catches up.
type reservation struct {
	f       file
	mapping []byte // the writable mapping of f that is pre-faulted; nil for none
	limit   int64  // the file's (preallocated) size; nothing is reserved beyond it
	chunk   int64

	mu       sync.Mutex   // serializes Allocate calls
	reserved atomic.Int64 // [0, reserved) is allocated

	background bool
	running    atomic.Bool // a background reservation is in flight
	stopped    atomic.Bool
	wg         sync.WaitGroup
	populated  int64 // [0, populated) was pre-faulted; background goroutine only
}

// startAt records that [0, end) already holds data, hence is allocated.
func (r *reservation) startAt(end int64) {
	r.reserved.Store(end)
	r.populated = end
}

// ensure reserves at least [0, end).
func (r *reservation) ensure(end int64) error {
	if end <= r.reserved.Load() {
		r.kick(end)
		return nil
	}
	if end > r.limit {
		return storageError("reserve", errBeyondCapacity)
	}
	r.mu.Lock()
	err := r.allocateLocked(end, true)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if !r.background && int64(len(r.mapping)) >= end {
		// Pre-fault what the synchronous path reserved, as the background would.
		r.populateTo(r.reserved.Load())
	}
	r.kick(end)
	return nil
}

// allocateLocked reserves from the current end up to at least end, a chunk at a time;
// with fallback, a chunk that does not fit is retried as exactly what end needs.
func (r *reservation) allocateLocked(end int64, fallback bool) error {
	reserved := r.reserved.Load()
	if end <= reserved {
		return nil
	}
	target := min(max(end, reserved+r.chunk), r.limit)
	err := r.f.Allocate(reserved, target-reserved)
	if err != nil && fallback && target > end {
		// A nearly full disk may still hold what this write needs.
		target = end
		err = r.f.Allocate(reserved, target-reserved)
	}
	if err != nil {
		return storageError("reserve space in "+r.f.Name(), err)
	}
	r.reserved.Store(target)
	return nil
}

// kick starts a background reservation when the reserved space ahead of end runs low.
func (r *reservation) kick(end int64) {
	if !r.background || r.stopped.Load() || r.reserved.Load()-end >= reserveAhead || r.reserved.Load() >= r.limit {
		return
	}
	if !r.running.CompareAndSwap(false, true) {
		return
	}
	// Under mu, so that stop cannot miss a goroutine starting as it stops.
	r.mu.Lock()
	if r.stopped.Load() {
		r.mu.Unlock()
		r.running.Store(false)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer r.running.Store(false)
		target := min(end+reserveAhead, r.limit)
		for !r.stopped.Load() {
			r.mu.Lock()
			// No fallback: on a nearly full disk the appender reserves exactly what it
			// needs itself, and reports the failure.
			err := r.allocateLocked(min(r.reserved.Load()+r.chunk, target), false)
			r.mu.Unlock()
			if err != nil {
				return
			}
			r.populateTo(r.reserved.Load())
			if r.reserved.Load() >= target {
				return
			}
		}
	}()
}

// populateTo pre-faults the mapping up to end. Concurrent appends into the same pages
// are harmless: populating never changes their contents.
func (r *reservation) populateTo(end int64) {
	end = min(end, int64(len(r.mapping)))
	if r.populated < end {
		populate(r.mapping[r.populated:end])
		r.populated = end
	}
}

// stop ends background work and waits for it; needed before the file is trimmed or the
// mapping released.
func (r *reservation) stop() {
	r.mu.Lock()
	r.stopped.Store(true)
	r.mu.Unlock()
	r.wg.Wait()
}
