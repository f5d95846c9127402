package log

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Log is one partition's log: a directory of segments, the last of which is active.
//
// One appender at a time: Append, AppendReplica, Truncate, DeleteRecordsBefore,
// EnforceRetention and Close are serialized by an internal mutex. Readers (Read,
// ScanHeaders, OffsetForTimestamp, the offset accessors) never take it: the end offset
// is published atomically after the batch bytes, the segment list is replaced
// copy-on-write, and a View pins the segments it points into.
type Log struct {
	dir  string
	fsys fileSystem
	cfg  atomic.Pointer[Config]

	// mu is the appender's lock.
	mu     sync.Mutex
	segs   atomic.Pointer[[]*segment] // sorted by base offset; the last is active
	end    atomic.Int64
	start  atomic.Int64
	closed atomic.Bool

	// Flush-policy bookkeeping, under mu.
	flushedEnd int64 // end offset at the last policy or explicit flush
	lastFlush  int64 // unix ms of the last flush
	// newFiles: segment files were created since the directory was last synced by the
	// flush policy, so their directory entries may not survive a crash (under mu).
	newFiles bool
	// marked: the clean-shutdown marker of the last Close is still on disk (under mu).
	marked bool
	// recoveredFrom is where Open's recovery started (the end offset after a clean
	// shutdown); set once by Open.
	recoveredFrom int64

	// flushMu serializes full syncs and the recovery-point checkpoint.
	flushMu       sync.Mutex
	recoveryPoint int64

	lock io.Closer // the directory lock, held while open

	cleaner cleanerState // compaction (cleaner.go)
	txns    txnIndexes   // aborted transactions (txn_index.go)

	// bg runs the deferred work: syncing rolled segments, advancing the recovery point,
	// closing and unlinking deleted segments (background.go).
	bg bgState
	// writebackOff: sync_file_range is not supported here; set once, under mu.
	writebackOff bool

	// Group commit (groupcommit.go): flushed is the offset below which everything is
	// durable; truncGen (under mu) counts truncations, so that a pass that read its
	// target before one publishes nothing; syncDue (under mu) is a flush policy's request
	// for a pass, made once the append lock is released.
	gc       groupCommit
	flushed  atomic.Int64
	truncGen uint64
	syncDue  bool
}

// Open opens the log in dir, creating the directory if it is missing. After an unclean
// shutdown it scans the segments from the recovery point, verifies every batch, cuts
// the log at the first torn or invalid one and rebuilds missing or damaged indexes.
func Open(dir string, cfg Config) (*Log, error) {
	return openLog(dir, cfg, osFS{})
}

func openLog(dir string, cfg Config, fsys fileSystem) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	cfg = cfg.withDefaults()
	if cfg.Faults != nil {
		fsys = faultyFS{fileSystem: fsys, f: cfg.Faults}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, storageError("create log directory", err)
	}
	l := &Log{
		dir:  dir,
		fsys: fsys,
	}
	l.cfg.Store(&cfg)
	lock, err := fsys.Lock(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.lock = lock
	if err := l.load(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	now := cfg.Now().UnixMilli()
	l.flushedEnd, l.lastFlush = l.end.Load(), now
	l.bg.exec = cfg.Background
	if l.bg.exec == nil {
		l.bg.own = newFlusher()
		l.bg.exec = l.bg.own
	}
	l.scheduleFlush() // segments recovered unclean are synced before the recovery point moves
	// What recovery found beyond the recovery point may sit in the page cache only (a
	// killed process): it is durable once a group commit has synced it. Nothing asks for
	// that here: a log whose acknowledgements wait for it asks (the partition, the flush
	// policy), and the others need no goroutine for it.
	l.flushed.Store(min(l.recoveredFrom, l.end.Load()))
	l.gc.exec = cfg.Background
	return l, nil
}

func (l *Log) config() *Config { return l.cfg.Load() }

func (l *Log) logger() *slog.Logger { return l.config().Logger }

func (l *Log) nowMs() int64 { return l.config().Now().UnixMilli() }

// segments returns the current segment list; it must not be modified.
func (l *Log) segments() []*segment { return *l.segs.Load() }

// publish replaces the segment list.
func (l *Log) publish(segs []*segment) { l.segs.Store(&segs) }

func (l *Log) active() *segment {
	segs := l.segments()
	return segs[len(segs)-1]
}

// StartOffset is the log start offset: the first offset that may be read.
func (l *Log) StartOffset() int64 { return l.start.Load() }

// EndOffset is the log end offset: the offset the next appended record gets.
func (l *Log) EndOffset() int64 { return l.end.Load() }

// RecoveredFrom is the offset from which Open recovered the log: the end offset after a
// clean shutdown (nothing was recovered), the recovery point after an unclean one.
// Everything below it is as it was when it was made durable, so state derived from the
// log and saved beside it (epochs, producer snapshots) only needs replaying from here.
func (l *Log) RecoveredFrom() int64 { return l.recoveredFrom }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Size is the number of bytes in all segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// NumSegments is the number of segments, the active one included.
func (l *Log) NumSegments() int { return len(l.segments()) }

// SetConfig changes the configuration, as a dynamic topic config change does. New
// sizes apply from the next roll, retention from the next EnforceRetention. An invalid
// configuration is logged and ignored (check it first with Config.Validate); a nil
// Logger or Now keeps the current one.
func (l *Log) SetConfig(cfg Config) {
	old := l.config()
	if cfg.Logger == nil {
		cfg.Logger = old.Logger
	}
	if cfg.Now == nil {
		cfg.Now = old.Now
	}
	cfg.Maps = old.Maps             // segments stay counted where they were mapped
	cfg.Faults = old.Faults         // the file system was chosen at Open
	cfg.Background = old.Background // so was the executor (bg)
	if err := cfg.Validate(); err != nil {
		old.Logger.Warn("ignoring invalid log config", "dir", l.dir, "err", err)
		return
	}
	cfg = cfg.withDefaults()
	l.cfg.Store(&cfg)
}

// Close shuts the log down cleanly: it syncs everything, trims the active segment's
// files to their contents, writes the recovery point and the clean-shutdown marker.
// Views obtained before stay valid until released. Closing twice is a no-op.
func (l *Log) Close() error {
	err := l.close(true)
	l.stopGroupCommit()
	return err
}

// CloseUnclean closes the log as Close does but leaves no clean-shutdown marker (and
// removes one left from before), so that the next Open recovers from the recovery point
// and RecoveredFrom says so: for a caller whose own state beside the log could not be
// saved.
func (l *Log) CloseUnclean() error {
	err := l.close(false)
	l.stopGroupCommit()
	return err
}

// Abandon lets go of the log as a killed process does: nothing is sealed, trimmed,
// synced or marked, and the directory lock is released. What was written stays as the
// page cache holds it, so that a power cut after it (Faults.PowerLoss) loses exactly
// what was never fsynced. Views obtained before stay valid until released. For
// simulations and tests; a running broker closes its logs.
func (l *Log) Abandon() {
	defer l.stopGroupCommit() // after mu is released: a pass in progress takes it
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return
	}
	// Deletions not done yet stay undone, as a killed process leaves them: their files
	// keep their .deleted names, which the next Open removes.
	for _, s := range l.stopBackground() {
		s.release()
	}
	segs := l.segments()
	l.publish(nil)
	for _, s := range segs {
		s.release()
	}
	l.lock.Close()
}

func (l *Log) close(clean bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	for _, s := range l.stopBackground() {
		l.deleteNow(s)
	}
	var err error
	if !clean {
		// A clean close replaces the marker atomically instead.
		err = l.markDirty()
	}
	err = errors.Join(err, l.shutdown(clean))
	l.lock.Close()
	return err
}

func (l *Log) shutdown(clean bool) error {
	segs := l.segments()
	var errs []error
	if err := segs[len(segs)-1].seal(l.nowMs()); err != nil {
		errs = append(errs, err)
	}
	l.flushMu.Lock()
	for _, s := range segs {
		if s.synced.Load() {
			continue
		}
		if err := s.use(int64(l.config().IndexIntervalBytes)); err != nil {
			errs = append(errs, err)
			continue
		}
		err := s.trim()
		if err == nil {
			err = s.sync()
		}
		s.unuse()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := l.syncTxns(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		table := make([]segmentSummary, len(segs))
		for i, s := range segs {
			table[i] = segmentSummary{base: s.base, size: s.size.Load(), maxTs: s.maxTimestamp.Load(), modTime: s.modTime.Load(), rollTs: s.rollTs}
		}
		if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, l.end.Load()); err != nil {
			errs = append(errs, err)
		} else if clean {
			if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, cleanShutdownFile), encodeCleanShutdown(l.end.Load(), l.start.Load(), table)); err != nil {
				errs = append(errs, storageError("write clean-shutdown marker", err))
			}
		}
	}
	l.flushMu.Unlock()
	l.publish(nil)
	for _, s := range segs {
		s.release()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close log %s: %w", l.dir, err)
	}
	return nil
}

// Delete closes the log without syncing and removes its directory, as topic deletion
// does. Views obtained before stay valid until released.
func (l *Log) Delete() error {
	l.mu.Lock()
	if !l.closed.Swap(true) {
		for _, s := range l.stopBackground() {
			s.release() // its files go with the directory
		}
		segs := l.segments()
		l.publish(nil)
		for _, s := range segs {
			s.retire()
			s.release()
		}
		l.lock.Close()
	}
	l.mu.Unlock()
	l.stopGroupCommit()
	if err := l.fsys.RemoveAll(l.dir); err != nil {
		return storageError("delete log directory", err)
	}
	return nil
}

// errClosed wraps ErrClosed with the directory.
func (l *Log) errClosed() error { return fmt.Errorf("%w: %s", ErrClosed, l.dir) }
