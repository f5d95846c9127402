package share

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/replication"
)

// Store is where share-partition state is committed: the controller quorum
// (controller.BrokerClient).
type Store interface {
	WriteShareState(ctx context.Context, states []*metadata.SharePartitionState) ([]error, error)
	// ReadShareState with includeDeleted returns deleted states (tombstones) too.
	ReadShareState(ctx context.Context, group string, partitions map[string][]int32, includeDeleted bool) ([]*metadata.SharePartitionState, error)
}

// Replicas is the replica manager's side the share partitions use (replication.Manager).
type Replicas interface {
	Image() *metadata.Image
	Leader(topic string, index, currentLeaderEpoch int32) (*partition.Partition, error)
	Fetch(who replication.Reader, f replication.FetchPartition) replication.FetchResult
	Append(ctx context.Context, acks int16, parts []*replication.ProducePartition)
	AwaitReplication(ctx context.Context, parts []*replication.ProducePartition, timeout time.Duration)
}

// Config configures a Manager.
type Config struct {
	Limits
	// AutoOffsetReset is share.auto.offset.reset for share partitions with no state:
	// "latest" (Kafka's default) starts at the high watermark, "earliest" at the log
	// start.
	AutoOffsetReset string
	Logger          *slog.Logger
}

// Key names one share partition.
type Key struct {
	Group     string
	Topic     string
	Partition int32
}

func (k Key) String() string { return fmt.Sprintf("%s/%s-%d", k.Group, k.Topic, k.Partition) }

// Manager holds the share partitions this broker leads (Kafka's SharePartitionManager).
// Every change is committed through the Store by one flusher goroutine that gathers
// whatever changed while the previous write was in flight into the next (group
// commit); an acknowledgement is answered once a write containing it has committed.
type Manager struct {
	cfg   Config
	store Store
	reps  Replicas
	lg    *slog.Logger

	mu    sync.Mutex
	parts map[Key]*entry

	// writes and statesWritten count store writes and the partition states in them: their
	// ratio is the group commit's batching.
	writes, statesWritten atomic.Int64

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// entry is one cached share partition.
type entry struct {
	key   Key
	ready chan struct{} // closed once loaded (or failed to)

	mu          sync.Mutex
	sp          *Partition
	err         error // load failure, or why the entry was dropped
	leaderEpoch int32
	// version counts changes; committed is the newest version the store holds.
	version, committed uint64
	waiters            []waiter
	// avail is closed, and replaced, when records may have become acquirable.
	avail chan struct{}
	// lastWarn rate-limits the warning about dead letters that cannot be written.
	lastWarn time.Time
	// urgent asks the next flush to write the entry though nobody waits for it.
	urgent bool
}

type waiter struct {
	version uint64
	done    chan error // buffered
}

// NewManager starts a manager and its flusher; Close stops them.
func NewManager(cfg Config, store Store, reps Replicas) *Manager {
	cfg.Limits.defaults()
	if cfg.AutoOffsetReset == "" {
		cfg.AutoOffsetReset = "latest"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, store: store, reps: reps, lg: cfg.Logger, parts: map[Key]*entry{},
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go m.flusher()
	return m
}

// LockDuration is group.share.record.lock.duration.ms, which ShareFetch reports.
func (m *Manager) LockDuration() time.Duration { return m.cfg.LockDuration }

// Close stops the flusher and fails whatever still waits for a commit.
func (m *Manager) Close() error {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.parts {
		e.drop(errors.New("share partition manager closed"))
		delete(m.parts, k)
	}
	return nil
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// drop fails the entry's waiters; callers remove it from the map.
func (e *entry) drop(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
	for _, w := range e.waiters {
		w.done <- err
	}
	e.waiters = nil
	if e.avail != nil {
		close(e.avail)
		e.avail = nil
	}
}

// changed records a change to persist; callers hold e.mu.
func (e *entry) changed() uint64 {
	e.version++
	return e.version
}

// available wakes fetches waiting for records; callers hold e.mu.
func (e *entry) available() {
	if e.avail != nil {
		close(e.avail)
	}
	e.avail = make(chan struct{})
}

var errNotLoaded = fmt.Errorf("%w: share partition state is not loaded", kerr.CoordinatorLoadInProgress)

// get returns the loaded share partition of key, loading it from the store when this
// broker has just become its leader.
func (m *Manager) get(ctx context.Context, key Key) (*entry, *partition.Partition, error) {
	p, err := m.reps.Leader(key.Topic, key.Partition, -1)
	if err != nil {
		return nil, nil, err
	}
	epoch := p.LeaderEpoch()
	m.mu.Lock()
	if m.ctx.Err() != nil {
		m.mu.Unlock()
		return nil, nil, errors.New("share partition manager closed")
	}
	e := m.parts[key]
	if e != nil && e.leaderEpoch != epoch {
		// Led again after another broker: its state is in the store, not here.
		delete(m.parts, key)
		go e.drop(fmt.Errorf("%w: leader epoch changed", kerr.NotLeaderForPartition))
		e = nil
	}
	if e == nil {
		e = &entry{key: key, ready: make(chan struct{}), leaderEpoch: epoch, avail: make(chan struct{})}
		m.parts[key] = e
		m.mu.Unlock()
		m.load(ctx, e, p)
	} else {
		m.mu.Unlock()
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	e.mu.Lock()
	err = e.err
	e.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return e, p, nil
}

func (m *Manager) load(ctx context.Context, e *entry, p *partition.Partition) {
	defer close(e.ready)
	states, err := m.store.ReadShareState(ctx, e.key.Group, map[string][]int32{e.key.Topic: {e.key.Partition}}, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.err = fmt.Errorf("%w: read share state of %s: %w", errNotLoaded, e.key, err)
		m.forget(e)
		return
	}
	var stateEpoch int32
	if len(states) > 0 && states[0].Deleted {
		// Deleted by an admin: start afresh, at the state epoch that fences the old one.
		stateEpoch = states[0].StateEpoch
	} else if len(states) > 0 {
		e.sp = LoadPartition(m.cfg.Limits, states[0])
		if lso := p.LogStartOffset(); e.sp.StartOffset() < lso {
			e.sp.SkipTo(lso)
			e.changed()
			m.wake()
		}
		return
	}
	start := replication.ReadLimit(p, false, false) // latest, as a consumer's ListOffsets
	if m.cfg.AutoOffsetReset == "earliest" {
		start = p.LogStartOffset()
	}
	e.sp = NewPartition(m.cfg.Limits, start)
	e.sp.stateEpoch = stateEpoch
	// Commit the start at once: a new leader resetting to a later "latest" would skip
	// what was produced in between.
	e.changed()
	e.urgent = true
	m.wake()
}

// forget removes e from the map if it is still there; e.mu may be held.
func (m *Manager) forget(e *entry) {
	go func() {
		m.mu.Lock()
		if m.parts[e.key] == e {
			delete(m.parts, e.key)
		}
		m.mu.Unlock()
	}()
}

// Fetched is what Acquire returns for one partition.
type Fetched struct {
	// Records are the whole batches holding the acquired records.
	Records []byte
	Ranges  []AcquiredRange
	// Wait, when nothing was acquired, is closed when records may be acquirable: an
	// append, a high-watermark move, or records released.
	Wait []<-chan struct{}
}

// Acquire acquires up to maxRecords records of the share partition for member, reading
// at most about maxBytes of the log.
func (m *Manager) Acquire(ctx context.Context, key Key, member string, maxRecords, maxBytes int) (Fetched, error) {
	e, p, err := m.get(ctx, key)
	if err != nil {
		return Fetched{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return Fetched{}, e.err
	}
	waits := []<-chan struct{}{p.Waiter(), e.avail}
	hw := replication.ReadLimit(p, false, false) // a share consumer reads at read_uncommitted
	if lso := p.LogStartOffset(); e.sp.StartOffset() < lso {
		// Retention deleted records the group never finished: they are gone.
		e.sp.SkipTo(lso)
		e.changed()
		m.wake()
	}
	from := e.sp.FetchFrom(hw)
	if from < 0 || maxRecords <= 0 {
		return Fetched{Wait: waits}, nil
	}
	res := m.reps.Fetch(replication.Reader{ReplicaID: -1}, replication.FetchPartition{Topic: key.Topic, Index: key.Partition,
		CurrentLeaderEpoch: e.leaderEpoch, FetchOffset: from, LastFetchedEpoch: -1, MaxBytes: maxBytes, MinOne: true})
	if res.Err != nil {
		return Fetched{}, res.Err
	}
	raw := make([]byte, 0, res.View.Size)
	for _, c := range res.View.Chunks {
		raw = append(raw, c...)
	}
	res.View.Release()
	type span struct {
		b          Batch
		start, end int
	}
	var spans []span
	var batches []Batch
	for pos := 0; pos+shalelog.BatchHeaderSize <= len(raw); {
		h, err := shalelog.ParseHeader(raw[pos:])
		if err != nil || pos+h.Size() > len(raw) {
			break
		}
		b := Batch{First: h.BaseOffset, Last: h.LastOffset()}
		spans = append(spans, span{b, pos, pos + h.Size()})
		if !h.IsControl() && h.RecordCount > 0 {
			batches = append(batches, b)
		}
		pos += h.Size()
	}
	ranges, dead := e.sp.Acquire(member, batches, hw, maxRecords, time.Now())
	if len(ranges) > 0 || len(dead) > 0 {
		// Delivery counts are committed with the next write, without holding up the
		// fetch: a failover before it may deliver these records once more uncounted.
		e.changed()
		m.wake()
	}
	if len(ranges) == 0 {
		return Fetched{Wait: waits}, nil
	}
	first, last := ranges[0].First, ranges[len(ranges)-1].Last
	start, end := -1, -1
	for _, s := range spans {
		if s.b.Last < first || s.b.First > last {
			continue
		}
		if start < 0 {
			start = s.start
		}
		end = s.end
	}
	return Fetched{Records: raw[start:end:end], Ranges: ranges}, nil
}

// Acknowledge applies a member's acknowledgements and returns once they are committed.
func (m *Manager) Acknowledge(ctx context.Context, key Key, member string, batches []AckBatch, allowRenew bool) error {
	e, _, err := m.get(ctx, key)
	if err != nil {
		return err
	}
	e.mu.Lock()
	if e.err != nil {
		e.mu.Unlock()
		return e.err
	}
	// Dead letters are written by the flusher, from the partition's pending list, before
	// the write that commits their archival (and answers this acknowledgement).
	if _, err := e.sp.Acknowledge(member, batches, allowRenew, time.Now()); err != nil {
		e.mu.Unlock()
		return err
	}
	if renewOnly(batches) {
		// A renewed lock is not persisted: locks die with the leader anyway.
		e.mu.Unlock()
		return nil
	}
	w := waiter{version: e.changed(), done: make(chan error, 1)}
	e.waiters = append(e.waiters, w)
	e.available()
	e.mu.Unlock()
	m.wake()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func renewOnly(batches []AckBatch) bool {
	for _, b := range batches {
		for _, t := range b.Types {
			if t != AckRenew {
				return false
			}
		}
	}
	return true
}

// ReleaseMember releases what member holds on the given share partitions (its share
// session closed) and waits, bounded by ctx, until that is committed, so that a closed
// session's records are available to a leader that takes over.
func (m *Manager) ReleaseMember(ctx context.Context, keys []Key, member string) {
	m.mu.Lock()
	es := make([]*entry, 0, len(keys))
	for _, k := range keys {
		if e := m.parts[k]; e != nil {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	var waits []chan error
	for _, e := range es {
		e.mu.Lock()
		if e.sp != nil && e.err == nil {
			if n, _ := e.sp.ReleaseMember(member); n > 0 {
				w := waiter{version: e.changed(), done: make(chan error, 1)}
				e.waiters = append(e.waiters, w)
				waits = append(waits, w.done)
				e.available()
			}
		}
		e.mu.Unlock()
	}
	m.wake()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
}

// Refresh drops cached share partitions that hold nothing uncommitted and no locks, so
// that the next use reads them from the store again: a new share session calls it, so
// that an admin's reset of the state (which needs the group empty) is seen.
func (m *Manager) Refresh(keys []Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		e := m.parts[k]
		if e == nil {
			continue
		}
		select {
		case <-e.ready:
		default:
			continue
		}
		e.mu.Lock()
		idle := e.sp != nil && e.version == e.committed && e.sp.Counts().Acquired == 0 && len(e.waiters) == 0
		e.mu.Unlock()
		if idle {
			delete(m.parts, k)
			go e.drop(fmt.Errorf("%w: share partition state reloading", kerr.CoordinatorLoadInProgress))
		}
	}
}

// Summary describes one share partition for admin tools.
type Summary struct {
	StartOffset, EndOffset int64
	Counts
}

// Describe summarizes the cached share partitions of a group led here.
func (m *Manager) Describe(group string) map[Key]Summary {
	m.mu.Lock()
	es := make([]*entry, 0)
	for k, e := range m.parts {
		if k.Group == group {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	out := map[Key]Summary{}
	for _, e := range es {
		e.mu.Lock()
		if e.sp != nil && e.err == nil {
			out[e.key] = Summary{StartOffset: e.sp.StartOffset(), EndOffset: e.sp.EndOffset(), Counts: e.sp.Counts()}
		}
		e.mu.Unlock()
	}
	return out
}

// sweepInterval is how often lock expiry is checked: a fraction of the lock duration.
func (m *Manager) sweepInterval() time.Duration {
	return min(max(m.cfg.LockDuration/10, 10*time.Millisecond), 250*time.Millisecond)
}

func (m *Manager) flusher() {
	defer close(m.done)
	t := time.NewTicker(m.sweepInterval())
	defer t.Stop()
	for {
		all := false
		select {
		case <-m.ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
			all = true
		}
		m.flush(m.ctx, all)
	}
}

// dirty is one entry's write in a flush.
type dirty struct {
	e       *entry
	version uint64
	state   *metadata.SharePartitionState
}

// flush expires locks, writes dead letters, then commits the changed share partitions
// in one store write and answers the acknowledgements it covers. Changes nobody waits
// for (acquisitions, lock expiries) are written only with all, on the sweep ticks: a
// write of them in flight would hold up the next acknowledgement's.
func (m *Manager) flush(ctx context.Context, all bool) {
	m.mu.Lock()
	es := slices.Collect(maps.Values(m.parts))
	m.mu.Unlock()
	now := time.Now()
	var batch []dirty
	for _, e := range es {
		select {
		case <-e.ready:
		default:
			continue
		}
		if p, err := m.reps.Leader(e.key.Topic, e.key.Partition, -1); err != nil || p.LeaderEpoch() != e.leaderEpoch {
			m.forget(e)
			e.drop(fmt.Errorf("%w: no longer the leader of %s-%d", kerr.NotLeaderForPartition, e.key.Topic, e.key.Partition))
			continue
		}
		e.mu.Lock()
		if e.sp == nil || e.err != nil {
			e.mu.Unlock()
			continue
		}
		if n, _ := e.sp.ExpireLocks(now); n > 0 {
			e.changed()
			e.available()
		}
		pending := e.sp.PendingDeadLetters()
		e.mu.Unlock()
		if len(pending) > 0 {
			m.deadLetter(ctx, e, pending)
		}
		e.mu.Lock()
		if e.err == nil && e.version > e.committed && (all || e.urgent || len(e.waiters) > 0) {
			e.urgent = false
			batch = append(batch, dirty{e: e, version: e.version, state: e.sp.Persisted(e.key.Group, e.key.Topic, e.key.Partition, e.leaderEpoch)})
		}
		e.mu.Unlock()
	}
	if len(batch) == 0 {
		return
	}
	states := make([]*metadata.SharePartitionState, len(batch))
	for i, d := range batch {
		states[i] = d.state
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	errs, err := m.store.WriteShareState(wctx, states)
	cancel()
	m.writes.Add(1)
	m.statesWritten.Add(int64(len(states)))
	for i, d := range batch {
		e := d.e
		werr := err
		if werr == nil {
			werr = errs[i]
		}
		if werr != nil && (errors.Is(werr, kerr.FencedLeaderEpoch) || errors.Is(werr, kerr.FencedStateEpoch) || errors.Is(werr, kerr.UnknownTopicOrPartition)) {
			// Another leader or an admin owns the state now: reload before serving again.
			m.lg.Warn("share partition state write fenced; reloading", "share_partition", e.key.String(), "err", werr)
			m.forget(e)
			e.drop(werr)
			continue
		}
		e.mu.Lock()
		if werr == nil {
			e.committed = max(e.committed, d.version)
		}
		// After a failed write the change stays and the next flush retries it; its
		// acknowledgements keep waiting, since answering them with an error would have
		// the client resend acknowledgements already applied here.
		kept := e.waiters[:0]
		for _, w := range e.waiters {
			if werr == nil && w.version <= e.committed {
				w.done <- nil
			} else {
				kept = append(kept, w)
			}
		}
		e.waiters = kept
		e.mu.Unlock()
		if werr != nil {
			m.lg.Warn("share partition state write failed; retrying", "share_partition", e.key.String(), "err", werr)
		}
	}
}

// MemberRemoved releases, without blocking, what a member that left its share group
// holds on the share partitions of that group this broker leads (the coordinator calls
// it under its lock; elsewhere the member's locks expire).
func (m *Manager) MemberRemoved(group, member string) {
	m.mu.Lock()
	var keys []Key
	for k := range m.parts {
		if k.Group == group {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	if len(keys) > 0 {
		go m.ReleaseMember(m.ctx, keys, member)
	}
}

// Writes returns how many store writes the manager made and how many partition states
// they carried.
func (m *Manager) Writes() (writes, states int64) {
	return m.writes.Load(), m.statesWritten.Load()
}
