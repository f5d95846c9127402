package log

import (
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// AppendInfo says where an appended batch went.
type AppendInfo struct {
	BaseOffset   int64
	LastOffset   int64
	MaxTimestamp int64
	RecordCount  int32
	Size         int
}

// Append validates one whole RecordBatch v2 (CRC and header invariants; larger than
// max.message.bytes is ErrMessageTooLarge), gives it the next offsets and the leader
// epoch, and copies it into the active segment. The caller's batch is not modified and
// may be reused afterwards.
//
// A failed write (ErrStorage) leaves nothing visible. flush.messages and flush.ms do not
// fsync here: they request a group commit (RequestSync), whose outcome FlushedOffset and
// SyncErr report. The same holds for AppendValidated and AppendReplica.
func (l *Log) Append(batch []byte, leaderEpoch int32) (AppendInfo, error) {
	cfg := l.config()
	h, err := validateBatch(batch)
	if err != nil {
		return AppendInfo{}, err
	}
	if len(batch) > int(cfg.MaxMessageBytes) {
		return AppendInfo{}, fmt.Errorf("%w: %d bytes, max.message.bytes is %d", ErrMessageTooLarge, len(batch), cfg.MaxMessageBytes)
	}
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return AppendInfo{}, l.errClosed()
	}
	info, err := l.appendLocked(batch, h, l.end.Load(), leaderEpoch, true, cfg)
	l.afterAppendUnlock()
	return info, err
}

// AppendValidated is Append for a batch the caller has just checked with ValidateHeader
// (records.Validate does) and has not changed since, other than through SetLogAppendTime,
// which recomputes the CRC: it skips Append's own CRC pass, which was a third of the
// CRC work of every produce (bench/RESULTS.md, issue 19). The header is still parsed
// and its invariants checked; only the checksum over the records is trusted.
func (l *Log) AppendValidated(batch []byte, leaderEpoch int32) (AppendInfo, error) {
	cfg := l.config()
	h, err := ParseHeader(batch)
	if err != nil {
		return AppendInfo{}, err
	}
	if h.RecordCount <= 0 || h.LastOffsetDelta != h.RecordCount-1 {
		return AppendInfo{}, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrInvalidRecord, h.LastOffsetDelta, h.RecordCount)
	}
	if err := checkWhole(batch, h); err != nil {
		return AppendInfo{}, err
	}
	if len(batch) > int(cfg.MaxMessageBytes) {
		return AppendInfo{}, fmt.Errorf("%w: %d bytes, max.message.bytes is %d", ErrMessageTooLarge, len(batch), cfg.MaxMessageBytes)
	}
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return AppendInfo{}, l.errClosed()
	}
	info, err := l.appendLocked(batch, h, l.end.Load(), leaderEpoch, true, cfg)
	l.afterAppendUnlock()
	return info, err
}

// AppendReplica appends a batch whose offsets a leader assigned (the follower path). Its
// base offset must be at least EndOffset() (normally equal; a gap is kept as it is,
// like Kafka's compacted logs), else ErrUnexpectedOffset. Its leader epoch is kept.
// max.message.bytes is not applied: the leader accepted the batch.
func (l *Log) AppendReplica(batch []byte) (AppendInfo, error) {
	cfg := l.config()
	h, err := validateReplicaBatch(batch)
	if err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return AppendInfo{}, l.errClosed()
	}
	if end := l.end.Load(); h.BaseOffset < end {
		l.mu.Unlock()
		return AppendInfo{}, fmt.Errorf("%w: batch base offset %d is below the log end offset %d", ErrUnexpectedOffset, h.BaseOffset, end)
	}
	info, err := l.appendLocked(batch, h, h.BaseOffset, 0, false, cfg)
	l.afterAppendUnlock()
	return info, err
}

// afterAppendUnlock releases the append lock and then requests the group commit that a
// flush policy found due (an Inline executor runs it at once, and it takes the lock).
func (l *Log) afterAppendUnlock() {
	due := l.syncDue
	l.syncDue = false
	l.mu.Unlock()
	if due {
		l.RequestSync()
	}
}

// validateReplicaBatch checks that b is exactly one batch as a leader's log may hold it:
// a compacted leader sends batches with gaps or no records at all.
func validateReplicaBatch(b []byte) (Header, error) {
	h, err := validateStoredHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: %d bytes after a %d-byte batch", ErrCorruptMessage, len(b)-h.Size(), h.Size())
	}
	if h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
		return h, fmt.Errorf("%w: base offset %d overflows", ErrInvalidRecord, h.BaseOffset)
	}
	return h, nil
}

// validateBatch checks that b is exactly one valid batch.
func validateBatch(b []byte) (Header, error) {
	h, err := ValidateHeader(b)
	if err != nil {
		return h, err
	}
	return h, checkWhole(b, h)
}

// checkWhole checks that b is exactly the batch h heads and that its offsets fit.
func checkWhole(b []byte, h Header) error {
	if h.Size() != len(b) {
		return fmt.Errorf("%w: %d bytes after a %d-byte batch", ErrCorruptMessage, len(b)-h.Size(), h.Size())
	}
	if h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
		return fmt.Errorf("%w: base offset %d overflows", ErrInvalidRecord, h.BaseOffset)
	}
	return nil
}

func (l *Log) appendLocked(batch []byte, h Header, base int64, epoch int32, setEpoch bool, cfg *Config) (AppendInfo, error) {
	if err := l.markDirty(); err != nil {
		return AppendInfo{}, err
	}
	if err := l.activate(); err != nil {
		return AppendInfo{}, err
	}
	n := int64(len(batch))
	last := base + int64(h.LastOffsetDelta)
	now := &lazyClock{now: cfg.Now}
	s := l.active()
	if l.rollNeeded(s, n, last, h.MaxTimestamp, cfg, now) {
		newBase := l.end.Load()
		if !fitsRelative(newBase, last) {
			newBase = base
		}
		var err error
		if s, err = l.roll(newBase, n, cfg, now.ms()); err != nil {
			return AppendInfo{}, err
		}
	}
	if err := s.append(batch, h, base, epoch, setEpoch); err != nil {
		return AppendInfo{}, err
	}
	l.end.Store(last + 1)
	l.maybeWriteback(s, cfg.WritebackBytes)
	info := AppendInfo{
		BaseOffset:   base,
		LastOffset:   last,
		MaxTimestamp: h.MaxTimestamp,
		RecordCount:  h.RecordCount,
		Size:         len(batch),
	}
	l.maybeFlush(cfg, now)
	return info, nil
}

// maybeWriteback starts the kernel's writeback of what the active segment holds beyond
// what it was last started for, once that is at least step bytes (writeback.bytes): one
// system call per step, none on the appends between. The range ends at the last whole
// page, since a page still being filled would only be dirtied again. Where the system
// call is unsupported (ENOSYS, EINVAL: another OS, a file system without it), the log
// says so once and stops trying; other errors are left to the next fsync to report.
// The caller holds mu.
func (l *Log) maybeWriteback(s *segment, step int64) {
	if step <= 0 || l.writebackOff {
		return
	}
	size := s.size.Load()
	if size-s.writtenBack < step {
		return
	}
	end := pageFloor(size)
	err := s.logFile.Writeback(s.writtenBack, end-s.writtenBack)
	s.writtenBack = end
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		l.writebackOff = true
		l.logger().Info("writeback.bytes has no effect here: sync_file_range is not supported", "dir", l.dir, "err", err)
	}
}

// rollNeeded reports whether a batch of n bytes ending at offset last must go into a
// new segment: the active one is full (segment.bytes, its capacity or an index), too
// old (segment.ms), or cannot store the offset relative to its base.
func (l *Log) rollNeeded(s *segment, n, last, maxTs int64, cfg *Config, now *lazyClock) bool {
	size := s.size.Load()
	switch {
	case !fitsRelative(s.base, last) || size+n > s.capacity:
		return true
	case size == 0:
		return false
	case size+n > cfg.SegmentBytes || s.indexesFull():
		return true
	}
	return s.timeToRoll(maxTs, now, cfg.SegmentMs)
}

// timeToRoll applies segment.ms on append, as Kafka does: the incoming batch's
// timestamp against the first batch's, or the wall clock against the segment's
// creation when the first batch has no timestamp.
func (s *segment) timeToRoll(batchTs int64, now *lazyClock, segmentMs int64) bool {
	if s.rollTs >= 0 {
		return batchTs-s.rollTs >= segmentMs
	}
	return now.ms()-s.created >= segmentMs
}

// lazyClock reads the clock once, and only when asked: most appends never need it.
type lazyClock struct {
	now  func() time.Time
	read bool
	val  int64
}

func (c *lazyClock) ms() int64 {
	if !c.read {
		c.val, c.read = c.now().UnixMilli(), true
	}
	return c.val
}

// idleTooLong applies segment.ms without an append (EnforceRetention): the wall clock
// against the later of the first batch's timestamp and the segment's creation, so that
// old producer timestamps do not roll it at every check.
func (s *segment) idleTooLong(now, segmentMs int64) bool {
	return now-max(s.rollTs, s.created) >= segmentMs
}

// roll makes a new active segment at base, big enough for a batch of batchSize bytes,
// and seals the old one (or, if it is empty, drops it). On error the old segment stays
// active and nothing changed.
func (l *Log) roll(base, batchSize int64, cfg *Config, now int64) (*segment, error) {
	old := l.active()
	s, err := createSegment(l.fsys, l.dir, base, paramsFor(*cfg, batchSize), now)
	if err != nil {
		return nil, err
	}
	l.newFiles = true
	segs := l.segments()
	next := make([]*segment, 0, len(segs)+1)
	next = append(next, segs[:len(segs)-1]...)
	if old.size.Load() == 0 {
		// Nothing to keep. With the same base, createSegment already replaced its files.
		next = append(next, s)
		l.publish(next)
		if old.base != base {
			l.dropSegment(old)
		} else {
			l.dropReplaced(old)
		}
		return s, nil
	}
	// Seal before publishing: once the old segment is not the last, the background owns
	// it: it trims and syncs it, and only then moves the recovery point past it.
	if err := old.seal(now); err != nil {
		l.logger().Warn("sealing rolled segment", "dir", l.dir, "base_offset", old.base, "err", err)
	}
	if base > l.end.Load() {
		// Recovery reads zeros after the old segment's batches as an untrimmed roll tail
		// only when the next segment starts where those batches end. A roll across an
		// offset gap (a replica of a compacted leader) breaks that, so a crash before the
		// background trim would drop every later segment: trim now, in this rare case.
		if err := old.trim(); err != nil {
			l.logger().Warn("trimming segment rolled across an offset gap", "dir", l.dir, "base_offset", old.base, "err", err)
		}
	}
	next = append(next, old, s)
	l.publish(next)
	l.scheduleFlush()
	return s, nil
}

// activate makes the last segment writable before the first append after a clean open,
// which leaves it read-only and unmapped (see load). A new segment object takes over its
// files, as Truncate does with a sealed one; the old one stays valid for Views that hold
// it. On error nothing changed. The caller holds mu.
func (l *Log) activate() error {
	s := l.active()
	if s.writable {
		return nil
	}
	cfg := l.config()
	a, err := openActiveSegment(l.fsys, l.dir, s.base, s.size.Load(), paramsFor(*cfg, 0), nil, cfg.Now().UnixMilli())
	if err != nil {
		return err
	}
	segs := l.segments()
	l.publish(append(append([]*segment(nil), segs[:len(segs)-1]...), a))
	l.dropReplaced(s)
	return nil
}
