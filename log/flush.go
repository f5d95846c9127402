package log

import "fmt"

// Flushing. By default the OS writes dirty pages back when it likes, as in Kafka;
// durability comes from replication. flush.messages and flush.ms request a group commit
// (groupcommit.go) that fsyncs off the appender's goroutine.
// Independently, a rolled segment is trimmed and synced in the background (Background)
// and the recovery point advanced past it, so that recovery after a crash only scans
// what came after. Until then the recovery point stays below it and recovery scans it.

// flushSealed syncs the sealed segments not yet synced, oldest first, and advances
// the recovery point to the first segment still unsynced. A segment retired meanwhile
// (deleted, or reopened by a truncation) ends the pass over that list: the point may
// only pass what the current list holds, so the pass starts again from it.
func (l *Log) flushSealed() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	for range 3 {
		again, err := l.flushSealedOnce()
		if err != nil || !again {
			return err
		}
	}
	return nil
}

func (l *Log) flushSealedOnce() (again bool, err error) {
	segs := l.segments()
	if len(segs) == 0 {
		return false, nil
	}
	target := l.recoveryPoint
	for i, s := range segs[:len(segs)-1] {
		if !s.synced.Load() {
			var gone bool
			if gone, err = l.syncSegment(s); err != nil {
				break
			}
			if gone {
				again = true
				break
			}
		}
		target = max(target, segs[i+1].base)
	}
	if target > l.recoveryPoint {
		l.recoveryPoint = target
		if cerr := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, target); err == nil {
			err = cerr
		}
	}
	return again && err == nil, err
}

// syncSegment trims and syncs a sealed segment, data and indexes. A segment deleted or
// replaced meanwhile needs nothing, and is reported gone. The caller holds flushMu.
func (l *Log) syncSegment(s *segment) (gone bool, err error) {
	if !s.acquire() {
		return true, nil
	}
	defer s.release()
	if err := s.use(int64(l.config().IndexIntervalBytes)); err != nil {
		if err == errSegmentGone {
			return true, nil
		}
		return false, err
	}
	defer s.unuse()
	// Under s.mu, so that a truncation that reopens the segment's files for appending
	// (after retiring it) never sees them cut back to the old length behind it.
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return true, nil
	}
	err = s.trim()
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	if err := s.sync(); err != nil {
		return false, err
	}
	s.synced.Store(true)
	// From here on the cache may unmap it (a rolled segment stays mapped otherwise); it
	// is loaded again read-only on its next use.
	s.maps.add(s)
	return false, nil
}

// Flush syncs everything appended so far and writes the recovery point, so that a
// crash from now on loses nothing up to here and recovery scans nothing before it.
func (l *Log) Flush() error {
	if l.closed.Load() {
		return l.errClosed()
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	// Everything below target is in the segments listed after it was read.
	target := l.end.Load()
	segs := l.segments()
	for i, s := range segs {
		if i < len(segs)-1 {
			if !s.synced.Load() {
				if _, err := l.syncSegment(s); err != nil {
					return fmt.Errorf("flush log %s: %w", l.dir, err)
				}
			}
			continue
		}
		// The active segment (or, if a roll raced, the newest listed one): its indexes
		// too, because once it is below the recovery point they are trusted.
		if s.acquire() {
			s.pin.RLock() // the active segment is never unmapped, but it may have just rolled
			err := s.sync()
			s.pin.RUnlock()
			s.release()
			if err != nil {
				return fmt.Errorf("flush log %s: %w", l.dir, err)
			}
		}
	}
	if target > l.recoveryPoint {
		l.recoveryPoint = target
		if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, target); err != nil {
			return fmt.Errorf("flush log %s: %w", l.dir, err)
		}
	}
	return nil
}

// RecoveryPoint is the offset below which everything is known to be durable.
func (l *Log) RecoveryPoint() int64 {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.recoveryPoint
}

// maybeFlush applies flush.messages and flush.ms after an append, under the append
// lock: when one is due it marks a group commit for the caller to request once the lock
// is released (afterAppendUnlock), so that no fsync runs on the appender's goroutine and
// one fsync covers every append since the last (groupcommit.go). The group commit syncs
// the directory after a roll too: fdatasync makes a new segment's bytes durable but not
// its name.
func (l *Log) maybeFlush(cfg *Config, now *lazyClock) {
	end := l.end.Load()
	due := end-l.flushedEnd >= cfg.FlushMessages
	if !due && cfg.FlushMs != DefaultFlushMs {
		due = now.ms()-l.lastFlush >= cfg.FlushMs
	}
	if !due {
		return
	}
	l.syncDue = true
	l.flushedEnd, l.lastFlush = end, now.ms()
}
