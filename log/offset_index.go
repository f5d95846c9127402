package log

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// offsetEntrySize is an offset index entry: the batch's base offset relative to the
// segment's base offset (uint32) and the batch's byte position in the segment (uint32),
// both big-endian, as in Kafka's OffsetIndex.
const offsetEntrySize = 8

// offsetIndex is a segment's sparse offset index: one entry per index.interval.bytes of
// log, for the batch starting there. A lookup finds the last entry at or before an
// offset; the read scans batch headers from its position.
type offsetIndex struct {
	*indexFile
	base int64
}

// at returns entry i as an absolute offset and a position.
func (o *offsetIndex) at(i int64) (offset, pos int64) {
	e := o.entry(i)
	return o.base + int64(binary.BigEndian.Uint32(e[0:])), int64(binary.BigEndian.Uint32(e[4:]))
}

// full reports whether no entry fits any more; the segment then rolls.
func (o *offsetIndex) full() bool { return o.entries() >= o.capacity }

// add appends an entry for the batch with base offset at position pos.
func (o *offsetIndex) add(offset, pos int64) error {
	var e [offsetEntrySize]byte
	binary.BigEndian.PutUint32(e[0:], uint32(offset-o.base))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	return o.appendEntry(e[:])
}

// lookup returns the position of the last indexed batch whose base offset is <= target,
// and that batch's base offset; (base, 0) when there is none.
func (o *offsetIndex) lookup(target int64) (offset, pos int64) {
	n := o.entries()
	i := sort.Search(int(n), func(i int) bool {
		off, _ := o.at(int64(i))
		return off > target
	})
	if i == 0 {
		return o.base, 0
	}
	return o.at(int64(i - 1))
}

// last returns the last entry.
func (o *offsetIndex) last() (offset, pos int64, ok bool) {
	n := o.entries()
	if n == 0 {
		return o.base, 0, false
	}
	offset, pos = o.at(n - 1)
	return offset, pos, true
}

// truncateTo drops the entries of batches at offsets >= offset.
func (o *offsetIndex) truncateTo(offset int64) {
	n := o.entries()
	i := sort.Search(int(n), func(i int) bool {
		off, _ := o.at(int64(i))
		return off >= offset
	})
	o.truncateEntries(int64(i))
}

// check verifies what can be verified cheaply against the segment's log size: entries
// strictly increasing in offset and position, and positions inside the log.
func (o *offsetIndex) check(logSize int64) error {
	n := o.entries()
	prevOff, prevPos := int64(-1), int64(-1)
	for i := int64(0); i < n; i++ {
		off, pos := o.at(i)
		if off <= prevOff || pos <= prevPos || pos+BatchHeaderSize > logSize {
			return fmt.Errorf("%w: offset index entry %d (offset %d, position %d) out of order or beyond %d log bytes",
				errCorruptIndex, i, off, pos, logSize)
		}
		prevOff, prevPos = off, pos
	}
	return nil
}

// fitsRelative reports whether offset can be stored relative to base in an index entry.
func fitsRelative(base, offset int64) bool {
	d := offset - base
	return d >= 0 && d <= math.MaxUint32
}
