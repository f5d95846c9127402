package protocol

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/replication"
)

// Fetch sessions (KIP-227). A consumer or follower that fetches many partitions sends
// them all once (a full fetch, epoch 0) and the broker remembers them under a session
// id; later fetches (epoch 1, 2, ...) name only the partitions whose fetch position
// changed, and the broker answers only the partitions that have something new: records,
// a moved high watermark or log start offset, or an error. Epoch -1 asks for a full fetch
// without a session, which is what clients that keep no session state send.

const (
	// defaultFetchSessionSlots is max.incremental.fetch.session.cache.slots' default.
	defaultFetchSessionSlots = 1000
	// fetchSessionEvictionAge is Kafka's fixed minimum age (2 minutes) before a session
	// may be evicted by any new one; younger sessions give way only to a privileged
	// (follower) session, or to one with more partitions.
	fetchSessionEvictionAge = 2 * time.Minute

	sessionEpochInitial int32 = 0
	sessionEpochFinal   int32 = -1
)

// nextSessionEpoch follows Kafka's FetchMetadata.nextEpoch: epochs wrap to 1, never to
// the initial or final epoch.
func nextSessionEpoch(e int32) int32 {
	switch {
	case e < 0:
		return sessionEpochFinal
	case e == math.MaxInt32:
		return 1
	}
	return e + 1
}

// fetchKey names a partition in a session: by topic id on Fetch v13+, by name before.
type fetchKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// fetchItem is one partition to read, with what the fetcher last asked for it: part is
// the request's partition as the replica manager reads it
// (replication.FetchRequestPartition), its MaxBytes the partition's own limit.
type fetchItem struct {
	key  fetchKey
	part replication.FetchPartition
}

// cachedPartition is a session's memory of one partition: the request parameters and
// what the last response told the fetcher.
type cachedPartition struct {
	item           fetchItem
	highWatermark  int64
	logStartOffset int64
	// lastStableOffset is sent like the high watermark: a read_committed consumer
	// waits for it to move.
	lastStableOffset int64
}

type fetchSession struct {
	id         int32
	privileged bool // a follower's session
	usesIDs    bool // created by Fetch v13+, keyed by topic id
	created    time.Time

	// mu guards what follows; the cache's lock is taken before it, never after.
	mu       sync.Mutex
	epoch    int32 // the epoch the next request must carry
	lastUsed time.Time
	parts    []*cachedPartition // response order: partitions that sent data move to the end
	index    map[fetchKey]*cachedPartition
}

// fetchSessionCache is Kafka's FetchSessionCache: at most slots sessions, with Kafka's
// eviction rules when it is full.
type fetchSessionCache struct {
	slots int
	mu    sync.Mutex
	byID  map[int32]*fetchSession
	now   func() time.Time
}

func newFetchSessionCache(slots int) *fetchSessionCache {
	return &fetchSessionCache{slots: slots, byID: map[int32]*fetchSession{}, now: time.Now}
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}

// len is the number of sessions cached.
func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

// create caches a new session holding parts, evicting another when the cache is full
// and one may go; it returns nil when there is no room (the fetcher then keeps sending
// full fetches).
func (c *fetchSessionCache) create(privileged, usesIDs bool, parts []*cachedPartition) *fetchSession {
	if c.slots <= 0 {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.slots && !c.evictLocked(privileged, len(parts), now) {
		return nil
	}
	var id int32
	for id == 0 || c.byID[id] != nil {
		id = rand.Int32N(math.MaxInt32-1) + 1
	}
	s := &fetchSession{id: id, privileged: privileged, usesIDs: usesIDs, created: now, lastUsed: now,
		epoch: nextSessionEpoch(sessionEpochInitial), parts: parts, index: make(map[fetchKey]*cachedPartition, len(parts))}
	for _, cp := range parts {
		s.index[cp.item.key] = cp
	}
	c.byID[id] = s
	return s
}

// evictLocked makes room for a new session as Kafka does: the least recently used
// session goes if it has been idle longer than the eviction age; otherwise the least
// valuable evictable session goes if the new one is worth at least as much. Sessions
// older than the eviction age are evictable by anyone; a privileged newcomer may also
// evict any unprivileged session. Value orders by privilege, then partition count.
func (c *fetchSessionCache) evictLocked(privileged bool, size int, now time.Time) bool {
	var lru *fetchSession
	var lruUsed time.Time
	type value struct {
		privileged bool
		size       int
	}
	less := func(a, b value) bool {
		if a.privileged != b.privileged {
			return !a.privileged
		}
		return a.size < b.size
	}
	var victim *fetchSession
	var victimValue value
	for _, s := range c.byID {
		s.mu.Lock()
		used, n := s.lastUsed, len(s.parts)
		s.mu.Unlock()
		if lru == nil || used.Before(lruUsed) {
			lru, lruUsed = s, used
		}
		old := now.Sub(s.created) > fetchSessionEvictionAge
		if !old && !(privileged && !s.privileged) {
			continue
		}
		v := value{s.privileged, n}
		if victim == nil || less(v, victimValue) {
			victim, victimValue = s, v
		}
	}
	if lru != nil && now.Sub(lruUsed) > fetchSessionEvictionAge {
		delete(c.byID, lru.id)
		return true
	}
	if victim == nil || less(value{privileged, size}, victimValue) {
		return false
	}
	delete(c.byID, victim.id)
	return true
}

// fetchContextKind says how a fetch relates to sessions.
type fetchContextKind int

const (
	// sessionless: a full fetch that wants no session (epoch -1), or Fetch v0-v6.
	sessionless fetchContextKind = iota
	// fullFetch: a full fetch that asks for a new session (epoch 0).
	fullFetch
	// incremental: a fetch on an existing session.
	incremental
)

// fetchContext is what one fetch reads and how its answer is shaped.
type fetchContext struct {
	kind    fetchContextKind
	items   []fetchItem
	session *fetchSession // incremental only
	usesIDs bool
	// errCode is a session error, answered at the top level with no partitions.
	errCode int16
}

// newFetchContext resolves a request against the session cache, as Kafka's
// FetchManager.newContext does.
func (s *Server) newFetchContext(req *kmsg.FetchRequest, version int16, privileged bool) *fetchContext {
	usesIDs := version >= 13
	fc := &fetchContext{usesIDs: usesIDs}
	if version < 7 {
		fc.items = requestItems(req, usesIDs)
		return fc
	}
	if req.SessionEpoch == sessionEpochInitial || req.SessionEpoch == sessionEpochFinal {
		if req.SessionID != 0 {
			// A full fetch closes any session it names (kafka-go sends id -1 here).
			s.sessions.remove(req.SessionID)
		}
		fc.items = requestItems(req, usesIDs)
		if req.SessionEpoch == sessionEpochInitial {
			fc.kind = fullFetch
		}
		return fc
	}
	sess := s.sessions.get(req.SessionID)
	if sess == nil {
		fc.errCode = kerr.FetchSessionIDNotFound.Code
		return fc
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	switch {
	case sess.epoch != req.SessionEpoch:
		fc.errCode = kerr.InvalidFetchSessionEpoch.Code
		return fc
	case sess.usesIDs != usesIDs:
		fc.errCode = kerr.FetchSessionTopicIDError.Code
		return fc
	}
	for _, it := range requestItems(req, usesIDs) {
		if cp := sess.index[it.key]; cp != nil {
			cp.item = it
		} else {
			cp = &cachedPartition{item: it, highWatermark: -1, logStartOffset: -1}
			sess.parts = append(sess.parts, cp)
			sess.index[it.key] = cp
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := fetchKey{partition: p}
			if usesIDs {
				k.topicID = ft.TopicID
			} else {
				k.topic = ft.Topic
			}
			if cp := sess.index[k]; cp != nil {
				delete(sess.index, k)
				for i, x := range sess.parts {
					if x == cp {
						sess.parts = append(sess.parts[:i], sess.parts[i+1:]...)
						break
					}
				}
			}
		}
	}
	if len(sess.parts) == 0 {
		// Everything forgotten: the session ends and the fetch is answered without one.
		s.sessions.remove(sess.id)
		fc.items = requestItems(req, usesIDs)
		return fc
	}
	sess.epoch = nextSessionEpoch(sess.epoch)
	sess.lastUsed = s.sessions.now()
	fc.kind, fc.session = incremental, sess
	fc.items = make([]fetchItem, len(sess.parts))
	for i, cp := range sess.parts {
		fc.items[i] = cp.item
	}
	return fc
}

// requestItems lists the partitions a request names, in request order.
func requestItems(req *kmsg.FetchRequest, usesIDs bool) []fetchItem {
	var out []fetchItem
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := fetchKey{partition: p.Partition}
			if usesIDs {
				k.topicID = t.TopicID
			} else {
				k.topic = t.Topic
			}
			out = append(out, fetchItem{key: k, part: replication.FetchRequestPartition(&p)})
		}
	}
	return out
}

// finishFetchContext decides, for the final answer, which partitions it carries and sets the
// response's session id, updating the session with what the fetcher is told. keep[i]
// says whether reads[i] goes into the response.
func (s *Server) finishFetchContext(fc *fetchContext, reads []fetchRead, privileged bool) (sessionID int32, keep []bool) {
	keep = make([]bool, len(reads))
	switch fc.kind {
	case sessionless:
		for i := range keep {
			keep[i] = true
		}
		return 0, keep
	case fullFetch:
		parts := make([]*cachedPartition, len(reads))
		for i := range reads {
			keep[i] = true
			parts[i] = &cachedPartition{item: fc.items[i], highWatermark: reads[i].rp.HighWatermark, logStartOffset: reads[i].rp.LogStartOffset,
				lastStableOffset: reads[i].rp.LastStableOffset}
			if reads[i].rp.ErrorCode != 0 {
				parts[i].highWatermark = -1
			}
		}
		if sess := s.sessions.create(privileged, fc.usesIDs, parts); sess != nil {
			return sess.id, keep
		}
		return 0, keep
	}
	sess := fc.session
	sess.mu.Lock()
	defer sess.mu.Unlock()
	var moved []*cachedPartition
	for i, r := range reads {
		cp := sess.index[fc.items[i].key]
		if cp == nil {
			// Forgotten by a later request on the session; answer it anyway.
			keep[i] = true
			continue
		}
		rp := &r.rp
		must := r.size() > 0 || rp.ErrorCode != 0 || rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 ||
			rp.PreferredReadReplica >= 0 || cp.highWatermark != rp.HighWatermark || cp.logStartOffset != rp.LogStartOffset ||
			cp.lastStableOffset != rp.LastStableOffset
		cp.highWatermark, cp.logStartOffset, cp.lastStableOffset = rp.HighWatermark, rp.LogStartOffset, rp.LastStableOffset
		if rp.ErrorCode != 0 {
			// Resent once the error is gone.
			cp.highWatermark = -1
		}
		keep[i] = must
		if r.size() > 0 {
			moved = append(moved, cp)
		}
	}
	if len(moved) > 0 {
		// Partitions that just sent data go last, so that under fetch.max.bytes the
		// others get their turn in the next response.
		isMoved := make(map[*cachedPartition]bool, len(moved))
		for _, cp := range moved {
			isMoved[cp] = true
		}
		n := 0
		for _, cp := range sess.parts {
			if !isMoved[cp] {
				sess.parts[n] = cp
				n++
			}
		}
		copy(sess.parts[n:], moved)
	}
	sess.lastUsed = s.sessions.now()
	return sess.id, keep
}

// FetchSessions is the number of fetch sessions cached (Kafka's
// NumIncrementalFetchSessions).
func (s *Server) FetchSessions() int { return s.sessions.len() }
