package protocol

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication/share"
)

// Share sessions (KIP-932) are the share-group counterpart of fetch sessions: per
// (group, member) on this broker, the partitions the member fetches, and the epoch its
// next request must carry. Epoch 0 opens (or replaces) a session, -1 closes it, and each
// request in between carries the epoch the previous answer moved it to; anything else is
// INVALID_SHARE_SESSION_EPOCH, and a request for a session this broker does not hold is
// SHARE_SESSION_NOT_FOUND.

// maxShareSessions bounds the cache, as Kafka's group.share.max.share.sessions (2000).
const maxShareSessions = 2000

// defaultShareMaxRecords is what a ShareFetch without MaxRecords (v0) acquires at most.
const defaultShareMaxRecords = 500

type shareSessionKey struct {
	group, member string
}

type sharePartKey struct {
	topicID   [16]byte
	partition int32
}

type shareSession struct {
	epoch int32 // what the next request must carry
	parts map[sharePartKey]struct{}
	// owner is the connection that opened the session: as in Kafka, the session ends,
	// and its member's records are released, when that connection closes.
	owner *conn
}

type shareSessionCache struct {
	mu       sync.Mutex
	sessions map[shareSessionKey]*shareSession
}

func newShareSessionCache() *shareSessionCache {
	return &shareSessionCache{sessions: map[shareSessionKey]*shareSession{}}
}

func nextShareEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// open replaces the member's session with one holding parts, at epoch 1 next.
func (c *shareSessionCache) open(key shareSessionKey, parts []sharePartKey, owner *conn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, key)
	if len(c.sessions) >= maxShareSessions {
		return kerr.ShareSessionLimitReached
	}
	s := &shareSession{epoch: 1, parts: map[sharePartKey]struct{}{}, owner: owner}
	for _, p := range parts {
		s.parts[p] = struct{}{}
	}
	c.sessions[key] = s
	return nil
}

// advance checks an incremental request's epoch, applies its additions and removals,
// and returns the session's partitions.
func (c *shareSessionCache) advance(key shareSessionKey, epoch int32, add, forget []sharePartKey) ([]sharePartKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[key]
	if s == nil {
		return nil, kerr.ShareSessionNotFound
	}
	if s.epoch != epoch {
		return nil, kerr.InvalidShareSessionEpoch
	}
	s.epoch = nextShareEpoch(epoch)
	for _, p := range add {
		s.parts[p] = struct{}{}
	}
	for _, p := range forget {
		delete(s.parts, p)
	}
	return sortedSharePartKeys(s.parts), nil
}

// close removes the session and returns its partitions.
func (c *shareSessionCache) close(key shareSessionKey) ([]sharePartKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[key]
	if s == nil {
		return nil, kerr.ShareSessionNotFound
	}
	delete(c.sessions, key)
	return sortedSharePartKeys(s.parts), nil
}

func sortedSharePartKeys(m map[sharePartKey]struct{}) []sharePartKey {
	out := make([]sharePartKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topicID != out[j].topicID {
			return string(out[i].topicID[:]) < string(out[j].topicID[:])
		}
		return out[i].partition < out[j].partition
	})
	return out
}

// validShareMember is Kafka's check of a share member id: set, and at most 36
// characters (a UUID).
func validShareMember(id *string) bool {
	return id != nil && *id != "" && len(*id) <= 36
}

// shareRequester checks who a ShareFetch or ShareAcknowledge comes from: the principal
// may read the group, and the group and member id are well formed. It returns the
// group and member, or the error code that answers the whole request.
func (s *Server) shareRequester(r *Request, groupID, memberID *string) (group, member string, err *kerr.Error) {
	if groupID != nil {
		group = *groupID
	}
	if !s.allowed(r, opRead, resGroup, group) {
		return "", "", errGroupDenied
	}
	if group == "" || !validShareMember(memberID) {
		return "", "", kerr.InvalidRequest
	}
	return group, *memberID, nil
}

// shareKeys resolves session partitions to share-partition keys, skipping unknown ids.
func shareKeys(im *metadata.Image, group string, parts []sharePartKey) []share.Key {
	var out []share.Key
	for _, p := range parts {
		if t := topicByID(im, p.topicID); t != nil {
			out = append(out, share.Key{Group: group, Topic: t.Name, Partition: p.partition})
		}
	}
	return out
}

// ackPart is one partition's acknowledgements in a request.
type ackPart struct {
	key     sharePartKey
	batches []share.AckBatch
	code    int16
	leader  *metadata.Partition // set on NOT_LEADER_OR_FOLLOWER
}

// acknowledge applies every partition's acknowledgements, concurrently (each waits for
// its commit, and the manager commits them together), filling each part's code.
func (s *Server) acknowledge(ctx context.Context, r *Request, group, member string, parts []*ackPart, allowRenew bool) {
	im := s.image()
	var wg sync.WaitGroup
	for _, ap := range parts {
		t := topicByID(im, ap.key.topicID)
		switch {
		case t == nil:
			ap.code = kerr.UnknownTopicID.Code
			continue
		case !s.allowed(r, opRead, resTopic, t.Name):
			ap.code = errTopicDenied.Code
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.deps.Shares.Acknowledge(ctx, share.Key{Group: group, Topic: t.Name, Partition: ap.key.partition}, member, ap.batches, allowRenew)
			ap.code = shareErrorCode(err)
			if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch) {
				ap.leader = im.Partition(t.Name, ap.key.partition)
			}
		}()
	}
	wg.Wait()
}

// shareErrorCode maps a share-partition error to its Kafka code.
func shareErrorCode(err error) int16 {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return errorCode(err)
}

func ackBatchesOf[T any](batches []T, get func(*T) (int64, int64, []int8)) []share.AckBatch {
	out := make([]share.AckBatch, len(batches))
	for i := range batches {
		first, last, types := get(&batches[i])
		ts := make([]share.AckType, len(types))
		for j, t := range types {
			ts[j] = share.AckType(t)
		}
		out[i] = share.AckBatch{First: first, Last: last, Types: ts}
	}
	return out
}

// ownedBy removes and returns the sessions a closed connection opened.
func (c *shareSessionCache) ownedBy(owner *conn) map[shareSessionKey][]sharePartKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[shareSessionKey][]sharePartKey
	for k, s := range c.sessions {
		if s.owner == owner {
			if out == nil {
				out = map[shareSessionKey][]sharePartKey{}
			}
			out[k] = sortedSharePartKeys(s.parts)
			delete(c.sessions, k)
		}
	}
	return out
}

// shareReleaseTimeout bounds the commit of a closed connection's releases.
const shareReleaseTimeout = 10 * time.Second

// closeShareSessions ends the share sessions a closed connection opened, releasing
// what their members hold, as Kafka does when a share session's connection drops:
// a crashed consumer's records come back at once rather than when their locks expire.
func (s *Server) closeShareSessions(c *conn) {
	if s.deps.Shares == nil {
		return
	}
	owned := s.shareSessions.ownedBy(c)
	if len(owned) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareReleaseTimeout)
	defer cancel()
	im := s.image()
	for k, parts := range owned {
		s.deps.Shares.ReleaseMember(ctx, shareKeys(im, k.group, parts), k.member)
	}
}
