package log

import (
	"errors"
	"fmt"
	"math"
)

// Truncate removes everything at offsets >= offset, from the start of the batch that
// contains offset when it falls inside one; the end offset becomes that batch's base (or
// offset, when it falls in a gap). It is how a follower drops a divergent tail. An
// offset below the first segment empties the log and restarts it at offset; one at or
// above EndOffset() does nothing.
//
// Views taken before may still point at the removed bytes, which are zeroed (and
// overwritten by later appends): as in Kafka, a reader racing a truncation can see
// either. Truncation only ever removes what is above the high watermark in practice.
func (l *Log) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return l.errClosed()
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to negative offset %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.end.Load() {
		return nil
	}
	if err := l.markDirty(); err != nil {
		return err
	}
	if err := l.activate(); err != nil {
		return err
	}
	segs := l.segments()
	if offset < segs[0].base {
		return l.truncateFullyLocked(offset)
	}
	cfg := l.config()
	now := cfg.Now().UnixMilli()
	i := segmentFor(segs, offset)
	s := segs[i]
	if !s.acquire() {
		return fmt.Errorf("%w: segment %d is gone", ErrStorage, s.base)
	}
	defer s.release()
	if err := s.use(int64(cfg.IndexIntervalBytes)); err != nil {
		return err
	}
	defer s.unuse()
	size := s.size.Load()
	pos := s.position(offset, size)
	newEnd := offset
	if b, ok := batchAt(s.data, pos, size); ok && b.base < offset {
		newEnd = b.base
	}

	// Lower the recovery point first and durably: segments below it are trusted on
	// recovery, and what is about to be appended again at these offsets is not durable.
	if err := l.lowerRecoveryPoint(newEnd); err != nil {
		return err
	}
	if err := l.truncatedTo(newEnd); err != nil {
		return err
	}

	kept := segs[:i+1]
	if s != segs[len(segs)-1] {
		// Appends continue in this sealed segment: reopen it writable.
		s.retire()
		a, err := openActiveSegment(l.fsys, l.dir, s.base, size, paramsFor(*cfg, 0), nil, now)
		if err != nil {
			return err
		}
		if err := a.truncateTo(pos, newEnd, now); err != nil {
			a.release()
			return err
		}
		kept = append(append([]*segment(nil), segs[:i]...), a)
		l.publish(kept)
		l.end.Store(newEnd)
		l.dropReplaced(s) // the Log's reference to the old object, whose files a took over
	} else {
		// Readers must stop seeing the cut batches before the bytes are zeroed.
		l.end.Store(newEnd)
		if err := s.truncateTo(pos, newEnd, now); err != nil {
			return err
		}
		l.publish(append([]*segment(nil), kept...))
	}
	for _, d := range segs[i+1:] {
		l.dropSegment(d)
	}
	if len(segs) > i+1 {
		// The removals must be durable before anything is appended again at these
		// offsets: recovery scans from the lowered recovery point and would take the
		// cut segments back if a power cut undid their unlinks.
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return storageError("sync log directory", err)
		}
	}
	if err := l.truncateTxns(newEnd); err != nil {
		return err
	}
	l.flushedEnd = min(l.flushedEnd, newEnd)
	l.noteTruncated(newEnd)
	if l.start.Load() > newEnd {
		return l.setStartLocked(newEnd)
	}
	return nil
}

// TruncateFully deletes every segment and restarts the log empty at offset, as a
// follower does when the leader's log starts after the follower's end.
func (l *Log) TruncateFully(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return l.errClosed()
	}
	if offset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.markDirty(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	cfg := l.config()
	now := cfg.Now().UnixMilli()
	if err := l.truncatedTo(offset); err != nil {
		return err
	}
	// The new segment first, so that a failure changes nothing.
	s, err := createSegment(l.fsys, l.dir, offset, paramsFor(*cfg, 0), now)
	if err != nil {
		return err
	}
	l.newFiles = true
	if err := l.setStartLocked(offset); err != nil {
		s.retire()
		s.removeFiles()
		s.release()
		return err
	}
	old := l.segments()
	l.publish([]*segment{s})
	l.end.Store(offset)
	for _, d := range old {
		if d.base != offset {
			l.dropSegment(d)
		} else {
			l.dropReplaced(d) // createSegment already replaced its files
		}
	}
	l.removeTxnsBelow(math.MaxInt64)
	l.flushedEnd = offset
	l.noteTruncated(offset)
	// The old segments are gone, so everything below offset is trivially durable.
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.recoveryPoint = offset
	return writeCheckpoint(l.fsys, l.dir, recoveryPointFile, offset)
}

// lowerRecoveryPoint moves the recovery point down to offset, durably.
func (l *Log) lowerRecoveryPoint(offset int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.recoveryPoint <= offset {
		return nil
	}
	if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, offset); err != nil {
		return err
	}
	l.recoveryPoint = offset
	return nil
}

// setStartLocked persists and publishes a new log start offset.
func (l *Log) setStartLocked(offset int64) error {
	if err := writeCheckpoint(l.fsys, l.dir, logStartFile, offset); err != nil {
		return err
	}
	l.start.Store(offset)
	return nil
}

// dropSegment deletes a segment that is no longer in the published list: its files are
// renamed to .deleted now, and closed and unlinked in the background. Its mapping lives
// on until the last View releases it. The caller holds mu.
func (l *Log) dropSegment(s *segment) {
	s.retire()
	if err := s.markDeleted(); err != nil {
		l.logger().Warn("renaming deleted segment files", "dir", l.dir, "base_offset", s.base, "err", err)
	}
	l.scheduleDelete(s)
}

// dropReplaced lets go of a segment no longer in the list whose files a new segment of
// the same base replaced: only its close (and unmap) is left, in the background.
func (l *Log) dropReplaced(s *segment) {
	s.retire()
	s.deletion = deleteReplaced
	l.scheduleDelete(s)
}

// DeleteRecordsBefore advances the log start offset to offset (Kafka's DeleteRecords),
// persisting it, and deletes the segments wholly below it. An offset above EndOffset()
// is ErrOffsetOutOfRange; one at or below StartOffset() does nothing. Deleting up to
// the end offset rolls the active segment so that its space is freed too.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return l.errClosed()
	}
	end := l.end.Load()
	if offset > end {
		return fmt.Errorf("%w: delete records before %d, beyond the log end offset %d", ErrOffsetOutOfRange, offset, end)
	}
	if offset <= l.start.Load() {
		return nil
	}
	if err := l.markDirty(); err != nil {
		return err
	}
	if err := l.setStartLocked(offset); err != nil {
		return err
	}
	cfg := l.config()
	if offset == end && l.active().size.Load() > 0 {
		if _, err := l.roll(end, 0, cfg, cfg.Now().UnixMilli()); err != nil {
			l.logger().Warn("rolling the emptied active segment", "dir", l.dir, "err", err)
		}
	}
	segs := l.segments()
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= offset {
		n++
	}
	l.deleteOldest(n)
	return nil
}

// deleteOldest removes the n oldest segments (never the active one) and raises the log
// start offset to the new first segment if needed.
func (l *Log) deleteOldest(n int) {
	segs := l.segments()
	n = min(n, len(segs)-1)
	if n <= 0 {
		return
	}
	l.publish(append([]*segment(nil), segs[n:]...))
	newFirst := segs[n].base
	if l.start.Load() < newFirst {
		// Not persisted: on open the start is at least the first segment's base anyway.
		l.start.Store(newFirst)
	}
	for _, s := range segs[:n] {
		l.dropSegment(s)
	}
	l.removeTxnsBelow(newFirst)
	// The recovery point is left alone: taking flushMu here would stall appends behind a
	// background fsync, and the next flush moves it past the deleted segments anyway.
}

// EnforceRetention rolls the active segment when segment.ms has passed, then deletes
// old segments, never the active one: oldest first while their largest timestamp (or
// last modification, without timestamps) is older than retention.ms, and while the log
// stays at least retention.bytes without them. It returns how many it deleted.
func (l *Log) EnforceRetention() (deleted int, err error) {
	return l.EnforceRetentionBelow(math.MaxInt64)
}

// EnforceRetentionBelow is EnforceRetention that deletes only segments wholly below
// upper: the first offset of an open transaction stays, as must every record after it.
func (l *Log) EnforceRetentionBelow(upper int64) (deleted int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, l.errClosed()
	}
	cfg := l.config()
	now := cfg.Now().UnixMilli()
	var errs []error
	// Most checks change nothing; only a change ends the clean state of the last close.
	dirty := func() bool {
		err := l.markDirty()
		if err != nil {
			errs = append(errs, err)
		}
		return err == nil
	}
	if a := l.active(); a.size.Load() > 0 && a.idleTooLong(now, cfg.SegmentMs) && dirty() {
		if _, err := l.roll(l.end.Load(), 0, cfg, now); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.RetentionMs >= 0 {
		segs := l.segments()
		n := 0
		for n < len(segs)-1 && now-segs[n].retentionTimestamp() > cfg.RetentionMs && segs[n+1].base <= upper {
			n++
		}
		if n > 0 && dirty() {
			l.deleteOldest(n)
			deleted += n
		}
	}
	if cfg.RetentionBytes >= 0 {
		segs := l.segments()
		diff := l.Size() - cfg.RetentionBytes
		n := 0
		for n < len(segs)-1 && diff-segs[n].size.Load() >= 0 && segs[n+1].base <= upper {
			diff -= segs[n].size.Load()
			n++
		}
		if n > 0 && dirty() {
			l.deleteOldest(n)
			deleted += n
		}
	}
	return deleted, errors.Join(errs...)
}

// retentionTimestamp is the time retention.ms counts from: the largest timestamp, or the
// last modification when no batch has one.
func (s *segment) retentionTimestamp() int64 {
	if ts := s.maxTimestamp.Load(); ts >= 0 {
		return ts
	}
	return s.modTime.Load()
}
