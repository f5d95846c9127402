package log

import (
	"sync"
	"testing"
)

// TestGroupCommitOneFsyncCoversAllAppends: appends do not fsync; the requests they make
// while a pass is pending are served by that one pass, whose fsync covers them all, and
// only then does the flushed offset move.
func TestGroupCommitOneFsyncCoversAllAppends(t *testing.T) {
	fsys := newFaultFS()
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	cfg.Background = bg
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bg.runAll()
	base := fsys.syncs.Load()
	for range 20 {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
	}
	if got := fsys.syncs.Load() - base; got != 0 {
		t.Fatalf("%d fsyncs on the appender's goroutine, want 0", got)
	}
	if l.FlushedOffset() != 0 {
		t.Fatalf("flushed offset %d before any group commit ran, want 0", l.FlushedOffset())
	}
	if n := bg.pending(); n != 1 {
		t.Fatalf("%d group commits pending after 20 appends, want 1", n)
	}
	bg.runAll()
	if got := fsys.syncs.Load() - base; got != 1 {
		t.Fatalf("%d fsyncs for 20 appends, want 1", got)
	}
	if l.FlushedOffset() != 40 || l.EndOffset() != 40 {
		t.Fatalf("flushed offset %d, end %d; want 40 and 40", l.FlushedOffset(), l.EndOffset())
	}
}

// TestGroupCommitTruncationDuringPass: a pass that read its target before a truncation
// must not publish it: the flushed offset would stand above records that were cut and
// appended again, never synced.
func TestGroupCommitTruncationDuringPass(t *testing.T) {
	fsys := newFaultFS()
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.Background = bg
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bg.runAll()
	for range 5 {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
	}
	l.RequestSync()
	bg.runAll()
	if l.FlushedOffset() != 10 {
		t.Fatalf("flushed offset %d, want 10", l.FlushedOffset())
	}
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() != 4 {
		t.Fatalf("flushed offset %d after truncating to 4, want 4", l.FlushedOffset())
	}
	// The pass reads its target (here 6), then a truncation to 4 lands before it
	// publishes.
	mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
	fsys.beforeSync = func() {
		fsys.beforeSync = nil
		if err := l.Truncate(4); err != nil {
			t.Error(err)
		}
	}
	l.RequestSync()
	bg.runAll()
	if got := l.FlushedOffset(); got != 4 {
		t.Fatalf("flushed offset %d after a pass raced a truncation to 4, want 4", got)
	}
	l.RequestSync()
	bg.runAll()
	if got := l.FlushedOffset(); got != 4 || l.EndOffset() != 4 {
		t.Fatalf("flushed offset %d, end %d; want 4 and 4", got, l.EndOffset())
	}
}

// TestGroupCommitFailureIsFinal: a failed fsync stops the flushed offset for good, even
// if later fsyncs succeed: the kernel may have dropped the pages that it could not
// write. The listener hears it.
func TestGroupCommitFailureIsFinal(t *testing.T) {
	fsys := newFaultFS()
	cfg := testConfig(nil)
	cfg.Background = Inline{}
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	heard := 0
	l.SetSyncListener(func() { heard++ })
	mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
	l.RequestSync()
	if l.FlushedOffset() != 2 || heard != 1 {
		t.Fatalf("flushed offset %d, %d notifications; want 2 and 1", l.FlushedOffset(), heard)
	}
	fsys.syncErr = errEIO
	mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
	l.RequestSync()
	if err := l.SyncErr(); !isErr(err, ErrStorage) || !isErr(err, errEIO) || heard != 2 {
		t.Fatalf("after a failed fsync: %v, %d notifications; want a storage error and 2", err, heard)
	}
	fsys.syncErr = nil
	mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
	l.RequestSync()
	if l.FlushedOffset() != 2 {
		t.Fatalf("flushed offset %d after a failed fsync and a working one, want 2", l.FlushedOffset())
	}
}

// TestGroupCommitConcurrent: appenders on many goroutines with the log's own group
// commit goroutine; the flushed offset never passes the end offset and catches up with
// it, and Close stops the goroutine (run it with -race).
func TestGroupCommitConcurrent(t *testing.T) {
	fsys := newFaultFS()
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 8 << 10
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var watchErr error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Loaded in this order: the end only grows, so a flushed offset past a later
			// end would be a bug.
			f := l.FlushedOffset()
			if e := l.EndOffset(); f > e {
				watchErr = errFlushedPastEnd{f, e}
				return
			}
		}
	}()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				mustAppend(t, l, makeBatch(t, batchSpec{records: 1, valueSize: 100}), 0)
			}
		}()
	}
	wg.Wait()
	waitFlushed(t, l)
	close(stop)
	<-watched
	if watchErr != nil {
		t.Fatal(watchErr)
	}
	if got := fsys.syncs.Load(); got > 400+int64(l.NumSegments())*2+10 {
		t.Fatalf("%d fsyncs for 400 appends", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.RequestSync() // after Close: nothing
}

type errFlushedPastEnd struct{ flushed, end int64 }

func (e errFlushedPastEnd) Error() string {
	return "flushed offset passed the end offset"
}
