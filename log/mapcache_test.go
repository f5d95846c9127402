package log

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// manySegments makes a cleanly closed log of at least n segments in dir and returns
// its batches.
func manySegments(t *testing.T, dir string, cfg Config, n int) [][]byte {
	t.Helper()
	l := mustOpen(t, dir, cfg)
	for i := 0; l.NumSegments() < n; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 400, timestamp: int64(1000 + i)}), 1)
	}
	all := readAll(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return all
}

// countingFS counts the files a log opens.
type countingFS struct {
	noSyncFS
	opens atomic.Int64
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	c.opens.Add(1)
	return c.noSyncFS.OpenFile(name, flag, perm)
}

// TestCleanOpenOpensNoSealedSegment: after a clean shutdown, Open learns the sealed
// segments from the marker and maps none of them; a segment is mapped on first read.
func TestCleanOpenOpensNoSealedSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Maps = NewMapCache(100)
	want := manySegments(t, dir, cfg, 20)

	fsys := &countingFS{}
	l, err := openLog(dir, cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The lock and the marker: a few, not
	// two per segment.
	if n := fsys.opens.Load(); n > 2 {
		t.Fatalf("a clean open of %d segments opened %d files", l.NumSegments(), n)
	}
	if m := cfg.Maps.Mapped(); m != 0 {
		t.Fatalf("%d sealed segments mapped by a clean open", m)
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d batches after reopen, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	// The last segment too: it becomes writable only with the first append.
	if m := cfg.Maps.Mapped(); m != l.NumSegments() {
		t.Fatalf("%d segments mapped after reading them all, want %d", m, l.NumSegments())
	}
	end := l.EndOffset()
	held, err := l.Read(end-1, 1<<20, end, true)
	if err != nil {
		t.Fatal(err)
	}
	info := mustAppend(t, l, makeBatch(t, batchSpec{timestamp: 5000}), 2)
	if info.BaseOffset != end {
		t.Fatalf("first append after a clean open at %d, want %d", info.BaseOffset, end)
	}
	if !bytes.Equal(held.Chunks[0], want[len(want)-1]) {
		t.Fatal("a View of the last segment changed when it became writable")
	}
	held.Release()
	checkIndexes(t, l)
	if got := readAll(t, l, 0); len(got) != len(want)+1 {
		t.Fatalf("%d batches after the append, want %d", len(got), len(want)+1)
	}
	// Retention still sees the largest timestamps the marker carried.
	if off, ok, err := l.OffsetForTimestamp(1000 + int64(len(want)) - 1); err != nil || !ok {
		t.Fatalf("OffsetForTimestamp: %d %v %v", off, ok, err)
	}
}

// TestMapCacheBoundsMappings reads a log of many segments through a small cache: the
// sealed segments mapped never exceed the limit once reads let go of them, and the
// process's own mappings (from /proc/self/maps) grow by the limit, not by the segments.
func TestMapCacheBoundsMappings(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Maps = NewMapCache(3)
	want := manySegments(t, dir, cfg, 30)
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	before := processMappings(t)
	for pass := 0; pass < 2; pass++ {
		got := readAll(t, l, 0)
		if len(got) != len(want) {
			t.Fatalf("pass %d: %d batches, want %d", pass, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("pass %d: batch %d differs", pass, i)
			}
		}
		if m := cfg.Maps.Mapped(); m > 3 {
			t.Fatalf("pass %d: %d sealed segments mapped, limit 3", pass, m)
		}
	}
	checkIndexes(t, l)
	if m := cfg.Maps.Mapped(); m > 3 {
		t.Fatalf("%d sealed segments mapped after checking indexes, limit 3", m)
	}
	// Three mappings per segment; other tests' goroutines may map a little meanwhile.
	if grew := processMappings(t) - before; grew > 3*3+8 {
		t.Fatalf("mappings grew by %d reading %d segments through a cache of 3", grew, l.NumSegments())
	}
}

func processMappings(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(b), "\n")
}

// TestMapCacheKeepsHeldViews holds a View of every sealed segment through a cache of
// one, then reads them all again: nothing a View points at may be unmapped (reading it
// would fault), and the cache goes back to its limit once the Views are released.
func TestMapCacheKeepsHeldViews(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Maps = NewMapCache(1)
	manySegments(t, dir, cfg, 8)
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	var views []*View
	var copies [][]byte
	segs := l.segments()
	for _, s := range segs[:len(segs)-1] {
		v, err := l.Read(s.base, 1<<20, l.EndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
		copies = append(copies, bytes.Clone(v.Chunks[0]))
	}
	if m := cfg.Maps.Mapped(); m < len(views) {
		t.Fatalf("%d segments mapped while %d are held", m, len(views))
	}
	readAll(t, l, 0)
	for i, v := range views {
		if !bytes.Equal(v.Chunks[0], copies[i]) {
			t.Fatalf("view %d changed under its holder", i)
		}
		v.Release()
	}
	readAll(t, l, 0)
	if m := cfg.Maps.Mapped(); m > 1 {
		t.Fatalf("%d segments mapped after the views were released, limit 1", m)
	}
}

// TestMapCacheConcurrentReaders: readers at random offsets through a cache of two, while
// appends roll new segments and retention deletes old ones. Every batch read must be
// intact (run with -race; an unmapped View faults).
func TestMapCacheConcurrentReaders(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.RetentionBytes = 64 << 10
	cfg.RetentionMs = -1
	cfg.Maps = NewMapCache(2)
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for l.NumSegments() < 10 {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 300}), 1)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for !done.Load() {
				start, end := l.StartOffset(), l.EndOffset()
				off := start + rng.Int64N(end-start+1)
				v, err := l.Read(off, 1+rng.IntN(8<<10), end, true)
				if err != nil {
					if isErr(err, ErrOffsetOutOfRange) {
						continue // retention moved the start meanwhile
					}
					errs <- err
					return
				}
				for _, c := range v.Chunks {
					for len(c) > 0 {
						h, err := ValidateHeader(c)
						if err != nil {
							errs <- errorf("offset %d: %v", off, err)
							v.Release()
							return
						}
						c = c[h.Size():]
					}
				}
				v.Release()
			}
		}(uint64(r))
	}
	for i := 0; i < 1500; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 300}), 1)
		if i%100 == 0 {
			if _, err := l.EnforceRetention(); err != nil {
				t.Error(err)
			}
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCrashAfterCleanOpenWithoutWrites: the marker stays until the first change, so a
// crash right after a clean open needs no recovery, even though the active segment's
// files were grown for appends; a crash after a write recovers.
func TestCrashAfterCleanOpenWithoutWrites(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	want := manySegments(t, dir, cfg, 5)
	end := func() int64 {
		h, _ := ParseHeader(want[len(want)-1])
		return h.LastOffset() + 1
	}()
	for round := 0; round < 2; round++ {
		l := mustOpen(t, dir, cfg)
		if l.RecoveredFrom() != end || l.EndOffset() != end {
			t.Fatalf("round %d: recovered from %d, end %d, want both %d", round, l.RecoveredFrom(), l.EndOffset(), end)
		}
		l.crashForTest()
	}
	reopenAndCheck(t, dir, cfg, want) // appends a batch and closes cleanly
	l := mustOpen(t, dir, cfg)
	mustAppend(t, l, makeBatch(t, batchSpec{}), 4)
	l.crashForTest()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.RecoveredFrom() >= l.EndOffset() {
		t.Fatalf("no recovery after a crash that followed a write: recovered from %d, end %d", l.RecoveredFrom(), l.EndOffset())
	}
	checkIndexes(t, l)
}

// TestSegmentMsAcrossCleanRestart: the last segment waits read-only for its first
// append after a clean open, and segment.ms still counts from its first batch (carried
// by the clean-shutdown marker), not from the restart.
func TestSegmentMsAcrossCleanRestart(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentMs = 60_000
	l := mustOpen(t, dir, cfg)
	mustAppend(t, l, makeBatch(t, batchSpec{timestamp: 1_000_000}), 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(61 * time.Second)
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments: segment.ms did not roll the idle segment reopened after a clean shutdown", l.NumSegments())
	}
	mustAppend(t, l, makeBatch(t, batchSpec{timestamp: 1_061_000}), 1)
	checkIndexes(t, l)
}
