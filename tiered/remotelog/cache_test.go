package remotelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shalelog/shale/tiered/objstore"
)

// countingStore counts GETs and can hold them until released.
type countingStore struct {
	objstore.Store
	gets atomic.Int64
	// gate, when set, is waited on (or the context) before each GET.
	gate chan struct{}
}

func (s *countingStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.gets.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key, off, n)
}

func newTestCache(t *testing.T, store objstore.Store, cfg CacheConfig) *ChunkCache {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := NewChunkCache(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func putObjects(t *testing.T, store objstore.Store, sizes ...int) map[string][]byte {
	t.Helper()
	objs := map[string][]byte{}
	for i, n := range sizes {
		key := fmt.Sprintf("obj-%d", i)
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i*31 + j*7 + j/251)
		}
		if err := store.Put(context.Background(), key, bytes.NewReader(data), int64(n)); err != nil {
			t.Fatal(err)
		}
		objs[key] = data
	}
	return objs
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestChunkCacheReadsWhatTheStoreHolds(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	objs := putObjects(t, store, 0, 1, 999, 1000, 1001, 4500, 12345)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, MaxBytes: 5000})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1500; i++ {
		key := fmt.Sprintf("obj-%d", rng.IntN(len(objs)))
		data := objs[key]
		off := rng.Int64N(int64(len(data)) + 50)
		n := rng.IntN(3500)
		got, err := c.ReadAt(ctx, key, off, n)
		if err != nil {
			t.Fatalf("read %s at %d for %d: %v", key, off, n, err)
		}
		lo, hi := min(off, int64(len(data))), min(off+int64(n), int64(len(data)))
		if !bytes.Equal(got, data[lo:hi]) {
			t.Fatalf("read %s at %d for %d: %d bytes differ from the object's %d", key, off, n, len(got), hi-lo)
		}
		if st := c.Stats(); st.Bytes > 5000 {
			t.Fatalf("the cache holds %d bytes, above its 5000", st.Bytes)
		}
	}
	st := c.Stats()
	if st.Hits == 0 || st.Misses == 0 || st.Evictions == 0 || st.HitBytes == 0 || st.FetchedBytes == 0 {
		t.Fatalf("stats after random reads: %+v", st)
	}
	if _, err := c.ReadAt(ctx, "absent", 0, 10); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("read of a missing object: %v, want not found", err)
	}
	if _, err := c.ReadAt(ctx, "absent", 0, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("zero-byte read of a missing object: %v, want not found", err)
	}
	// The files on disk are the chunks counted, and no more, once the fetches a read
	// started past an object's end have ended.
	waitFor(t, "the fetches to end", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.inflight) == 0
	})
	st = c.Stats()
	files, _ := filepath.Glob(filepath.Join(c.dir, "*"))
	if len(files) != st.Chunks {
		t.Fatalf("%d files in the cache directory for %d chunks", len(files), st.Chunks)
	}
}

func TestChunkCacheHitsDoNotGet(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: objstore.NewMemory()}
	objs := putObjects(t, store, 10_000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: -1})
	for range 3 {
		got, err := c.ReadAt(ctx, "obj-0", 1500, 2000) // chunks 1, 2 and 3
		if err != nil || !bytes.Equal(got, objs["obj-0"][1500:3500]) {
			t.Fatalf("read: %d bytes, %v", len(got), err)
		}
	}
	if g := store.gets.Load(); g != 3 {
		t.Fatalf("%d GETs for three reads of the same three chunks, want 3", g)
	}
	st := c.Stats()
	if st.Misses != 3 || st.Hits != 6 || st.FetchedBytes != 3000 || st.HitBytes != 4000 || st.Prefetches != 0 {
		t.Fatalf("stats: %+v", st)
	}
	// A chunk file removed behind the cache's back is fetched again.
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.chunk"))
	for _, f := range files {
		os.Remove(f)
	}
	if got, err := c.ReadAt(ctx, "obj-0", 1500, 2000); err != nil || !bytes.Equal(got, objs["obj-0"][1500:3500]) {
		t.Fatalf("read after the files went: %d bytes, %v", len(got), err)
	}
}

func TestChunkCachePrefetchesForSequentialReaders(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: objstore.NewMemory()}
	objs := putObjects(t, store, 10_000, 10_000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: 2})
	data := objs["obj-0"]
	// One read alone is not sequential: nothing ahead.
	if _, err := c.ReadAt(ctx, "obj-1", 5000, 100); err != nil {
		t.Fatal(err)
	}
	// A consumer reading forward: after the second read, chunks 3 and 4 come ahead.
	for _, r := range []struct{ off, n int64 }{{0, 1500}, {1500, 1400}} {
		got, err := c.ReadAt(ctx, "obj-0", r.off, int(r.n))
		if err != nil || !bytes.Equal(got, data[r.off:r.off+r.n]) {
			t.Fatalf("read at %d: %v", r.off, err)
		}
	}
	waitFor(t, "the prefetch of chunks 3 and 4", func() bool { return c.Stats().Chunks == 6 })
	if st := c.Stats(); st.Prefetches != 2 {
		t.Fatalf("stats after two sequential reads: %+v", st)
	}
	misses := c.Stats().Misses
	got, err := c.ReadAt(ctx, "obj-0", 2900, 2000)
	if err != nil || !bytes.Equal(got, data[2900:4900]) {
		t.Fatalf("read of the prefetched chunks: %v", err)
	}
	if m := c.Stats().Misses; m != misses {
		t.Fatalf("reading prefetched chunks missed %d times", m-misses)
	}
	// Prefetch stops at the object's end.
	if _, err := c.ReadAt(ctx, "obj-0", 4900, 5100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the prefetches to finish", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.prefetching == 0
	})
	if st := c.Stats(); st.Bytes != 10_000+1000 {
		t.Fatalf("after reading the whole object: %+v", st)
	}
}

func TestChunkCacheFetchesAChunkOnce(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: objstore.NewMemory(), gate: make(chan struct{})}
	objs := putObjects(t, store, 3000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: -1})
	const readers = 16
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.ReadAt(ctx, "obj-0", int64(i*10), 500)
			if err == nil && !bytes.Equal(got, objs["obj-0"][i*10:i*10+500]) {
				err = fmt.Errorf("reader %d: wrong bytes", i)
			}
			errs <- err
		}()
	}
	waitFor(t, "the readers to wait on one fetch", func() bool { return c.Stats().Hits+c.Stats().Misses == readers })
	close(store.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := store.gets.Load(); g != 1 {
		t.Fatalf("%d GETs for one chunk read by %d readers at once", g, readers)
	}
}

// A reader that gives up does not fail the others waiting on the same chunk, and the
// fetch it started completes for the next read.
func TestChunkCacheReaderGivingUpDoesNotStopTheFetch(t *testing.T) {
	store := &countingStore{Store: objstore.NewMemory(), gate: make(chan struct{})}
	objs := putObjects(t, store, 3000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: -1})
	firstCtx, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(firstCtx, "obj-0", 0, 10)
		firstErr <- err
	}()
	waitFor(t, "the first fetch", func() bool { return store.gets.Load() == 1 })
	waiterErr := make(chan error, 1)
	go func() {
		got, err := c.ReadAt(context.Background(), "obj-0", 100, 10)
		if err == nil && !bytes.Equal(got, objs["obj-0"][100:110]) {
			err = errors.New("wrong bytes")
		}
		waiterErr <- err
	}()
	waitFor(t, "the second reader to wait", func() bool { return c.Stats().Hits == 1 })
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reader that gave up: %v", err)
	}
	close(store.gate)
	if err := <-waiterErr; err != nil {
		t.Fatalf("the waiting reader: %v", err)
	}
	if got, err := c.ReadAt(context.Background(), "obj-0", 0, 10); err != nil || !bytes.Equal(got, objs["obj-0"][:10]) {
		t.Fatalf("reading again: %v", err)
	}
	if g := store.gets.Load(); g != 1 {
		t.Fatalf("%d GETs, want the one", g)
	}
}

// Close ends a fetch that hangs, and the reader waiting for it.
func TestChunkCacheCloseEndsFetches(t *testing.T) {
	store := &countingStore{Store: objstore.NewMemory(), gate: make(chan struct{})}
	putObjects(t, store, 3000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: -1})
	readErr := make(chan error, 1)
	go func() {
		_, err := c.ReadAt(context.Background(), "obj-0", 0, 10)
		readErr <- err
	}()
	waitFor(t, "the fetch", func() bool { return store.gets.Load() == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, ErrCacheClosed) {
		t.Fatalf("the read waiting on a fetch Close ended: %v", err)
	}
}

func TestChunkCacheCloseStopsPrefetches(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: objstore.NewMemory()}
	putObjects(t, store, 10_000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: 3})
	if _, err := c.ReadAt(ctx, "obj-0", 0, 1000); err != nil {
		t.Fatal(err)
	}
	// From now on GETs hang until their context ends: only Close can end the
	// prefetches that a second read of chunk 0 (a reader going forward) starts.
	store.gate = make(chan struct{})
	gets := store.gets.Load()
	if _, err := c.ReadAt(ctx, "obj-0", 500, 500); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three prefetches", func() bool { return store.gets.Load() == gets+3 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return while prefetches hung")
	}
	if st := c.Stats(); st.Chunks != 1 || st.Prefetches != 3 {
		t.Fatalf("after Close: %+v", st)
	}
	if _, err := c.ReadAt(ctx, "obj-0", 0, 10); !errors.Is(err, ErrCacheClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

// Chunks of an earlier run are removed at open; other files are left alone.
func TestChunkCacheStartsEmpty(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := objstore.NewMemory()
	putObjects(t, store, 5000)
	c := newTestCache(t, store, CacheConfig{Dir: dir, ChunkBytes: 1000, Prefetch: -1})
	if _, err := c.ReadAt(ctx, "obj-0", 0, 5000); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := newTestCache(t, store, CacheConfig{Dir: dir, ChunkBytes: 1000})
	if st := c2.Stats(); st.Chunks != 0 {
		t.Fatalf("reopened: %+v", st)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 || names[0].Name() != "keep.txt" {
		t.Fatalf("after reopening the directory holds %v", names)
	}
}

// Readers of segments through a small cache, concurrently, get what direct reads get.
func TestReaderThroughTheCache(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 9)
	store := objstore.NewMemory()
	uploadAll(t, ctx, store, segs)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 4096, MaxBytes: 64 << 10, Prefetch: 2})
	cached, direct := NewReader(c), NewReader(Direct(store))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 60 {
				s := segs[rng.IntN(len(segs))]
				// Half the readers go through a segment in order, half jump around.
				off := s.seg.BaseOffset + rng.Int64N(s.seg.EndOffset-s.seg.BaseOffset+1)
				for off <= s.seg.EndOffset {
					maxBytes := 1 + rng.IntN(6000)
					got, err := cached.Read(ctx, s.seg, off, maxBytes)
					if err != nil {
						errs <- err
						return
					}
					want, err := direct.Read(ctx, s.seg, off, maxBytes)
					if err != nil || !bytes.Equal(got, want) {
						errs <- fmt.Errorf("segment %d offset %d: %d bytes through the cache, %d direct (%v)", s.seg.BaseOffset, off, len(got), len(want), err)
						return
					}
					if w%2 == 1 {
						break
					}
					last, err := lastOffsetOf(got)
					if err != nil {
						errs <- err
						return
					}
					off = last + 1
				}
				if w%3 == 0 {
					ts := s.batches[rng.IntN(len(s.batches))].maxTs
					a, okA, errA := cached.OffsetForTimestamp(ctx, s.seg, ts)
					b, okB, errB := direct.OffsetForTimestamp(ctx, s.seg, ts)
					if errA != nil || errB != nil || a != b || okA != okB {
						errs <- fmt.Errorf("offset for timestamp %d: (%d, %v, %v) cached, (%d, %v, %v) direct", ts, a, okA, errA, b, okB, errB)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Bytes > 64<<10 || st.Hits == 0 || st.Evictions == 0 || st.Prefetches == 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func lastOffsetOf(batches []byte) (int64, error) {
	last := int64(-1)
	for len(batches) > 0 {
		h, err := parseBatchHeader(batches)
		if err != nil {
			return 0, err
		}
		last = h.last
		batches = batches[h.size:]
	}
	return last, nil
}

func TestChunkCacheMetrics(t *testing.T) {
	store := objstore.NewMemory()
	putObjects(t, store, 2500)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: -1})
	for range 2 {
		if _, err := c.ReadAt(context.Background(), "obj-0", 0, 2500); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP shale_remote_log_cache_bytes Bytes of chunks in the on-disk chunk cache.
# TYPE shale_remote_log_cache_bytes gauge
shale_remote_log_cache_bytes 2500
# HELP shale_remote_log_cache_hits_total Chunk lookups of remote log reads served from the on-disk chunk cache (or a fetch already under way).
# TYPE shale_remote_log_cache_hits_total counter
shale_remote_log_cache_hits_total 3
# HELP shale_remote_log_cache_misses_total Chunk lookups of remote log reads that had to fetch the chunk from the object store.
# TYPE shale_remote_log_cache_misses_total counter
shale_remote_log_cache_misses_total 3
`
	if err := promtestutil.CollectAndCompare(c, strings.NewReader(want),
		"shale_remote_log_cache_bytes", "shale_remote_log_cache_hits_total", "shale_remote_log_cache_misses_total"); err != nil {
		t.Fatal(err)
	}
	if n := promtestutil.CollectAndCount(c); n != 9 {
		t.Fatalf("%d metrics, want 9", n)
	}
}

// A read of several missing chunks fetches them at once, each counted once.
func TestChunkCacheFetchesTheChunksOfAReadAtOnce(t *testing.T) {
	store := &countingStore{Store: objstore.NewMemory(), gate: make(chan struct{})}
	objs := putObjects(t, store, 10_000)
	c := newTestCache(t, store, CacheConfig{ChunkBytes: 1000, Prefetch: -1})
	done := make(chan error, 1)
	go func() {
		got, err := c.ReadAt(context.Background(), "obj-0", 500, 3000) // chunks 0 to 3
		if err == nil && !bytes.Equal(got, objs["obj-0"][500:3500]) {
			err = errors.New("wrong bytes")
		}
		done <- err
	}()
	waitFor(t, "four GETs under way together", func() bool { return store.gets.Load() == 4 })
	close(store.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Misses != 4 || st.Hits != 0 || st.HitBytes != 0 || st.FetchedBytes != 4000 {
		t.Fatalf("stats: %+v", st)
	}
}
