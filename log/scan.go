package log

import (
	"encoding/binary"
	"fmt"
)

// scanResult is what a full scan of a segment's bytes finds: the valid prefix and the
// index entries it should have.
type scanResult struct {
	valid   int64 // bytes of whole valid batches from the start
	batches int
	next    int64 // offset after the last valid batch (the base offset if none)
	firstTs int64 // MaxTimestamp of the first batch, -1 if none
	state   indexState
	offsets []offsetEntry
	times   []timeEntry
	// stop says why the scan ended before the end of the data; nil when it reached it.
	stop error
	// zeroTail is set when the scan ended at zero bytes: the normal end of a
	// preallocated segment, not damage.
	zeroTail bool
}

type offsetEntry struct{ offset, pos int64 }
type timeEntry struct{ ts, offset int64 }

// scanSegment walks the batches of a segment with base offset base, verifying each
// (CRC, header invariants, offsets increasing, below limit, and storable relative to the
// base), and stops at the first that fails. interval is index.interval.bytes.
func scanSegment(data []byte, base, limit, interval int64) scanResult {
	r := scanResult{next: base, firstTs: -1, state: newIndexState(base)}
	lastTs := int64(-1)
	pos := int64(0)
	size := int64(len(data))
	for pos < size {
		h, err := validateStoredHeader(data[pos:])
		if err != nil {
			r.stop = err
			r.zeroTail = allZero(data[pos:min(size, pos+BatchHeaderSize)])
			break
		}
		if h.BaseOffset < r.next || h.LastOffset() >= limit || !fitsRelative(base, h.LastOffset()) {
			r.stop = fmt.Errorf("%w: batch at position %d has offsets [%d, %d], expected from %d below %d",
				ErrCorruptMessage, pos, h.BaseOffset, h.LastOffset(), r.next, limit)
			break
		}
		if r.state.due(pos, interval) {
			r.offsets = append(r.offsets, offsetEntry{h.BaseOffset, pos})
			if r.state.maxTs > lastTs && r.state.maxTs >= 0 {
				r.times = append(r.times, timeEntry{r.state.maxTs, r.state.maxTsOffset})
				lastTs = r.state.maxTs
			}
			r.state.indexed()
		}
		n := int64(h.Size())
		r.state.add(n, h.BaseOffset, h.MaxTimestamp)
		if pos == 0 {
			r.firstTs = h.MaxTimestamp
		}
		r.next = h.LastOffset() + 1
		r.batches++
		pos += n
	}
	r.valid = pos
	return r
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// batchRef is what reads need of a batch already in a segment.
type batchRef struct {
	base, last int64
	size       int64
}

// batchAt reads the batch at pos of data[:size] without verifying it: batches in a
// segment were verified when appended or recovered. It only checks that the batch lies
// inside, which matters when a truncation races with a reader.
func batchAt(data []byte, pos, size int64) (batchRef, bool) {
	if pos < 0 || pos+BatchHeaderSize > size || size > int64(len(data)) {
		return batchRef{}, false
	}
	b := data[pos : pos+BatchHeaderSize]
	length := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	n := length + logOverhead
	if length < BatchHeaderSize-logOverhead || pos+n > size {
		return batchRef{}, false
	}
	base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	last := base + int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])))
	return batchRef{base: base, last: last, size: n}, true
}

// maxTimestampAt returns the MaxTimestamp of the batch at pos (which batchAt accepted).
func maxTimestampAt(data []byte, pos int64) int64 {
	return int64(binary.BigEndian.Uint64(data[pos+offMaxTimestamp:]))
}
