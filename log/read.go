package log

import (
	"fmt"
	"os"
	"runtime"
	"sort"
)

// View is the result of a Read: whole batches, as slices of the segments' mappings
// (not copies). The segments stay mapped until Release, even if retention, truncation or
// Close remove them meanwhile. A zero View is empty and may be released.
type View struct {
	Chunks [][]byte
	// Sections says, for each chunk, where its bytes lie in its segment's file, so that
	// a writer can send them with sendfile(2) rather than copy them out of the mapping.
	// The mapping is of that same file (MAP_SHARED), so both give the same bytes at any
	// moment. The descriptors stay open until Release; callers must not close them or
	// move their offsets (use pread-like calls, such as sendfile with an offset).
	Sections []Section
	// Size is the total length of Chunks.
	Size int
	// FirstOffset is the base offset of the first batch, or the requested offset when
	// the view is empty.
	FirstOffset int64
	// NextOffset is the offset after the last batch, where a sequential reader goes on;
	// the requested offset when the view is empty.
	NextOffset int64

	segs []*segment
}

// Section is where a chunk of a View lies in a segment file.
type Section struct {
	// File is nil when the segment's file is not an *os.File (a test's file system).
	File   *os.File
	Offset int64
}

// Release unpins the segments. The chunks must not be used afterwards; Release clears
// them. Releasing twice is harmless; a View must not be released concurrently.
func (v *View) Release() {
	if v == nil {
		return
	}
	segs := v.segs
	v.segs, v.Chunks, v.Sections = nil, nil, nil
	for _, s := range segs {
		s.unuse()
		s.release()
	}
}

// Read returns whole batches starting with the batch containing offset (or the first
// after it), stopping before any batch whose base offset is >= maxOffset (pass
// EndOffset() or a high watermark) and keeping the total within maxBytes, except that
// with minOne the first batch is returned even when it is larger. An offset below
// StartOffset() or above EndOffset() is ErrOffsetOutOfRange; EndOffset() itself (or
// maxOffset) gives an empty View. Batches may come from several segments.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64, minOne bool) (*View, error) {
	for {
		if l.closed.Load() {
			return nil, l.errClosed()
		}
		v, retry, err := l.tryRead(offset, maxBytes, maxOffset, minOne)
		if !retry {
			return v, err
		}
		// A segment was removed or replaced under us; the new list is being published.
		runtime.Gosched()
	}
}

func (l *Log) checkRange(offset int64) (end int64, err error) {
	// End first: data below the end offset read here is complete in the segments read
	// after it.
	end = l.end.Load()
	start := l.start.Load()
	if offset < start || offset > end {
		return end, fmt.Errorf("%w: offset %d is outside [%d, %d] of %s", ErrOffsetOutOfRange, offset, start, end, l.dir)
	}
	return end, nil
}

func (l *Log) tryRead(offset int64, maxBytes int, maxOffset int64, minOne bool) (*View, bool, error) {
	end, err := l.checkRange(offset)
	if err != nil {
		return nil, false, err
	}
	limit := min(maxOffset, end)
	v := &View{FirstOffset: offset, NextOffset: offset}
	if offset >= limit {
		return v, false, nil
	}
	segs := l.segments()
	interval := int64(l.config().IndexIntervalBytes)
	budget := int64(max(maxBytes, 0))
	first := true
	for i := segmentFor(segs, offset); i < len(segs); i++ {
		s := segs[i]
		if s.base >= limit {
			break
		}
		if !s.acquire() {
			v.Release()
			return nil, true, nil
		}
		if err := s.use(interval); err != nil {
			s.release()
			v.Release()
			if err == errSegmentGone {
				return nil, true, nil
			}
			return nil, false, err
		}
		size := s.size.Load()
		pos := int64(0)
		if first {
			pos = s.position(offset, size)
		}
		from := pos
		full := false
		for pos < size {
			b, ok := batchAt(s.data, pos, size)
			if !ok {
				// Not a batch: a truncation racing this read, or damage in a segment that
				// recovery trusted. Go on with the next segment rather than get stuck.
				break
			}
			if b.base >= limit {
				full = true
				break
			}
			if b.size > budget && !(first && minOne) {
				full = true
				break
			}
			if first {
				v.FirstOffset = b.base
				first = false
			}
			budget -= min(budget, b.size)
			v.NextOffset = b.last + 1
			pos += b.size
		}
		if pos > from {
			v.Chunks = append(v.Chunks, s.data[from:pos])
			v.Sections = append(v.Sections, Section{File: s.osFile(), Offset: from})
			v.Size += int(pos - from)
			v.segs = append(v.segs, s)
		} else {
			s.unuse()
			s.release()
		}
		if full || budget == 0 {
			break
		}
	}
	return v, false, nil
}

// segmentFor returns the index of the segment that would hold offset: the last one
// with a base offset <= offset (or the first).
func segmentFor(segs []*segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return max(i-1, 0)
}

// position returns where the batch containing offset, or the first batch after it,
// starts in data[:size]; size when there is none. The caller has loaded the segment.
func (s *segment) position(offset, size int64) int64 {
	_, pos := s.offsets.lookup(offset)
	if pos >= size {
		// An index entry beyond the data: a truncation raced with this read.
		pos = 0
	}
	for pos < size {
		b, ok := batchAt(s.data, pos, size)
		if !ok {
			return size
		}
		if b.last >= offset {
			return pos
		}
		pos += b.size
	}
	return size
}

// ScanHeaders calls fn with the header of every batch from the one containing from (or
// the first after it; from below the log start offset means the start) to the end, in
// order, until fn returns false.
func (l *Log) ScanHeaders(from int64, fn func(h Header) bool) error {
	if l.closed.Load() {
		return l.errClosed()
	}
	from = max(from, l.start.Load())
	end, err := l.checkRange(from)
	if err != nil {
		return err
	}
	segs := l.segments()
	interval := int64(l.config().IndexIntervalBytes)
	for i := segmentFor(segs, from); i < len(segs); i++ {
		s := segs[i]
		if !s.acquire() {
			return fmt.Errorf("%w: segment %d removed during a header scan", ErrOffsetOutOfRange, s.base)
		}
		cont, err := s.scanHeaders(from, end, interval, fn)
		s.release()
		if err != nil || !cont {
			return err
		}
	}
	return nil
}

func (s *segment) scanHeaders(from, end, interval int64, fn func(h Header) bool) (bool, error) {
	if err := s.use(interval); err != nil {
		if err == errSegmentGone {
			return false, fmt.Errorf("%w: segment %d removed during a header scan", ErrOffsetOutOfRange, s.base)
		}
		return false, err
	}
	defer s.unuse()
	size := s.size.Load()
	pos := s.position(from, size)
	for pos < size {
		h, err := ParseHeader(s.data[pos:size])
		if err != nil {
			return false, fmt.Errorf("segment %d position %d: %w", s.base, pos, err)
		}
		if h.BaseOffset >= end {
			return false, nil
		}
		if !fn(h) {
			return false, nil
		}
		pos += int64(h.Size())
	}
	return true, nil
}

// OffsetForTimestamp returns the base offset of the first batch (at or after the log
// start offset) whose MaxTimestamp is >= ts, found through the segments' largest
// timestamps and time indexes, then a scan. ok is false when there is none. Finding the
// first record in the batch is the caller's.
func (l *Log) OffsetForTimestamp(ts int64) (baseOffset int64, ok bool, err error) {
	if l.closed.Load() {
		return 0, false, l.errClosed()
	}
	start := l.start.Load()
	end := l.end.Load()
	interval := int64(l.config().IndexIntervalBytes)
	for _, s := range l.segments() {
		if s.maxTimestamp.Load() < ts {
			continue
		}
		if !s.acquire() {
			continue
		}
		off, found, err := s.offsetForTimestamp(ts, start, end, interval)
		s.release()
		if err != nil || found {
			return off, found, err
		}
	}
	return 0, false, nil
}

func (s *segment) offsetForTimestamp(ts, start, end, interval int64) (int64, bool, error) {
	if err := s.use(interval); err != nil {
		if err == errSegmentGone {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer s.unuse()
	size := s.size.Load()
	from, _ := s.times.lookup(ts)
	pos := s.position(max(from, start), size)
	for pos < size {
		b, ok := batchAt(s.data, pos, size)
		if !ok || b.base >= end {
			break
		}
		if b.last >= start && maxTimestampAt(s.data, pos) >= ts {
			return b.base, true, nil
		}
		pos += b.size
	}
	return 0, false, nil
}
