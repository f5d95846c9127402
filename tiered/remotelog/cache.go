package remotelog

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shalelog/shale/tiered/objstore"
)

// CacheConfig configures a ChunkCache.
type CacheConfig struct {
	// Dir holds the cached chunks. It is created if missing; chunk files left in it by
	// an earlier run are removed at open (the cache does not outlive its process).
	Dir string
	// ChunkBytes is the size of a chunk: the unit of every GET and of eviction
	// (default 1 MiB).
	ChunkBytes int
	// MaxBytes bounds the chunks kept on disk (default 1 GiB). Chunks being fetched
	// are not counted until they are written.
	MaxBytes int64
	// Prefetch is how many chunks ahead a sequential reader of an object has fetched
	// in the background (default 1; -1 turns prefetch off).
	Prefetch int
	// Logger reports chunks that could not be written (the read still succeeds);
	// nil means slog.Default().
	Logger *slog.Logger
}

// CacheStats are a ChunkCache's counters, for the broker's metrics. Counters only
// grow; Bytes and Chunks are the current contents.
type CacheStats struct {
	// Hits and Misses count chunk lookups by reads (prefetches are not counted); a
	// read that waits for a fetch already under way (a prefetch, or another
	// reader's) counts as a hit.
	Hits, Misses int64
	// HitBytes counts bytes read served from disk; FetchedBytes counts bytes GET from
	// the store, prefetches included.
	HitBytes, FetchedBytes int64
	// Prefetches counts chunks fetched ahead of a sequential reader.
	Prefetches int64
	// Evictions counts chunks dropped to stay within MaxBytes.
	Evictions int64
	// WriteErrors counts chunks that could not be written to disk.
	WriteErrors int64
	// Bytes and Chunks are what the cache holds now.
	Bytes  int64
	Chunks int
}

var errNothingToKeep = errors.New("empty chunk")

// ErrCacheClosed is returned by reads of a closed ChunkCache.
var ErrCacheClosed = errors.New("remotelog: chunk cache closed")

// ChunkCache is a Source that keeps fixed-size chunks of objects in files on a local
// disk, least recently used out first, bounded in bytes. Uploaded objects are never
// modified (a new upload has a new key), so a chunk never needs invalidation. It
// fetches each missing chunk once however many readers want it, and fetches ahead of
// sequential readers. It is safe for concurrent use; Close stops the prefetches.
type ChunkCache struct {
	store  objstore.Store
	dir    string
	chunk  int64
	limit  int64
	ahead  int
	logger *slog.Logger

	// base ends the prefetches on Close.
	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	entries  map[chunkID]*list.Element // of *cacheEntry
	lru      list.List                 // front: most recently used
	size     int64
	inflight map[chunkID]*fetchCall
	// lastRead is the chunks the last read of each key spanned, to tell sequential
	// readers; bounded by maxTracked.
	lastRead map[string]chunkSpan
	// prefetching bounds the prefetches running at once.
	prefetching int

	hits, misses, hitBytes, fetchedBytes, prefetches, evictions, writeErrors atomic.Int64
}

type chunkSpan struct{ first, last int64 }

type chunkID struct {
	key   string
	index int64
}

type cacheEntry struct {
	id   chunkID
	path string
	size int64
}

type fetchCall struct {
	done chan struct{}
	data []byte
	err  error
}

const (
	chunkSuffix = ".chunk"
	tmpSuffix   = ".tmp"
	// maxTracked bounds lastRead: readers beyond it lose prefetch until it is reset.
	maxTracked = 4096
	// maxPrefetching bounds the background fetches.
	maxPrefetching = 4
	// maxParallelChunks bounds the chunks one read fetches at once.
	maxParallelChunks = 8
)

// NewChunkCache opens a cache of store's objects in cfg.Dir.
func NewChunkCache(store objstore.Store, cfg CacheConfig) (*ChunkCache, error) {
	if cfg.Dir == "" {
		return nil, errors.New("remotelog: chunk cache needs a directory")
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = 1 << 20
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 30
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("remotelog: chunk cache: %w", err)
	}
	names, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("remotelog: chunk cache: %w", err)
	}
	for _, e := range names {
		if n := e.Name(); strings.HasSuffix(n, chunkSuffix) || strings.HasSuffix(n, tmpSuffix) {
			if err := os.Remove(filepath.Join(cfg.Dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("remotelog: chunk cache: removing a chunk of an earlier run: %w", err)
			}
		}
	}
	base, cancel := context.WithCancel(context.Background())
	return &ChunkCache{
		store: store, dir: cfg.Dir, chunk: int64(cfg.ChunkBytes), limit: cfg.MaxBytes, ahead: max(cfg.Prefetch, 0),
		logger: cfg.Logger, base: base, cancel: cancel,
		entries: make(map[chunkID]*list.Element), inflight: make(map[chunkID]*fetchCall), lastRead: make(map[string]chunkSpan),
	}, nil
}

// Close stops the fetches and prefetches and waits for them; reads waiting for them
// fail with ErrCacheClosed.
// The chunk files stay until the next NewChunkCache on the directory.
func (c *ChunkCache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// Stats returns the counters.
func (c *ChunkCache) Stats() CacheStats {
	c.mu.Lock()
	bytes, chunks := c.size, c.lru.Len()
	c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), HitBytes: c.hitBytes.Load(), FetchedBytes: c.fetchedBytes.Load(),
		Prefetches: c.prefetches.Load(), Evictions: c.evictions.Load(), WriteErrors: c.writeErrors.Load(),
		Bytes: bytes, Chunks: chunks,
	}
}

// ReadAt implements Source.
func (c *ChunkCache) ReadAt(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("remotelog: chunk cache read of %s at %d for %d bytes", key, off, n)
	}
	out := make([]byte, 0, n)
	end := off + int64(n)
	first := off / c.chunk
	last := first
	// The missing chunks of the range are fetched at once, not one after the other.
	var started uint64 // bit i: this read started the fetch of chunk first+i
	if n > 0 {
		for i := int64(1); i < maxParallelChunks && first+i <= (end-1)/c.chunk; i++ {
			if c.startFetch(chunkID{key, first + i}) {
				started |= 1 << i
			}
		}
	}
	for pos := off; pos < end || (n == 0 && pos == off); {
		idx := pos / c.chunk
		last = idx
		within := pos - idx*c.chunk
		want := min(end-pos, c.chunk-within)
		counted := idx-first < 64 && started&(1<<(idx-first)) != 0
		b, full, err := c.readChunk(ctx, chunkID{key, idx}, within, want, counted)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
		pos += int64(len(b))
		if !full || n == 0 {
			break // the object ends in this chunk
		}
	}
	c.maybePrefetch(key, first, last)
	return out, nil
}

// readChunk returns up to n bytes at off within chunk id, from disk or the store, and
// whether the chunk is full (the object may go on after it).
// counted says that the caller started (and counted) the chunk's fetch.
func (c *ChunkCache) readChunk(ctx context.Context, id chunkID, off, n int64, counted bool) ([]byte, bool, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, false, ErrCacheClosed
		}
		if el, ok := c.entries[id]; ok {
			c.lru.MoveToFront(el)
			e := el.Value.(*cacheEntry)
			c.mu.Unlock()
			b, err := readFileRange(e.path, off, min(n, max(e.size-off, 0)))
			if err == nil {
				if !counted {
					c.hits.Add(1)
					c.hitBytes.Add(int64(len(b)))
				}
				return b, e.size == c.chunk, nil
			}
			// Evicted between the lookup and the open (or the disk failed): fetch.
			c.mu.Lock()
			if el2, ok := c.entries[id]; ok && el2 == el {
				c.removeLocked(el)
			}
			c.mu.Unlock()
			continue
		}
		call := c.inflight[id]
		if call == nil {
			call = c.startFetchLocked(id)
			c.misses.Add(1)
		} else if !counted {
			c.hits.Add(1)
		}
		counted = true
		c.mu.Unlock()
		select {
		case <-call.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if call.err != nil {
			if c.base.Err() != nil {
				return nil, false, ErrCacheClosed
			}
			return nil, false, call.err
		}
		d := call.data
		lo, hi := min(off, int64(len(d))), min(off+n, int64(len(d)))
		return append([]byte(nil), d[lo:hi]...), int64(len(d)) == c.chunk, nil
	}
}

// startFetch starts fetching chunk id, unless it is cached or under way already, and
// reports whether it did (counting a miss).
func (c *ChunkCache) startFetch(id chunkID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.inflight[id] != nil || c.entries[id] != nil {
		return false
	}
	c.startFetchLocked(id)
	c.misses.Add(1)
	return true
}

// startFetchLocked starts the fetch of chunk id. The fetch runs on its own, under the
// cache's context rather than a reader's: a reader whose fetch request times out (a
// consumer's fetch.max.wait) gives up waiting, but the chunk still arrives for the
// retry. The store's own request timeout bounds it.
func (c *ChunkCache) startFetchLocked(id chunkID) *fetchCall {
	call := &fetchCall{done: make(chan struct{})}
	c.inflight[id] = call
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.fetch(c.base, id, call)
	}()
	return call
}

// fetch GETs chunk id, keeps it on disk and completes call.
func (c *ChunkCache) fetch(ctx context.Context, id chunkID, call *fetchCall) {
	data, err := Direct(c.store).ReadAt(ctx, id.key, id.index*c.chunk, int(c.chunk))
	if err == nil {
		c.fetchedBytes.Add(int64(len(data)))
	}
	call.data, call.err = data, err
	var path string
	if err == nil && len(data) == 0 {
		// Past the object's end (a read or a prefetch beyond it): nothing to keep.
		err = errNothingToKeep
	} else if err == nil {
		path, err = c.writeChunk(id, data)
		if err != nil {
			c.writeErrors.Add(1)
			c.logger.Warn("remote log chunk cache: writing a chunk", "key", id.key, "chunk", id.index, "err", err)
		}
	}
	c.mu.Lock()
	delete(c.inflight, id)
	if call.err == nil && err == nil {
		if c.closed {
			os.Remove(path)
		} else {
			c.entries[id] = c.lru.PushFront(&cacheEntry{id: id, path: path, size: int64(len(data))})
			c.size += int64(len(data))
			for c.size > c.limit && c.lru.Len() > 1 {
				c.removeLocked(c.lru.Back())
				c.evictions.Add(1)
			}
		}
	}
	c.mu.Unlock()
	close(call.done)
}

func (c *ChunkCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.entries, e.id)
	c.size -= e.size
	if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.logger.Warn("remote log chunk cache: removing a chunk", "path", e.path, "err", err)
	}
}

// writeChunk writes data to the chunk's file, through a temporary file so that a
// reader never sees a partial chunk.
func (c *ChunkCache) writeChunk(id chunkID, data []byte) (string, error) {
	sum := sha256.Sum256([]byte(id.key))
	path := filepath.Join(c.dir, hex.EncodeToString(sum[:16])+"-"+strconv.FormatInt(id.index, 10)+chunkSuffix)
	f, err := os.CreateTemp(c.dir, "chunk-*"+tmpSuffix)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return path, nil
}

func readFileRange(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := f.ReadAt(b, off)
	if err == io.EOF && int64(m) == n {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// maybePrefetch fetches the chunks after last in the background when the reads of key
// move forward: this read began within the chunks of the previous one, or in the chunk
// after them.
func (c *ChunkCache) maybePrefetch(key string, first, last int64) {
	if c.ahead == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, seen := c.lastRead[key]
	if len(c.lastRead) >= maxTracked && !seen {
		clear(c.lastRead)
	}
	c.lastRead[key] = chunkSpan{first, last}
	if !seen || first < prev.first || first > prev.last+1 || c.closed {
		return
	}
	for i := last + 1; i <= last+int64(c.ahead) && c.prefetching < maxPrefetching; i++ {
		id := chunkID{key, i}
		if _, ok := c.entries[id]; ok {
			continue
		}
		if _, ok := c.inflight[id]; ok {
			continue
		}
		// The chunk before must be full, or the object has ended.
		if el, ok := c.entries[chunkID{key, i - 1}]; ok && el.Value.(*cacheEntry).size < c.chunk {
			return
		}
		call := &fetchCall{done: make(chan struct{})}
		c.inflight[id] = call
		c.prefetching++
		c.prefetches.Add(1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.fetch(c.base, id, call)
			c.mu.Lock()
			c.prefetching--
			c.mu.Unlock()
		}()
	}
}

var _ Source = (*ChunkCache)(nil)
