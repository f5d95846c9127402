package log

import "fmt"

// Flushing. By default the OS writes dirty pages back when it likes, as in Kafka;
// durability comes from replication. flush.messages and flush.ms make appends fsync.
// Independently, a rolled segment is synced in the background and the recovery point
// advanced past it, so that recovery after a crash only scans what came after.

// flushLoop is the background flusher: it syncs sealed segments when kicked.
func (l *Log) flushLoop() {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			if err := l.flushSealed(); err != nil {
				l.logger().Warn("background flush failed", "dir", l.dir, "err", err)
			}
		}
	}
}

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *Log) stopFlusher() {
	close(l.stop)
	<-l.done
}

// flushSealed syncs the sealed segments not yet synced, oldest first, and advances
// the recovery point to the first segment still unsynced.
func (l *Log) flushSealed() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	segs := l.segments()
	if len(segs) == 0 {
		return nil
	}
	target := l.recoveryPoint
	var err error
	for i, s := range segs[:len(segs)-1] {
		if !s.synced.Load() {
			if err = l.syncSegment(s); err != nil {
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
	return err
}

// syncSegment trims and syncs a sealed segment, data and indexes. A segment deleted
// meanwhile needs nothing. The caller holds flushMu.
func (l *Log) syncSegment(s *segment) error {
	if !s.acquire() {
		return nil
	}
	defer s.release()
	if err := s.use(int64(l.config().IndexIntervalBytes)); err != nil {
		if err == errSegmentGone {
			return nil
		}
		return err
	}
	defer s.unuse()
	if err := s.trim(); err != nil {
		return err
	}
	if err := s.sync(); err != nil {
		return err
	}
	s.synced.Store(true)
	// From here on the cache may unmap it (a rolled segment stays mapped otherwise); it
	// is loaded again read-only on its next use.
	s.maps.add(s)
	return nil
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
				if err := l.syncSegment(s); err != nil {
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
// lock. It syncs only data: the recovery point moves with full syncs only. After a
// roll it syncs the directory too: fdatasync makes a new segment's bytes durable but
// not its name, and a crash would lose the file with every append flushed into it.
func (l *Log) maybeFlush(cfg *Config, now *lazyClock) error {
	end := l.end.Load()
	due := end-l.flushedEnd >= cfg.FlushMessages
	if !due && cfg.FlushMs != DefaultFlushMs {
		due = now.ms()-l.lastFlush >= cfg.FlushMs
	}
	if !due {
		return nil
	}
	for _, s := range l.segments() {
		if s.synced.Load() || !s.acquire() {
			continue
		}
		err := s.use(int64(cfg.IndexIntervalBytes))
		if err == nil {
			err = s.syncData()
			s.unuse()
		}
		s.release()
		if err != nil && err != errSegmentGone {
			return fmt.Errorf("flush log %s: %w", l.dir, err)
		}
	}
	if l.newFiles {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return fmt.Errorf("flush log %s: %w", l.dir, storageError("sync log directory", err))
		}
		l.newFiles = false
	}
	l.flushedEnd, l.lastFlush = end, now.ms()
	return nil
}
