package log

import (
	"sync"
)

// Background runs a log's deferred work: syncing and trimming rolled segments, advancing
// the recovery point, and closing and unlinking deleted segments. None of it may run on
// the goroutine of a produce or a fetch, where an fsync, a close of a mapped file or an
// unlink of a large one would stall every request behind it (KAFKA-9693).
//
// Go arranges for fn to run once, later, and must not wait for it. The log coalesces its
// work, so at most one call of a log is pending at a time, and a call that comes after
// the log closed does nothing. Config.Background nil gives each log a goroutine of its
// own, stopped by Close; a deterministic simulation passes an executor that runs fn as an
// event of its scheduler (or Inline), so that a seed replays exactly.
type Background interface {
	Go(fn func())
}

// Inline is a Background that runs the work at once on the caller's goroutine, under the
// log's append lock: deterministic, for tests and simulations, never for a broker.
type Inline struct{}

// Go runs fn now.
func (Inline) Go(fn func()) { fn() }

// flusher is the default Background: one goroutine that runs what it is given in order,
// until close.
type flusher struct {
	mu    sync.Mutex
	queue []func()
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

func newFlusher() *flusher {
	f := &flusher{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *flusher) Go(fn func()) {
	f.mu.Lock()
	f.queue = append(f.queue, fn)
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *flusher) loop() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case <-f.kick:
		}
		for {
			f.mu.Lock()
			q := f.queue
			f.queue = nil
			f.mu.Unlock()
			if len(q) == 0 {
				break
			}
			for _, fn := range q {
				fn()
			}
		}
	}
}

// close stops the goroutine after the call it is running; what is still queued is
// dropped (the log drains its own work when it closes).
func (f *flusher) close() {
	close(f.stop)
	<-f.done
}

// bgState is a log's deferred work, run through its Background.
type bgState struct {
	exec Background
	own  *flusher // the log's own goroutine when Config.Background is nil

	mu      sync.Mutex
	flush   bool       // rolled segments wait for their trim and sync
	deletes []*segment // deleted segments wait for their close and unlink
	queued  bool       // a run is pending in exec
	stopped bool       // the log closed: runs do nothing

	// run is held while the work runs, so that Close can wait for a run in progress.
	run sync.Mutex
}

// scheduleFlush asks for the rolled segments to be synced and the recovery point moved.
func (l *Log) scheduleFlush() {
	l.bg.mu.Lock()
	l.bg.flush = true
	l.schedule()
}

// scheduleDelete hands a segment taken out of the list (and retired, its files renamed
// to .deleted) to the background, which drops the log's reference (unmapping and closing
// it once no View holds it) and unlinks its files.
func (l *Log) scheduleDelete(s *segment) {
	l.bg.mu.Lock()
	if l.bg.stopped {
		l.bg.mu.Unlock()
		l.deleteNow(s)
		return
	}
	l.bg.deletes = append(l.bg.deletes, s)
	l.schedule()
}

// schedule hands a run to the executor unless one is pending. The caller holds bg.mu,
// which schedule releases.
func (l *Log) schedule() {
	if l.bg.queued || l.bg.stopped {
		l.bg.mu.Unlock()
		return
	}
	l.bg.queued = true
	l.bg.mu.Unlock()
	l.bg.exec.Go(l.runBackground)
}

// runBackground does the pending work until none is left.
func (l *Log) runBackground() {
	l.bg.run.Lock()
	defer l.bg.run.Unlock()
	for {
		l.bg.mu.Lock()
		if l.bg.stopped {
			l.bg.mu.Unlock()
			return
		}
		flush, deletes := l.bg.flush, l.bg.deletes
		l.bg.flush, l.bg.deletes = false, nil
		if !flush && len(deletes) == 0 {
			l.bg.queued = false
			l.bg.mu.Unlock()
			return
		}
		l.bg.mu.Unlock()
		for _, s := range deletes {
			l.deleteNow(s)
		}
		if flush {
			if err := l.flushSealed(); err != nil {
				l.logger().Warn("background flush failed", "dir", l.dir, "err", err)
			}
		}
	}
}

// stopBackground ends the background work and waits for a run in progress; it returns
// the segments whose deletion had not run yet.
func (l *Log) stopBackground() []*segment {
	l.bg.mu.Lock()
	l.bg.stopped = true
	deletes := l.bg.deletes
	l.bg.deletes = nil
	l.bg.mu.Unlock()
	l.bg.run.Lock()
	l.bg.run.Unlock() //nolint:staticcheck // an empty critical section: waits for the run in progress
	if l.bg.own != nil {
		l.bg.own.close()
	}
	return deletes
}

// deleteNow drops the log's reference to a deleted segment and unlinks its files.
func (l *Log) deleteNow(s *segment) {
	s.release()
	if err := s.removeDeletedFiles(); err != nil {
		l.logger().Warn("deleting segment files", "dir", l.dir, "base_offset", s.base, "err", err)
	}
}
