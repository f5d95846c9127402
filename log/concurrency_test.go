package log

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentReadersDuringAppendsAndRetention runs one appender, retention, flushes
// and several readers at once. Readers check every batch's CRC and that offsets only
// grow; some hold their views across retention and check them again afterwards, which
// fails (or crashes) if a segment is unmapped under a view.
func TestConcurrentReadersDuringAppendsAndRetention(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 8 << 10
	cfg.RetentionBytes = 64 << 10
	cfg.RetentionMs = -1
	l := mustOpen(t, t.TempDir(), cfg)

	const appends = 3000
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(format string, args ...any) {
		select {
		case errs <- errorf(format, args...):
		default:
		}
	}

	wg.Add(1)
	go func() { // the appender
		defer wg.Done()
		defer done.Store(true)
		// Keep going until retention has deleted something, so that readers race it.
		for i := 0; i < appends || (l.StartOffset() == 0 && i < 50*appends); i++ {
			b := makeBatch(t, batchSpec{records: 1 + i%5, valueSize: 20 + i%300, timestamp: int64(i)})
			if _, err := l.Append(b, int32(i/100)); err != nil {
				fail("append %d: %v", i, err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // retention and flushes
		defer wg.Done()
		for i := 0; !done.Load(); i++ {
			if _, err := l.EnforceRetention(); err != nil {
				fail("retention: %v", err)
			}
			if i%20 == 0 {
				if err := l.Flush(); err != nil {
					fail("flush: %v", err)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			var held []*View
			for !done.Load() {
				start, end := l.StartOffset(), l.EndOffset()
				off := start + rng.Int64N(end-start+1)
				v, err := l.Read(off, 1+rng.IntN(32<<10), end, rng.IntN(2) == 0)
				if isErr(err, ErrOffsetOutOfRange) {
					continue // retention moved the start
				}
				if err != nil {
					fail("read %d: %v", off, err)
					return
				}
				if err := checkView(v, off); err != nil {
					fail("read %d: %v", off, err)
				}
				if rng.IntN(4) == 0 && len(held) < 50 {
					held = append(held, v)
				} else {
					v.Release()
				}
				if rng.IntN(8) == 0 {
					if _, _, err := l.OffsetForTimestamp(rng.Int64N(appends)); err != nil {
						fail("offset for timestamp: %v", err)
					}
				}
			}
			// Retention has deleted most of what these views point at by now.
			for _, v := range held {
				if err := checkView(v, v.FirstOffset); err != nil {
					fail("held view: %v", err)
				}
				v.Release()
			}
		}(uint64(r))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l.StartOffset() == 0 {
		t.Error("retention deleted nothing; the test did not exercise it")
	}
	checkIndexes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkView verifies that a view holds whole, valid batches with growing offsets, the
// first containing or following offset.
func checkView(v *View, offset int64) error {
	next := int64(-1)
	size := 0
	for _, c := range v.Chunks {
		size += len(c)
		for len(c) > 0 {
			h, err := ValidateHeader(c)
			if err != nil {
				return err
			}
			if next < 0 {
				if h.BaseOffset != v.FirstOffset || h.LastOffset() < offset {
					return errorf("first batch [%d, %d] for offset %d, FirstOffset %d", h.BaseOffset, h.LastOffset(), offset, v.FirstOffset)
				}
			} else if h.BaseOffset != next {
				return errorf("batch at %d after one ending at %d", h.BaseOffset, next-1)
			}
			next = h.LastOffset() + 1
			c = c[h.Size():]
		}
	}
	if size != v.Size {
		return errorf("Size %d, chunks hold %d", v.Size, size)
	}
	if next >= 0 && v.NextOffset != next {
		return errorf("NextOffset %d, last batch ends at %d", v.NextOffset, next-1)
	}
	return nil
}

// TestConcurrentReadersDuringTruncation races readers with truncations and appends. A
// reader may see zeroed or rewritten bytes of a truncated tail (as in Kafka), so it only
// checks that nothing crashes, hangs or races.
func TestConcurrentReadersDuringTruncation(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4 << 10
	// Truncation syncs; durability is not what this test is about.
	l, err := openLog(t.TempDir(), cfg, noSyncFS{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var done atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				end := l.EndOffset()
				v, err := l.Read(end/2, 8<<10, end, true)
				if err == nil {
					for _, c := range v.Chunks {
						SplitBatches(c) // any result; no crash
					}
					v.Release()
				}
				l.ScanHeaders(0, func(Header) bool { return true })
				runtime.Gosched()
			}
		}()
	}
	for i := 0; i < 300; i++ {
		for j := 0; j < 5; j++ {
			mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 200}), int32(i))
		}
		if i%3 == 2 {
			if err := l.Truncate(l.EndOffset() - 7); err != nil {
				t.Fatal(err)
			}
		}
	}
	done.Store(true)
	wg.Wait()
	checkIndexes(t, l)
}

// TestCloseWithHeldViewsAndNoLeaks closes and deletes logs while views are held, and
// checks that no goroutine outlives them.
func TestCloseWithHeldViewsAndNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		l := mustOpen(t, t.TempDir(), testConfig(nil))
		for j := 0; j < 20; j++ {
			mustAppend(t, l, makeBatch(t, batchSpec{valueSize: 100}), 0)
		}
		v, err := l.Read(0, 1<<20, l.EndOffset(), false)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			err = l.Close()
		} else {
			err = l.Delete()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := checkView(v, 0); err != nil {
			t.Fatalf("view after close: %v", err)
		}
		v.Release()
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after closing, %d before", n, before)
	}
}
