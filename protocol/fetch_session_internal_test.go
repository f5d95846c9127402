package protocol

import (
	"testing"
	"time"
)

func sessionParts(n int) []*cachedPartition {
	out := make([]*cachedPartition, n)
	for i := range out {
		out[i] = &cachedPartition{item: fetchItem{key: fetchKey{topic: "t", partition: int32(i)}}}
	}
	return out
}

// The cache holds max.incremental.fetch.session.cache.slots sessions and evicts as
// Kafka does when full.
func TestFetchSessionCacheEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newFetchSessionCache(2)
	c.now = func() time.Time { return now }

	a := c.create(false, false, sessionParts(3))
	b := c.create(false, false, sessionParts(5))
	if a == nil || b == nil || a.id == b.id || a.id == 0 || b.id == 0 {
		t.Fatalf("sessions %v %v", a, b)
	}
	if a.epoch != 1 {
		t.Fatalf("a new session's next epoch is %d, want 1", a.epoch)
	}
	// Full, and both are young: an unprivileged newcomer gets no session.
	if s := c.create(false, false, sessionParts(10)); s != nil {
		t.Fatal("a young session was evicted by an unprivileged one")
	}
	// A follower may evict the smallest unprivileged session.
	f := c.create(true, false, sessionParts(1))
	if f == nil || c.get(a.id) != nil || c.get(b.id) == nil {
		t.Fatalf("follower session %v; a cached %v, b cached %v", f, c.get(a.id) != nil, c.get(b.id) != nil)
	}
	// Past the eviction age the least recently used session goes, whoever asks.
	now = now.Add(fetchSessionEvictionAge + time.Second)
	f.mu.Lock()
	f.lastUsed = now
	f.mu.Unlock()
	if s := c.create(false, false, sessionParts(1)); s == nil || c.get(b.id) != nil || c.get(f.id) == nil {
		t.Fatalf("stale session not evicted: new %v, b cached %v", s, c.get(b.id) != nil)
	}
	if c.len() != 2 {
		t.Fatalf("%d sessions cached, want 2", c.len())
	}
	// No slots: no sessions at all.
	if s := newFetchSessionCache(-1).create(true, false, sessionParts(1)); s != nil {
		t.Fatal("session created with no slots")
	}
}

func TestNextSessionEpoch(t *testing.T) {
	for in, want := range map[int32]int32{0: 1, 1: 2, -1: -1, 1<<31 - 1: 1} {
		if got := nextSessionEpoch(in); got != want {
			t.Errorf("nextSessionEpoch(%d) = %d, want %d", in, got, want)
		}
	}
}
