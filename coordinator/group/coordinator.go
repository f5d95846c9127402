package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// ShareGroups is what the classic coordinator asks of the share-group coordinator
// (coordinator/share): group ids are one namespace, so a classic group may not take an
// id a share group has.
type ShareGroups interface {
	// IsGroup reports whether id is a share group on this broker. The classic
	// coordinator calls it holding its lock; it must not wait for anything that may
	// wait for that lock.
	IsGroup(id string) bool
}

// Coordinator coordinates the classic groups that hash to this broker.
type Coordinator struct {
	cfg   Config
	store metadata.Store
	lg    *slog.Logger

	mu     sync.Mutex
	groups map[string]*group
	shares ShareGroups // nil without share groups
	closed bool
	timers *timer.Set

	rebalances atomic.Uint64 // generations formed, for metrics

	cancel context.CancelFunc
	// bg is cancelled by Close; background store writes (a downgraded group's removal)
	// run under it and are waited for in wg.
	bg context.Context
	wg sync.WaitGroup
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
		bg:     ctx,
	}
	c.timers = timer.NewSet(cfg.Clock, &c.mu)
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
	c.timers.Close()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.timers.Wait()
	return nil
}

// CoordinatorFor returns the broker that coordinates key (a group id, or a
// transactional id: both hash the same way) in the current image. It fails with
// COORDINATOR_NOT_AVAILABLE when no broker is live.
func (c *Coordinator) CoordinatorFor(key string) (metadata.Broker, error) {
	return c.store.Current().CoordinatorBroker(key)
}

// standing returns the coordinator epoch under which this broker may act for group, or
// why it may not. The controller chooses the coordinator (rendezvous hashing over the
// eligible brokers, so a broker's death moves only its own partitions) and commits the
// choice, so that brokers never decide it from caches that may differ; whether this
// broker holds it is metadata.Image.MayCoordinate's decision.
func (c *Coordinator) standing(group string) (int32, error) {
	if c.closed {
		return 0, kerr.NotCoordinator
	}
	st, err := metadata.StandingNow(c.store, c.cfg.NodeID, group)
	return st.Epoch, err
}

// owns reports why this broker may not act for group, nil when it may. A group loaded
// under an earlier coordinator epoch is unloaded first: another broker may have
// coordinated it meanwhile, so its members and generation are no longer the group's.
// Callers hold c.mu.
func (c *Coordinator) owns(group string) error {
	epoch, err := c.standing(group)
	if err != nil {
		return err
	}
	if g := c.groups[group]; g != nil && g.coordEpoch != epoch {
		c.lg.Info("group loaded under an earlier coordinator epoch; unloading it", "group", group,
			"loaded_epoch", g.coordEpoch, "epoch", epoch)
		c.unload(g, kerr.NotCoordinator)
	}
	return nil
}

// SetShareGroups wires the share-group coordinator in, before the coordinator serves
// requests.
func (c *Coordinator) SetShareGroups(s ShareGroups) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shares = s
}

// isShareGroup reports whether id is a share group; callers hold c.mu and have checked
// owns. Classic group APIs use it to keep the two kinds of group apart.
func (c *Coordinator) isShareGroup(id string) bool {
	return c.shares != nil && c.shares.IsGroup(id)
}

// HasGroup reports whether id is a live classic group here, for the share-group
// coordinator (a group loaded under an earlier coordinator epoch is unloaded first, as
// for any use of it).
func (c *Coordinator) HasGroup(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.owns(id) // unloads a stale group; not owning id leaves the map as it is
	g := c.groups[id]
	return g != nil && g.state != Dead
}

// newGroup creates an empty group in memory under the current coordinator epoch; callers
// hold c.mu and have checked owns.
func (c *Coordinator) newGroup(id string) *group {
	g := newGroupState(id, c.cfg.Now())
	g.coordEpoch, _ = c.standing(id)
	c.groups[id] = g
	return g
}

// fence is what the group's offset writes carry: the controller refuses them once another
// broker, or another coordinator epoch, holds the group.
func (c *Coordinator) fence(g *group) metadata.GroupFence {
	return metadata.GroupFence{Broker: c.cfg.NodeID, Epoch: g.coordEpoch}
}

// fenced unloads a group whose write the controller refused with NOT_COORDINATOR: this
// broker's view of it is stale, and its members must find the current coordinator.
func (c *Coordinator) fenced(g *group, err error) {
	if !errors.Is(err, kerr.NotCoordinator) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g && g.state != Dead {
		c.lg.Info("controller refused a write from a stale coordinator; unloading the group", "group", g.id, "err", err)
		c.unload(g, kerr.NotCoordinator)
	}
}

// followImages unloads the groups another broker now coordinates: their members must
// rejoin there, and they find it through FindCoordinator after a NOT_COORDINATOR.
func (c *Coordinator) followImages(ctx context.Context) {
	defer c.wg.Done()
	for im := range c.store.Watch(ctx) {
		c.mu.Lock()
		for _, g := range c.groups {
			if st, err := im.MayCoordinate(c.cfg.NodeID, c.store.BrokerEpoch(), g.id); err != nil || st.Epoch != g.coordEpoch {
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
		m.expiry.Stop()
	}
	for _, t := range g.pending {
		t.Stop()
	}
	g.joinTimer.Stop()
	g.syncTimer.Stop()
	if g.cg != nil {
		g.cg.stopTimers()
	}
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

// storeError maps a metadata store failure to the code Kafka's coordinator would send.
func storeError(err error) error { return metadata.CoordinatorStoreError(err) }
