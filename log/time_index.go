package log

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// timeEntrySize is a time index entry: a timestamp (int64) and an offset relative to the
// segment's base offset (uint32), big-endian, as in Kafka's TimeIndex.
const timeEntrySize = 12

// timeIndex is a segment's sparse time index. Entry (T, O) says: the largest batch
// timestamp up to this index point is T, first reached by the batch with base offset O.
// Timestamps and offsets strictly increase. The last entry is the segment's largest
// timestamp once the segment is sealed.
type timeIndex struct {
	*indexFile
	base int64
}

// at returns entry i.
func (t *timeIndex) at(i int64) (ts, offset int64) {
	e := t.entry(i)
	return int64(binary.BigEndian.Uint64(e[0:])), t.base + int64(binary.BigEndian.Uint32(e[8:]))
}

// full reports whether the index is full for regular entries. The last slot is kept for
// the entry sealing adds, so that the largest timestamp always survives a restart.
func (t *timeIndex) full() bool { return t.entries() >= t.capacity-1 }

// lastEntry returns the newest entry.
func (t *timeIndex) lastEntry() (ts, offset int64, ok bool) {
	n := t.entries()
	if n == 0 {
		return -1, t.base, false
	}
	ts, offset = t.at(n - 1)
	return ts, offset, true
}

// maybeAdd appends (ts, offset) at an index point if ts is larger than the last entry's
// timestamp and a regular slot is free.
func (t *timeIndex) maybeAdd(ts, offset int64) error {
	if t.full() {
		return nil
	}
	return t.add(ts, offset)
}

// sealAdd records the segment's final largest timestamp, using the kept slot if needed.
func (t *timeIndex) sealAdd(ts, offset int64) error { return t.add(ts, offset) }

func (t *timeIndex) add(ts, offset int64) error {
	if ts < 0 {
		return nil
	}
	if last, _, ok := t.lastEntry(); ok && ts <= last {
		return nil
	}
	var e [timeEntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-t.base))
	return t.appendEntry(e[:])
}

// lookup returns the offset of the last entry whose timestamp is < ts. Every batch
// before that entry's batch has a smaller timestamp than ts, so a search for the first
// batch with a timestamp >= ts can start there. ok is false when there is none.
func (t *timeIndex) lookup(ts int64) (offset int64, ok bool) {
	n := t.entries()
	i := sort.Search(int(n), func(i int) bool {
		e, _ := t.at(int64(i))
		return e >= ts
	})
	if i == 0 {
		return t.base, false
	}
	_, offset = t.at(int64(i - 1))
	return offset, true
}

// truncateTo drops the entries of batches at offsets >= offset.
func (t *timeIndex) truncateTo(offset int64) {
	n := t.entries()
	i := sort.Search(int(n), func(i int) bool {
		_, off := t.at(int64(i))
		return off >= offset
	})
	t.truncateEntries(int64(i))
}

// check verifies that timestamps and offsets strictly increase.
func (t *timeIndex) check() error {
	n := t.entries()
	prevTs, prevOff := int64(-1), int64(-1)
	for i := int64(0); i < n; i++ {
		ts, off := t.at(i)
		if ts <= prevTs || off <= prevOff {
			return fmt.Errorf("%w: time index entry %d (timestamp %d, offset %d) out of order", errCorruptIndex, i, ts, off)
		}
		prevTs, prevOff = ts, off
	}
	return nil
}
