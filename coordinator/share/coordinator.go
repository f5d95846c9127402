package share

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// Classic is what the share-group coordinator asks of the classic group coordinator:
// group ids are one namespace, so a share group may not take an id a classic group has.
type Classic interface {
	// HasGroup reports whether id is a live classic group on this broker. The share
	// coordinator calls it holding its own lock, so the classic coordinator must never
	// wait for that lock while holding its own (it calls IsGroup, which does not).
	HasGroup(id string) bool
}

// Config configures a Coordinator. Zero values take Kafka's defaults.
type Config struct {
	// NodeID is this broker's node.id: the coordinator serves the groups that hash to it.
	NodeID int32
	// SessionTimeout is group.share.session.timeout.ms (default 45s): a member not heard
	// from for this long leaves the group.
	SessionTimeout time.Duration
	// HeartbeatInterval is group.share.heartbeat.interval.ms (default 5s), what
	// ShareGroupHeartbeat responses tell members.
	HeartbeatInterval time.Duration
	// MaxGroupSize is group.share.max.size (default 200).
	MaxGroupSize int
	// States, when set, is the share-partition state the share-partition leaders persist
	// through the controller: share-group describe, offsets and deletion read and write
	// it. Without it share groups have no persisted state to show.
	States States
	// MemberRemoved, when set, is called (under the coordinator's lock, so it must not
	// block) when a member leaves or its session expires, so that records it holds on
	// this broker can be released before their locks time out.
	MemberRemoved func(group, memberID string)
	// Classic is the classic group coordinator of this broker; nil when there is none.
	Classic Classic
	Logger  *slog.Logger
	// Clock runs the session timers; nil is the wall clock.
	Clock timer.Clock
}

func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.MaxGroupSize <= 0 {
		c.MaxGroupSize = 200
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Coordinator coordinates the share groups that hash to this broker.
type Coordinator struct {
	cfg     Config
	store   metadata.Store
	lg      *slog.Logger
	classic Classic

	mu     sync.Mutex
	shares map[string]*shareGroup
	closed bool
	timers *timer.Set

	// ids holds the ids of the share groups in shares, with the coordinator epoch they
	// were loaded under, and the ids a heartbeat is about to create a group for. It has
	// its own lock, taken last, so that the classic coordinator can ask IsGroup while
	// holding its lock.
	idsMu sync.Mutex
	ids   map[string]int32

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New starts a coordinator over store: it follows the store's images to drop the groups
// that move to another broker. Close stops it.
func New(cfg Config, store metadata.Store) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:     cfg,
		store:   store,
		lg:      cfg.Logger.With("component", "share-group-coordinator"),
		classic: cfg.Classic,
		shares:  map[string]*shareGroup{},
		ids:     map[string]int32{},
		cancel:  cancel,
	}
	c.timers = timer.NewSet(cfg.Clock, &c.mu)
	c.wg.Add(1)
	go c.followImages(ctx)
	return c
}

// Close unloads every group, stops every timer and waits for the background goroutine.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, sg := range c.shares {
		c.unloadShare(sg)
	}
	c.timers.Close()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.timers.Wait()
	return nil
}

// IsGroup reports whether id is a share group here, for the classic coordinator, which
// refuses classic groups of share group ids. It takes only the ids lock. A group loaded
// under an earlier coordinator epoch does not count: it is unloaded on its next use.
func (c *Coordinator) IsGroup(id string) bool {
	c.idsMu.Lock()
	epoch, ok := c.ids[id]
	c.idsMu.Unlock()
	if !ok {
		return false
	}
	st, err := c.store.Current().MayCoordinate(c.cfg.NodeID, c.store.BrokerEpoch(), id)
	return err == nil && st.Epoch == epoch
}

// claim records id in ids before the group exists; callers hold c.mu.
func (c *Coordinator) claim(id string, epoch int32) {
	c.idsMu.Lock()
	c.ids[id] = epoch
	c.idsMu.Unlock()
}

// unclaim drops id from ids; callers hold c.mu.
func (c *Coordinator) unclaim(id string) {
	c.idsMu.Lock()
	delete(c.ids, id)
	c.idsMu.Unlock()
}

// hasClassicGroup reports whether a classic group holds id; callers hold c.mu.
func (c *Coordinator) hasClassicGroup(id string) bool {
	return c.classic != nil && c.classic.HasGroup(id)
}

// standing returns the coordinator epoch under which this broker may act for group, or
// why it may not: metadata.Image.MayCoordinate's decision, with this broker's lease.
func (c *Coordinator) standing(group string) (int32, error) {
	if c.closed {
		return 0, kerr.NotCoordinator
	}
	st, err := metadata.StandingNow(c.store, c.cfg.NodeID, group)
	return st.Epoch, err
}

// owns reports why this broker may not act for group, nil when it may. A group loaded
// under an earlier coordinator epoch is unloaded first: another broker may have
// coordinated it meanwhile. Callers hold c.mu.
func (c *Coordinator) owns(group string) error {
	epoch, err := c.standing(group)
	if err != nil {
		return err
	}
	if sg := c.shares[group]; sg != nil && sg.coordEpoch != epoch {
		c.lg.Info("share group loaded under an earlier coordinator epoch; unloading it", "group", group,
			"loaded_epoch", sg.coordEpoch, "epoch", epoch)
		c.unloadShare(sg)
	}
	return nil
}

// followImages unloads the groups another broker now coordinates: their members must
// rejoin there, and they find it through FindCoordinator after a NOT_COORDINATOR.
func (c *Coordinator) followImages(ctx context.Context) {
	defer c.wg.Done()
	for im := range c.store.Watch(ctx) {
		c.mu.Lock()
		for _, sg := range c.shares {
			if st, err := im.MayCoordinate(c.cfg.NodeID, c.store.BrokerEpoch(), sg.id); err != nil || st.Epoch != sg.coordEpoch {
				c.lg.Info("share group moved to another coordinator", "group", sg.id)
				c.unloadShare(sg)
			}
		}
		c.mu.Unlock()
	}
}

// storeError maps a metadata store failure to the code Kafka's coordinator would send.
func storeError(err error) error { return metadata.CoordinatorStoreError(err) }
