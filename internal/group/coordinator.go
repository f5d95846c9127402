package group

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/metadata"
)

// Coordinator coordinates the classic groups that hash to this broker.
type Coordinator struct {
	cfg   Config
	store metadata.Store
	lg    *slog.Logger

	mu       sync.Mutex
	groups   map[string]*group
	closed   bool
	timerSeq uint64

	rebalances atomic.Uint64 // generations formed, for metrics

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New starts a coordinator over store: it follows the store's images to drop the groups
// that move to another broker, and sweeps expired offsets every
// OffsetsRetentionCheckInterval. Close stops both.
func New(cfg Config, store metadata.Store) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:    cfg,
		store:  store,
		lg:     cfg.Logger.With("component", "group-coordinator"),
		groups: map[string]*group{},
		cancel: cancel,
	}
	c.wg.Add(2)
	go c.followImages(ctx)
	go c.retentionLoop(ctx)
	return c
}

// Close unloads every group (waiting JoinGroup and SyncGroup calls get NOT_COORDINATOR,
// so clients move on to the broker that takes over), stops every timer and waits for
// the background goroutines.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, g := range c.groups {
		c.unload(g, kerr.NotCoordinator)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// CoordinatorFor returns the broker that coordinates key (a group id, or a
// transactional id: both hash the same way) in the current image. It fails with
// COORDINATOR_NOT_AVAILABLE when no broker is live.
func (c *Coordinator) CoordinatorFor(key string) (metadata.Broker, error) {
	return coordinatorIn(c.store.Current(), key)
}

// coordinatorIn picks the coordinator by rendezvous hashing over the unfenced brokers:
// every broker computes the same choice from the same image, and when a broker dies only
// the keys it coordinated move.
func coordinatorIn(im *metadata.Image, key string) (metadata.Broker, error) {
	var best metadata.Broker
	var bestScore uint64
	found := false
	for id, b := range im.Brokers {
		if b.Fenced {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(key))
		var idb [4]byte
		binary.BigEndian.PutUint32(idb[:], uint32(id))
		h.Write(idb[:])
		score := h.Sum64()
		if !found || score > bestScore || (score == bestScore && id < best.ID) {
			best, bestScore, found = b, score, true
		}
	}
	if !found {
		return metadata.Broker{}, kerr.CoordinatorNotAvailable
	}
	return best, nil
}

// owns reports why this broker may not act for group, nil when it may.
func (c *Coordinator) owns(group string) error {
	if c.closed {
		return kerr.NotCoordinator
	}
	b, err := c.CoordinatorFor(group)
	if err != nil {
		return err
	}
	if b.ID != c.cfg.NodeID || !c.store.LeaseValid() {
		return kerr.NotCoordinator
	}
	return nil
}

// followImages unloads the groups another broker now coordinates: their members must
// rejoin there, and they find it through FindCoordinator after a NOT_COORDINATOR.
func (c *Coordinator) followImages(ctx context.Context) {
	defer c.wg.Done()
	for im := range c.store.Watch(ctx) {
		c.mu.Lock()
		for _, g := range c.groups {
			if b, err := coordinatorIn(im, g.id); err != nil || b.ID != c.cfg.NodeID {
				c.lg.Info("group moved to another coordinator", "group", g.id)
				c.unload(g, kerr.NotCoordinator)
			}
		}
		c.mu.Unlock()
	}
}

// unload drops a group from memory, answering every waiting call with err. Its
// committed offsets stay in the store.
func (c *Coordinator) unload(g *group, err error) {
	for _, m := range g.members {
		if m.join != nil {
			m.join.complete(JoinResult{Err: err, MemberID: m.id, Generation: -1})
			m.join = nil
		}
		if m.sync != nil {
			m.sync.complete(SyncResult{Err: err})
			m.sync = nil
		}
		m.expiry.stop()
	}
	for _, t := range g.pending {
		t.stop()
	}
	g.joinTimer.stop()
	g.syncTimer.stop()
	g.transition(Dead, c.cfg.Now())
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
}

// newMemberID is Kafka's form: the client id (or group instance id) and a UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// storeError maps a metadata store failure to the code Kafka's coordinator would send
// for a failed offsets-topic write: retriable COORDINATOR_NOT_AVAILABLE for timeouts and
// an unavailable quorum, NOT_COORDINATOR when this broker lost its standing.
func storeError(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotController, kerr.RequestTimedOut, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.UnknownTopicOrPartition:
			return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
		case kerr.NotLeaderForPartition, kerr.StaleBrokerEpoch:
			return fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return fmt.Errorf("%w: %v", kerr.InvalidCommitOffsetSize, err)
		}
		return err
	}
	return fmt.Errorf("%w: metadata store: %v", kerr.CoordinatorNotAvailable, err)
}
