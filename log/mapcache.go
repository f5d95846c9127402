package log

import (
	"sync"
	"sync/atomic"
)

// DefaultMaxMappedSegments is the default of log.mapped.segments.max. A mapped sealed
// segment costs three mappings (its .log, .index and .timeindex) against Linux's
// vm.max_map_count (65530 by default), so 8192 of them take 24576, leaving room for the
// active segments (three mappings each, one per partition) of some 13,000 partitions.
const DefaultMaxMappedSegments = 8192

// MapCache bounds how many sealed segments are mapped at once, across every log that
// shares it. A sealed segment is mapped on first use and joins the cache; when the cache
// holds more than its limit, the least recently used segments that no reader holds are
// unmapped (a clock sweep: a use sets a bit, the sweep clears it and unmaps a segment
// whose bit is already clear). A reader holds a segment's mapping from the moment it
// loads it to the moment it releases it (a View until Release), so nothing is unmapped
// under it; while readers hold more segments than the limit, the cache stays over it
// until they let go. Active segments are not counted: every log has one, always mapped.
type MapCache struct {
	max int

	mu   sync.Mutex
	ring []*segment // mapped sealed segments; segment.slot is the index, -1 outside
	hand int
	// n is len(ring), for a lock-free check when a reader lets go of a segment.
	n atomic.Int64
}

// NewMapCache returns a cache that keeps at most limit sealed segments mapped (at least 1).
func NewMapCache(limit int) *MapCache { return &MapCache{max: max(limit, 1)} }

// defaultMaps serves logs opened without a MapCache of their own.
var defaultMaps = NewMapCache(DefaultMaxMappedSegments)

// Mapped is how many sealed segments are mapped now.
func (c *MapCache) Mapped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring)
}

// Max is the limit.
func (c *MapCache) Max() int { return c.max }

// add counts a segment that was just mapped, then unmaps idle ones over the limit.
func (c *MapCache) add(s *segment) {
	c.mu.Lock()
	if s.slot < 0 {
		s.slot = len(c.ring)
		c.ring = append(c.ring, s)
		c.n.Store(int64(len(c.ring)))
	}
	over := len(c.ring) > c.max
	c.mu.Unlock()
	if over {
		c.shrink()
	}
}

// over reports whether more segments are mapped than the limit: readers held them.
func (c *MapCache) over() bool { return c.n.Load() > int64(c.max) }

// remove forgets a segment that was unmapped (or is being destroyed).
func (c *MapCache) remove(s *segment) {
	c.mu.Lock()
	c.removeLocked(s)
	c.mu.Unlock()
}

func (c *MapCache) removeLocked(s *segment) {
	i := s.slot
	if i < 0 {
		return
	}
	last := len(c.ring) - 1
	c.ring[i] = c.ring[last]
	c.ring[i].slot = i
	c.ring[last] = nil
	c.ring = c.ring[:last]
	c.n.Store(int64(last))
	s.slot = -1
	if c.hand > last {
		c.hand = 0
	}
}

// shrink unmaps idle segments until the cache is within its limit, or until as many
// segments as it holds were found held by readers (it is then over the limit until they
// let go; the next load tries again).
func (c *MapCache) shrink() {
	c.mu.Lock()
	budget := len(c.ring)
	c.mu.Unlock()
	for budget > 0 {
		c.mu.Lock()
		if len(c.ring) <= c.max {
			c.mu.Unlock()
			return
		}
		// Clock sweep: a used segment gets a second chance; after one turn every bit
		// is clear, so this finds a victim within two.
		var victim *segment
		for victim == nil {
			if c.hand >= len(c.ring) {
				c.hand = 0
			}
			s := c.ring[c.hand]
			if s.used.Swap(false) {
				c.hand++
				continue
			}
			victim = s
			c.removeLocked(s)
		}
		c.mu.Unlock()
		if victim.unmapIdle() {
			continue
		}
		// A reader holds it: count it again, marked used so the sweep passes it over.
		budget--
		victim.used.Store(true)
		c.mu.Lock()
		// A segment destroyed meanwhile is not loaded: its release already ran.
		if victim.loaded.Load() && victim.slot < 0 {
			victim.slot = len(c.ring)
			c.ring = append(c.ring, victim)
			c.n.Store(int64(len(c.ring)))
		}
		c.mu.Unlock()
	}
}
