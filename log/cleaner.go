package log

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// cleanerCheckpointFile holds the offset below which the log was last cleaned (Kafka's
// cleaner-offset-checkpoint, kept per log here): the start of the dirty section.
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// RecordFilter is the record-level knowledge compaction needs and this package does not
// have (records and codecs live in log/records, which imports this package).
// records.CompactionFilter implements it.
type RecordFilter interface {
	// Records calls fn with each record of batch: its offset, key (nil when null) and
	// whether its value is null (a tombstone).
	Records(batch []byte, fn func(offset int64, key []byte, tombstone bool)) error
	// Filter returns batch with only the records keep accepts and how many it kept,
	// preserving the header (base offset, last offset delta, timestamps, producer
	// fields); batch itself when all are kept, a header-only batch when none is.
	Filter(batch []byte, keep func(offset int64, key []byte, tombstone bool) bool) ([]byte, int, error)
}

// CleanOptions are one cleaning pass's inputs.
type CleanOptions struct {
	// UpperBound is the first offset the cleaner may not touch: the high watermark (or
	// last stable offset). Only sealed segments wholly below it are cleaned.
	UpperBound int64
	// Filter reads and rewrites records; required.
	Filter RecordFilter
	// Map is the key -> latest offset map, bounded by log.cleaner.dedupe.buffer.size;
	// it is reset by Clean. Required.
	Map *OffsetMap
	// DeleteRetentionMs (delete.retention.ms): a tombstone is removed once the largest
	// timestamp of its segment is older than this, so that a consumer reading from the
	// start within that time still sees the delete.
	DeleteRetentionMs int64
	// MinCompactionLagMs (min.compaction.lag.ms): segments whose largest timestamp is
	// younger than this are not cleaned yet.
	MinCompactionLagMs int64
	// KeepEmptyBatch says whether a batch of producerID whose records were all removed
	// keeps its header, so that the producer's last sequence and epoch survive (Kafka
	// keeps it for the last batch of a still active producer). Nil keeps every such batch
	// that has a producer id; batches without one are dropped.
	KeepEmptyBatch func(producerID int64, lastOffset int64) bool
	// Throttle, if set, is called with the bytes read and written as the pass goes
	// (log.cleaner.io.max.bytes.per.second); it may sleep.
	Throttle func(bytes int64)
	// Done, if set, aborts the pass when closed (shutdown): it stops between segments
	// with ErrCleanAborted, leaving the segments swapped so far, all of them valid.
	Done <-chan struct{}
}

// ErrCleanAborted: Clean stopped because CleanOptions.Done was closed.
var ErrCleanAborted = errors.New("log cleaning aborted")

func (o *CleanOptions) aborted() bool {
	if o.Done == nil {
		return false
	}
	select {
	case <-o.Done:
		return true
	default:
		return false
	}
}

// CleanStats says what a pass did.
type CleanStats struct {
	// FirstDirty and MapEnd bound the dirty section the pass deduplicated.
	FirstDirty, MapEnd int64
	Segments           int // segments rewritten and swapped in
	BytesRead          int64
	BytesWritten       int64
	RecordsRemoved     int64
	Duration           time.Duration
}

// cleanerState is the cleaner's bookkeeping on a Log.
type cleanerState struct {
	mu      sync.Mutex // one pass at a time per log
	load    sync.Once
	cleaned atomic.Int64 // the checkpointed first dirty offset
	// truncations counts truncations below the dirty section's start, so that a pass
	// that raced with one does not move the start back above offsets appended again.
	truncations atomic.Int64
	// ckMu orders the checkpoint writes of a pass's end and of a truncation.
	ckMu sync.Mutex
}

// truncatedTo lowers the start of the dirty section to offset after the log was cut
// there: what is appended at those offsets again has not been cleaned. The caller holds
// the appender's lock.
func (l *Log) truncatedTo(offset int64) error {
	c := &l.cleaner
	l.firstDirty() // loads the checkpoint
	c.ckMu.Lock()
	defer c.ckMu.Unlock()
	if c.cleaned.Load() <= offset {
		return nil
	}
	c.truncations.Add(1)
	c.cleaned.Store(offset)
	return writeCheckpoint(l.fsys, l.dir, cleanerCheckpointFile, offset)
}

// firstDirty is where the dirty section starts: the checkpoint, clamped to the log. It
// never waits for a pass in progress.
func (l *Log) firstDirty() int64 {
	c := &l.cleaner
	c.load.Do(func() {
		off, ok, err := readCheckpoint(l.fsys, l.dir, cleanerCheckpointFile)
		if err != nil {
			l.logger().Warn("ignoring unreadable cleaner checkpoint; the whole log is dirty", "dir", l.dir, "err", err)
		}
		if ok {
			c.cleaned.Store(off)
		}
	})
	return min(max(c.cleaned.Load(), l.start.Load()), l.end.Load())
}

// cleanable returns how many leading segments of segs may be cleaned: sealed, durable,
// wholly below upper, and old enough for min.compaction.lag.ms.
func cleanable(segs []*segment, upper, now, minLagMs int64) int {
	k := 0
	for k < len(segs)-1 {
		s, next := segs[k], segs[k+1].base
		if next > upper || !s.synced.Load() {
			break
		}
		if minLagMs > 0 && now-s.retentionTimestamp() < minLagMs {
			break
		}
		k++
	}
	return k
}

// DirtyRatio is the share of the cleanable bytes (sealed segments below upper) that are
// in the dirty section, not yet cleaned: Kafka's cleanable ratio, compared with
// min.cleanable.dirty.ratio. It also returns both byte counts.
func (l *Log) DirtyRatio(upper, minLagMs int64) (ratio float64, dirty, total int64) {
	firstDirty := l.firstDirty()
	segs := l.segments()
	if len(segs) == 0 {
		return 0, 0, 0
	}
	k := cleanable(segs, upper, l.nowMs(), minLagMs)
	for i := 0; i < k; i++ {
		n := segs[i].size.Load()
		total += n
		if segs[i+1].base > firstDirty {
			dirty += n
		}
	}
	if total == 0 {
		return 0, 0, 0
	}
	return float64(dirty) / float64(total), dirty, total
}

// FirstDirtyTimestamp is the largest timestamp (or last modification) of the oldest
// cleanable segment in the dirty section, -1 when there is none: max.compaction.lag.ms
// counts from it. Every record of that segment is at least as old as the segment's
// newest, so a log past the lag by this measure surely holds records past it.
func (l *Log) FirstDirtyTimestamp(upper, minLagMs int64) int64 {
	firstDirty := l.firstDirty()
	segs := l.segments()
	if len(segs) == 0 {
		return -1
	}
	k := cleanable(segs, upper, l.nowMs(), minLagMs)
	for i := 0; i < k; i++ {
		if segs[i+1].base > firstDirty {
			return segs[i].retentionTimestamp()
		}
	}
	return -1
}

// Clean compacts the log once, as Kafka's cleaner does: it maps each key of the dirty
// section (from the last pass's end, within the cleanable segments) to its latest
// offset, then rewrites every cleanable segment up to the end of what the map covers,
// oldest first, keeping a record unless a later one has its key, and dropping
// tombstones past delete.retention.ms. Each rewritten segment is written aside and
// swapped in atomically (swap.go); appends and reads go on meanwhile, and readers keep
// the old segment's mapping until they release it. Records without a key are dropped,
// as Kafka drops them from compacted topics.
func (l *Log) Clean(opt CleanOptions) (CleanStats, error) {
	if opt.Filter == nil || opt.Map == nil {
		return CleanStats{}, errors.New("log clean: Filter and Map are required")
	}
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	if l.closed.Load() {
		return CleanStats{}, l.errClosed()
	}
	began := time.Now()
	truncations := l.cleaner.truncations.Load()
	now := l.nowMs()
	cfg := l.config()
	interval := int64(cfg.IndexIntervalBytes)
	firstDirty := l.firstDirty()
	st := CleanStats{FirstDirty: firstDirty, MapEnd: firstDirty}
	segs := l.segments()
	if len(segs) == 0 {
		return st, l.errClosed()
	}
	k := cleanable(segs, opt.UpperBound, now, opt.MinCompactionLagMs)
	if k == 0 || segs[k].base <= firstDirty {
		return st, nil
	}
	// Records of aborted transactions are never the latest value of their key, and go,
	// as Kafka's cleaner discards them; their markers and index entries stay.
	abortedTxns, err := l.AbortedTxns(segs[0].base, segs[k].base)
	if err != nil {
		return st, fmt.Errorf("log clean %s: %w", l.dir, err)
	}
	inAborted := abortedBatch(abortedTxns)

	// Phase 1: map the dirty section's keys to their latest offsets.
	m := opt.Map
	m.Reset()
	mapEnd := firstDirty
	full := false
	for i := 0; i < k && !full; i++ {
		if opt.aborted() {
			return st, ErrCleanAborted
		}
		s := segs[i]
		if segs[i+1].base <= firstDirty {
			continue
		}
		err := l.withSegment(s, interval, func(data []byte) error {
			for pos := int64(0); pos < int64(len(data)); {
				h, err := ParseHeader(data[pos:])
				if err != nil {
					return err
				}
				n := int64(h.Size())
				if h.LastOffset() >= firstDirty && !h.IsControl() && !inAborted(h) {
					if m.Len()+int(h.RecordCount) > m.Capacity() {
						full = true
						return nil
					}
					err := opt.Filter.Records(data[pos:pos+n], func(off int64, key []byte, _ bool) {
						if key != nil && off >= firstDirty {
							m.Put(key, off)
						}
					})
					if err != nil {
						return fmt.Errorf("segment %d position %d: %w", s.base, pos, err)
					}
				}
				st.BytesRead += n
				mapEnd = max(mapEnd, h.LastOffset()+1)
				pos += n
			}
			mapEnd = max(mapEnd, segs[i+1].base)
			return nil
		})
		if err != nil {
			return st, fmt.Errorf("log clean %s: %w", l.dir, err)
		}
		if opt.Throttle != nil {
			opt.Throttle(s.size.Load())
		}
	}
	if mapEnd <= firstDirty {
		return st, fmt.Errorf("log clean %s: log.cleaner.dedupe.buffer.size holds %d keys, too few for one batch at offset %d", l.dir, m.Capacity(), firstDirty)
	}
	st.MapEnd = mapEnd

	// Phase 2: rewrite the segments up to mapEnd, oldest first, so that when a tombstone
	// goes, every older record of its key has gone before it (a crash between swaps
	// leaves a log in which no key has lost its latest value). Consecutive segments
	// whose sizes add up to at most segment.bytes are merged into one, as Kafka groups
	// them, so that a compacted log's segment count shrinks with it.
	for i := 0; i < k && segs[i].base < mapEnd; {
		if opt.aborted() {
			return st, ErrCleanAborted
		}
		j, total := i+1, segs[i].size.Load()
		for j < k && segs[j].base < mapEnd && total+segs[j].size.Load() <= cfg.SegmentBytes && fitsRelative(segs[i].base, segs[j+1].base-1) {
			total += segs[j].size.Load()
			j++
		}
		group := segs[i:j]
		i = j
		var out []byte
		var removed int64
		for gi, s := range group {
			dropTombstones := opt.DeleteRetentionMs >= 0 && now-s.retentionTimestamp() > opt.DeleteRetentionMs
			keep := func(off int64, key []byte, tomb bool) bool {
				if key == nil {
					return false
				}
				if off >= mapEnd {
					return true
				}
				latest, ok := m.Get(key)
				if ok && latest > off {
					return false
				}
				// The latest record of its key: a tombstone may go once its retention is over.
				return !(tomb && dropTombstones)
			}
			var n, read int64
			var err error
			out, n, read, err = l.rewriteSegment(s, out, interval, opt, keep, inAborted, gi == len(group)-1)
			if err != nil {
				return st, fmt.Errorf("log clean %s: %w", l.dir, err)
			}
			removed += n
			st.BytesRead += read
			if opt.Throttle != nil {
				opt.Throttle(read)
			}
		}
		if opt.Throttle != nil {
			opt.Throttle(int64(len(out)))
		}
		if removed == 0 && len(group) == 1 {
			continue
		}
		swapped, err := l.swapSegments(group, out)
		if err != nil {
			return st, fmt.Errorf("log clean %s: %w", l.dir, err)
		}
		if !swapped {
			// Deleted or truncated meanwhile. The segments after it were not cleaned with
			// this map, so the dirty section must not move past them: a later pass
			// assumes the clean section holds one record per key when it drops a
			// tombstone.
			st.Duration = time.Since(began)
			return st, nil
		}
		st.Segments += len(group)
		st.BytesWritten += int64(len(out))
		st.RecordsRemoved += removed
	}
	l.cleaner.ckMu.Lock()
	defer l.cleaner.ckMu.Unlock()
	if l.cleaner.truncations.Load() != truncations {
		// Truncated below the dirty section meanwhile: it stays where truncation put it.
		st.Duration = time.Since(began)
		return st, nil
	}
	if err := writeCheckpoint(l.fsys, l.dir, cleanerCheckpointFile, mapEnd); err != nil {
		return st, fmt.Errorf("log clean %s: %w", l.dir, err)
	}
	l.cleaner.cleaned.Store(mapEnd)
	st.Duration = time.Since(began)
	return st, nil
}

// abortedBatch returns whether a data batch belongs to one of the aborted transactions:
// its producer's, begun at or before the batch and ended by a marker after it.
func abortedBatch(txns []AbortedTxn) func(Header) bool {
	if len(txns) == 0 {
		return func(Header) bool { return false }
	}
	byProducer := make(map[int64][]AbortedTxn)
	for _, a := range txns {
		byProducer[a.ProducerID] = append(byProducer[a.ProducerID], a)
	}
	return func(h Header) bool {
		if !h.IsTransactional() || h.IsControl() {
			return false
		}
		for _, a := range byProducer[h.ProducerID] {
			if a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
				return true
			}
		}
		return false
	}
}

// withSegment runs fn over a sealed segment's bytes, pinned and guarded against faults.
func (l *Log) withSegment(s *segment, interval int64, fn func(data []byte) error) error {
	if !s.acquire() {
		return errSegmentGone
	}
	defer s.release()
	if err := s.use(interval); err != nil {
		return err
	}
	defer s.unuse()
	data := s.data[:s.size.Load()]
	return guardFault(func() error { return fn(data) })
}

// rewriteSegment appends the cleaned contents of s to out. With keepLast, the
// segment's last batch stays (as a header when it lost every record), so that the
// rewritten segment still ends at the old one's last offset: recovery relies on it to
// tell which old segments a committed swap replaced.
func (l *Log) rewriteSegment(s *segment, out []byte, interval int64, opt CleanOptions, keep func(int64, []byte, bool) bool, inAborted func(Header) bool, keepLast bool) (_ []byte, removed, read int64, err error) {
	dropAll := func(int64, []byte, bool) bool { return false }
	err = l.withSegment(s, interval, func(data []byte) error {
		read = int64(len(data))
		for pos := int64(0); pos < int64(len(data)); {
			h, err := ParseHeader(data[pos:])
			if err != nil {
				return fmt.Errorf("segment %d position %d: %w", s.base, pos, err)
			}
			batch := data[pos : pos+int64(h.Size())]
			pos += int64(h.Size())
			if h.IsControl() {
				// Transaction markers stay until transactions exist to say when they may go.
				out = append(out, batch...)
				continue
			}
			batchKeep := keep
			if inAborted(h) {
				batchKeep = dropAll
			}
			nb, kept, err := opt.Filter.Filter(batch, batchKeep)
			if err != nil {
				return fmt.Errorf("segment %d batch %d: %w", s.base, h.BaseOffset, err)
			}
			removed += int64(int(h.RecordCount) - kept)
			if kept == 0 {
				keepEmpty := h.HasProducer()
				if keepEmpty && opt.KeepEmptyBatch != nil {
					keepEmpty = opt.KeepEmptyBatch(h.ProducerID, h.LastOffset())
				}
				if !keepEmpty && !(keepLast && pos == int64(len(data))) {
					continue
				}
			}
			out = append(out, nb...)
		}
		return nil
	})
	return out, removed, read, err
}
