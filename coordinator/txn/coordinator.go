package txn

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// Store is what the coordinator needs from the metadata quorum.
type Store interface {
	Current() *metadata.Image
	Watch(ctx context.Context) <-chan *metadata.Image
	LeaseValid() bool
	BrokerEpoch() int64
	metadata.TxnStore
}

// ProducerIDs hands out producer ids unique in the cluster (coordinator/txn/producerid).
type ProducerIDs interface {
	Next(ctx context.Context) (int64, error)
}

// MarkerWriter sends WriteTxnMarkers to a partition leader.
type MarkerWriter interface {
	WriteTxnMarkers(ctx context.Context, to metadata.Broker, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
}

// Coordinator is the transaction coordinator of the transactional ids that hash to this
// broker.
type Coordinator struct {
	cfg     Config
	store   Store
	pids    ProducerIDs
	markers MarkerWriter
	lg      *slog.Logger

	mu     sync.Mutex
	closed bool
	// parts are the offsets partitions this broker coordinates (or is loading).
	parts map[int32]*partition
	// sweeps times the periodic aborts of timed-out transactions and removals of
	// expired transactional ids.
	sweeps      *timer.Set
	abortTimer  timer.Slot
	expireTimer timer.Slot

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// partition is one offsets partition's transactions, loaded under one coordinator epoch.
type partition struct {
	index  int32
	epoch  int32
	loaded bool
	txns   map[string]*txnMeta
	// ctx ends when the partition is unloaded: its loads and completions stop.
	ctx    context.Context
	cancel context.CancelFunc
}

// txnMeta is one transactional id's committed state.
type txnMeta struct {
	st metadata.TxnState
	// writing is set while a transition is being committed (Kafka's pendingState):
	// other requests get CONCURRENT_TRANSACTIONS meanwhile.
	writing bool
	// completed is closed when the markers of a Prepare* state are written and the
	// Complete* state committed (or the attempt given up); nil when none is under way.
	completed chan struct{}
}

func (t *txnMeta) endCompletion() {
	if t.completed != nil {
		close(t.completed)
		t.completed = nil
	}
}

// New starts a coordinator: it follows the store's images to load the transactions of
// the partitions this broker comes to coordinate (completing those left in
// PrepareCommit or PrepareAbort) and drop those it no longer does, and it aborts timed
// out transactions and forgets expired transactional ids. Close stops it.
func New(cfg Config, store Store, pids ProducerIDs, markers MarkerWriter) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg: cfg, store: store, pids: pids, markers: markers,
		lg:    cfg.Logger.With("component", "txn-coordinator"),
		parts: map[int32]*partition{},
		ctx:   ctx, cancel: cancel,
	}
	c.sweeps = timer.NewSet(cfg.Clock, &c.mu)
	c.wg.Add(2)
	go c.followImages(ctx)
	go c.timers(ctx)
	return c
}

// Close stops every load, completion and timer and waits for them. Transactions left
// half-way are completed by the next coordinator.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, ps := range c.parts {
		c.unloadLocked(ps)
	}
	c.sweeps.Close()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.sweeps.Wait()
	return nil
}

// followImages loads the partitions this broker comes to coordinate and unloads the
// ones it no longer does (or does under a new coordinator epoch).
func (c *Coordinator) followImages(ctx context.Context) {
	defer c.wg.Done()
	for im := range c.store.Watch(ctx) {
		c.mu.Lock()
		if !c.closed {
			c.syncLocked(im)
		}
		c.mu.Unlock()
	}
}

func (c *Coordinator) syncLocked(im *metadata.Image) {
	mine := im.CoordinatedPartitions(c.cfg.NodeID, c.store.BrokerEpoch())
	for p, ps := range c.parts {
		if e, ok := mine[p]; !ok || e != ps.epoch {
			c.unloadLocked(ps)
		}
	}
	var load []*partition
	for _, p := range slices.Sorted(maps.Keys(mine)) {
		if c.parts[p] == nil {
			load = append(load, c.newPartitionLocked(p, mine[p]))
		}
	}
	if len(load) > 0 {
		c.wg.Add(1)
		go c.load(load)
	}
}

func (c *Coordinator) newPartitionLocked(p, epoch int32) *partition {
	ctx, cancel := context.WithCancel(c.ctx)
	ps := &partition{index: p, epoch: epoch, txns: map[string]*txnMeta{}, ctx: ctx, cancel: cancel}
	c.parts[p] = ps
	return ps
}

func (c *Coordinator) unloadLocked(ps *partition) {
	ps.cancel()
	if c.parts[ps.index] == ps {
		delete(c.parts, ps.index)
	}
}

// load reads the partitions' transactions from the controller, retrying until it
// succeeds or the partitions are unloaded, then completes the transactions a previous
// coordinator left in PrepareCommit or PrepareAbort.
func (c *Coordinator) load(pss []*partition) {
	defer c.wg.Done()
	idx := make([]int32, len(pss))
	for i, ps := range pss {
		idx[i] = ps.index
	}
	for attempt := 0; ; attempt++ {
		live := false
		for _, ps := range pss {
			live = live || ps.ctx.Err() == nil
		}
		if !live {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.StoreTimeout)
		states, err := c.store.LoadTxnStates(ctx, idx)
		cancel()
		if err == nil {
			c.loaded(pss, states)
			return
		}
		c.lg.Warn("loading transactions failed; retrying", "partitions", idx, "err", err)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
		}
	}
}

func (c *Coordinator) loaded(pss []*partition, states []metadata.TxnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byPart := map[int32]*partition{}
	for _, ps := range pss {
		if c.parts[ps.index] == ps {
			byPart[ps.index] = ps
		}
	}
	n := len(c.store.Current().Coordinators)
	for _, st := range states {
		ps := byPart[metadata.OffsetsPartition(st.TransactionalID, n)]
		if ps == nil {
			continue
		}
		ps.txns[st.TransactionalID] = &txnMeta{st: st}
	}
	loaded, txns := 0, 0
	for _, ps := range byPart {
		ps.loaded = true
		loaded++
		txns += len(ps.txns)
		for _, t := range ps.txns {
			if t.st.Status == metadata.TxnPrepareCommit || t.st.Status == metadata.TxnPrepareAbort {
				c.lg.Info("completing a transaction the previous coordinator left", "transactional_id", t.st.TransactionalID,
					"state", t.st.Status.String())
				c.startCompletionLocked(ps, t)
			}
		}
	}
	if loaded > 0 {
		c.lg.Info("transaction coordinator loaded partitions", "partitions", loaded, "transactions", txns)
	}
}

// partitionFor returns the loaded partition of id, or why this broker cannot act for
// it. Callers hold c.mu.
func (c *Coordinator) partitionFor(id string) (*partition, error) {
	if c.closed {
		return nil, kerr.NotCoordinator
	}
	st, err := metadata.StandingNow(c.store, c.cfg.NodeID, id)
	if err != nil {
		return nil, err
	}
	ps := c.parts[st.Partition]
	if ps == nil || ps.epoch != st.Epoch {
		// The image reached the request before followImages: start the load here.
		c.syncLocked(c.store.Current())
		return nil, kerr.CoordinatorLoadInProgress
	}
	if !ps.loaded {
		return nil, kerr.CoordinatorLoadInProgress
	}
	return ps, nil
}

// write commits next as t's state under ps's coordinator epoch. Callers hold c.mu and
// have set t.writing; write releases c.mu while the controller commits, and returns
// with it held and t.writing clear.
func (c *Coordinator) write(ctx context.Context, ps *partition, t *txnMeta, next metadata.TxnState) error {
	fence := metadata.GroupFence{Broker: c.cfg.NodeID, Epoch: ps.epoch}
	c.mu.Unlock()
	err := c.store.WriteTxnState(ctx, fence, next, false)
	c.mu.Lock()
	t.writing = false
	if err == nil {
		t.st = next
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if ke == kerr.NotCoordinator {
			c.lg.Info("controller refused a transaction write from a stale coordinator; unloading the partition",
				"partition", ps.index, "coordinator_epoch", ps.epoch)
			c.unloadLocked(ps)
		}
		return ke
	}
	// The outcome is unknown: the write may have committed. Reload the partition from
	// the controller rather than guess; clients retry meanwhile.
	c.lg.Warn("transaction write failed; reloading the partition", "transactional_id", next.TransactionalID, "err", err)
	c.unloadLocked(ps)
	return kerr.CoordinatorNotAvailable
}

// storeCtx bounds a controller call made on behalf of ps without a client's context.
func (c *Coordinator) storeCtx(ps *partition) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ps.ctx, c.cfg.StoreTimeout)
}

func (c *Coordinator) now() int64 { return c.cfg.Now().UnixMilli() }

func clonePartitions(m map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(m))
	for t, ps := range m {
		out[t] = slices.Clone(ps)
	}
	return out
}
