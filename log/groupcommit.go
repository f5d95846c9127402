package log

import (
	"fmt"
	"sync"
)

// Group commit. An fsync makes durable everything written to its file before it began,
// so one fsync can stand for every batch appended since the previous one. RequestSync
// asks for such an fsync and returns at once; the pass runs through the log's executor
// (its own goroutine by default, never the appender's), syncs the data of every segment
// not yet synced and, after a roll, the directory, and then publishes FlushedOffset: the
// end offset it read before it began. Requests that arrive while a pass runs are all
// served by the next one, so a log takes at most one fsync at a time whatever the number
// of producers, and the number of batches each fsync covers grows with them.
//
// The flush policies (flush.messages, flush.ms) request a pass instead of fsyncing in
// the append, and a replica whose acknowledgements wait for durability (the broker's
// acks.all.fsync) requests one after every append: both wait for FlushedOffset.
//
// A failed fsync is final: the kernel may have dropped the pages it could not write and
// report the next fsync of the file as a success, so FlushedOffset never moves again and
// SyncErr reports the failure (ErrStorage), as Kafka takes a log directory offline.
type groupCommit struct {
	mu     sync.Mutex
	exec   Background
	own    *flusher // the pass's own goroutine when Config.Background is nil, made on first use
	wanted bool     // a request came after the running pass read its target
	queued bool     // a pass is pending or running
	// stopped: the log closed; passes do nothing.
	stopped bool
	err     error // the first failed pass, final
	// listener hears every pass that moved FlushedOffset or failed.
	listener func()
}

// FlushedOffset is the offset below which every record is known to be on disk: synced
// by a group commit (or a Flush, Close or recovery that preceded it). A truncation below
// it lowers it.
func (l *Log) FlushedOffset() int64 { return l.flushed.Load() }

// SyncErr is the failure of a group commit, after which FlushedOffset no longer moves
// (nil while none failed). It wraps ErrStorage.
func (l *Log) SyncErr() error {
	l.gc.mu.Lock()
	defer l.gc.mu.Unlock()
	return l.gc.err
}

// SetSyncListener makes fn hear each group commit that moved FlushedOffset or failed
// (see SyncErr), on the goroutine that ran it, after the log's locks are released. Set it
// once, before the first RequestSync that it must hear.
func (l *Log) SetSyncListener(fn func()) {
	l.gc.mu.Lock()
	l.gc.listener = fn
	l.gc.mu.Unlock()
}

// RequestSync asks for everything appended so far to be made durable by a group commit,
// and returns without waiting for it: FlushedOffset moves once it has run. The caller
// must not hold the log's append lock (an Inline executor runs the pass at once).
func (l *Log) RequestSync() {
	g := &l.gc
	g.mu.Lock()
	if g.stopped || g.err != nil || l.end.Load() <= l.flushed.Load() {
		g.mu.Unlock()
		return
	}
	g.wanted = true
	if g.queued {
		g.mu.Unlock()
		return
	}
	g.queued = true
	if g.exec == nil {
		g.own = newFlusher()
		g.exec = g.own
	}
	exec := g.exec
	g.mu.Unlock()
	exec.Go(l.runGroupCommit)
}

// runGroupCommit runs passes while requests keep coming.
func (l *Log) runGroupCommit() {
	g := &l.gc
	for {
		g.mu.Lock()
		if g.stopped || g.err != nil || !g.wanted {
			g.queued = false
			g.mu.Unlock()
			return
		}
		g.wanted = false
		g.mu.Unlock()
		moved, err := l.groupSync()
		g.mu.Lock()
		if err != nil && g.err == nil {
			g.err = err
			l.logger().Error("group commit fsync failed; this log's flushed offset no longer moves", "dir", l.dir, "err", err)
		}
		listener := g.listener
		g.mu.Unlock()
		if (moved || err != nil) && listener != nil {
			listener()
		}
	}
}

// groupSync is one pass: it reads the end offset, syncs what lies below it, and
// publishes it as the flushed offset unless a truncation came in between.
func (l *Log) groupSync() (moved bool, err error) {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return false, nil
	}
	target, gen, newFiles := l.end.Load(), l.truncGen, l.newFiles
	l.newFiles = false
	var segs []*segment
	for _, s := range l.segments() {
		if !s.synced.Load() && s.acquire() {
			segs = append(segs, s)
		}
	}
	l.mu.Unlock()
	interval := int64(l.config().IndexIntervalBytes)
	for _, s := range segs {
		if err == nil {
			e := s.use(interval)
			if e == nil {
				e = s.syncData()
				s.unuse()
			}
			if e != nil && e != errSegmentGone {
				err = fmt.Errorf("group commit of log %s: %w", l.dir, e)
			}
		}
		s.release()
	}
	if err == nil && newFiles {
		// fdatasync makes a new segment's bytes durable, not its name.
		if e := l.fsys.SyncDir(l.dir); e != nil {
			err = fmt.Errorf("group commit of log %s: %w", l.dir, storageError("sync log directory", e))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.newFiles = l.newFiles || newFiles
		return false, err
	}
	if gen != l.truncGen || l.closed.Load() || target <= l.flushed.Load() {
		return false, nil
	}
	l.flushed.Store(target)
	return true, nil
}

// noteTruncated lowers the flushed offset to a truncation's new end, and makes a pass
// that read its target before the truncation publish nothing. The caller holds mu.
func (l *Log) noteTruncated(end int64) {
	l.truncGen++
	if l.flushed.Load() > end {
		l.flushed.Store(end)
	}
}

// stopGroupCommit ends the group commit when the log closes. It does not wait for a pass
// in progress: that pass may be in the listener, waiting for a lock that the closer of
// the log holds (a partition closes its log under its own lock). Such a pass finds the
// log closed and publishes nothing, and the goroutine ends after it.
func (l *Log) stopGroupCommit() {
	l.gc.mu.Lock()
	defer l.gc.mu.Unlock()
	if l.gc.stopped {
		return
	}
	l.gc.stopped = true
	if l.gc.own != nil {
		close(l.gc.own.stop)
	}
}
