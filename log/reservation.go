package log

// reserveChunk is how far ahead of the write position the active segment's blocks are
// reserved: large enough that fallocate runs once per several MiB of appends, small
// enough that a nearly full disk is noticed early and little space sits idle.
const reserveChunk = 4 << 20

// indexReserveChunk is the same for index files, which grow 8 or 12 bytes per
// index.interval.bytes of log.
const indexReserveChunk = 64 << 10

// reservation keeps real disk blocks allocated ahead of the write position of a
// preallocated (sparse) file that is written through a mapping. Writing into a hole on
// a full disk raises SIGBUS; writing into a reserved block cannot fail for lack of space.
// A failed reservation becomes ErrStorage before anything is written.
type reservation struct {
	f        file
	mapping  []byte // the writable mapping of f, pre-faulted as blocks are reserved
	reserved int64  // [0, reserved) is allocated
	limit    int64  // the file's (preallocated) size; nothing is reserved beyond it
	chunk    int64
}

// ensure reserves at least [0, end).
func (r *reservation) ensure(end int64) error {
	if end <= r.reserved {
		return nil
	}
	if end > r.limit {
		return storageError("reserve", errBeyondCapacity)
	}
	target := min(max(end, r.reserved+r.chunk), r.limit)
	err := r.f.Allocate(r.reserved, target-r.reserved)
	if err != nil && target > end {
		// A nearly full disk may still hold what this write needs.
		target = end
		err = r.f.Allocate(r.reserved, target-r.reserved)
	}
	if err != nil {
		return storageError("reserve space in "+r.f.Name(), err)
	}
	if int64(len(r.mapping)) >= target {
		populate(r.mapping[r.reserved:target])
	}
	r.reserved = target
	return nil
}
