package replication

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// followTarget is a partition this broker follows and the leader it follows.
type followTarget struct {
	p           *partition.Partition
	leader      metadata.Broker
	leaderEpoch int32
	topicID     [16]byte
	// throttled: this replica's fetches spend follower.replication.throttled.rate.
	throttled bool
}

// fetcherKey picks a fetcher: one per source broker and fetcher index
// (num.replica.fetchers), as Kafka's ReplicaFetcherManager does.
type fetcherKey struct {
	source int32
	index  int
	addr   string
}

// fetcherPool owns the follower fetchers.
type fetcherPool struct {
	m        *Manager
	mu       sync.Mutex
	fetchers map[fetcherKey]*fetcher
}

func newFetcherPool(m *Manager) *fetcherPool {
	return &fetcherPool{m: m, fetchers: map[fetcherKey]*fetcher{}}
}

func (fp *fetcherPool) keyFor(tp partition.TopicPartition, leader metadata.Broker) fetcherKey {
	h := fnv.New32a()
	h.Write([]byte(tp.String()))
	return fetcherKey{source: leader.ID, index: int(h.Sum32() % uint32(fp.m.cfg.NumReplicaFetchers)),
		addr: net.JoinHostPort(leader.Host, strconv.Itoa(int(leader.Port)))}
}

// update moves every followed partition to the fetcher of its current leader and stops
// fetchers left with nothing to fetch.
func (fp *fetcherPool) update(follow map[partition.TopicPartition]followTarget) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.m.ctx.Err() != nil {
		return
	}
	byKey := map[fetcherKey]map[partition.TopicPartition]followTarget{}
	for tp, t := range follow {
		k := fp.keyFor(tp, t.leader)
		if byKey[k] == nil {
			byKey[k] = map[partition.TopicPartition]followTarget{}
		}
		byKey[k][tp] = t
	}
	for k, f := range fp.fetchers {
		if _, ok := byKey[k]; !ok {
			f.stop()
			delete(fp.fetchers, k)
		}
	}
	for k, targets := range byKey {
		f := fp.fetchers[k]
		if f == nil {
			var err error
			if f, err = newFetcher(fp.m, k, targets[anyKey(targets)].leader); err != nil {
				fp.m.lg.Error("cannot start a replica fetcher", "leader", k.source, "addr", k.addr, "err", err)
				continue
			}
			fp.fetchers[k] = f
		}
		f.set(targets)
	}
}

func (fp *fetcherPool) close() {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for k, f := range fp.fetchers {
		f.stop()
		delete(fp.fetchers, k)
	}
}

// fetchState is one partition in a fetcher.
type fetchState struct {
	followTarget
	// backoffUntil delays a partition whose last fetch failed (replica.fetch.backoff.ms)
	// until the metadata changes it.
	backoffUntil time.Time
}

// fetcher pulls every partition it holds from one leader with Kafka's Fetch (replica id
// and broker epoch), multiplexed in one request.
type fetcher struct {
	m    *Manager
	key  fetcherKey
	conn BrokerConn

	mu      sync.Mutex
	parts   map[partition.TopicPartition]*fetchState
	changed chan struct{}
	// Driven managers only: a fetch is out (DrivenFetches), or the last one failed and
	// the next waits until pausedUntil.
	inFlight    bool
	pausedUntil time.Time

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// BrokerConn carries requests to one broker: the replica fetchers' way to a leader.
type BrokerConn interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// kgoConn is a BrokerConn over a Kafka client seeded with the one broker.
type kgoConn struct{ cl *kgo.Client }

func (c kgoConn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.cl.SeedBrokers()[0].Request(ctx, req)
}

func (c kgoConn) Close() { c.cl.Close() }

func (m *Manager) dial(k fetcherKey, leader metadata.Broker) (BrokerConn, error) {
	if m.cfg.Dial != nil {
		return m.cfg.Dial(leader)
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(k.addr),
		kgo.ClientID(fmt.Sprintf("shale-replica-fetcher-%d-%d", m.cfg.NodeID, k.index)),
		kgo.DialTimeout(5 * time.Second),
		kgo.WithLogger(nil),
	}, m.cfg.FetcherOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return kgoConn{cl}, nil
}

func newFetcher(m *Manager, k fetcherKey, leader metadata.Broker) (*fetcher, error) {
	conn, err := m.dial(k, leader)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(m.ctx)
	f := &fetcher{m: m, key: k, conn: conn, parts: map[partition.TopicPartition]*fetchState{},
		changed: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	if m.cfg.Driven {
		close(f.done)
		return f, nil
	}
	go func() {
		defer close(f.done)
		f.run(ctx)
	}()
	return f, nil
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
	f.conn.Close()
}

// set replaces the partitions fetched; a partition whose leader epoch is unchanged keeps
// its back-off.
func (f *fetcher) set(targets map[partition.TopicPartition]followTarget) {
	f.mu.Lock()
	next := make(map[partition.TopicPartition]*fetchState, len(targets))
	changed := len(targets) != len(f.parts)
	for tp, t := range targets {
		if st := f.parts[tp]; st != nil && st.leaderEpoch == t.leaderEpoch && st.p == t.p {
			st.throttled = t.throttled
			next[tp] = st
			continue
		}
		next[tp] = &fetchState{followTarget: t}
		changed = true
	}
	f.parts = next
	f.mu.Unlock()
	if changed {
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
}

// wait sleeps for d, or until the partition set changes or ctx ends.
func (f *fetcher) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.changed:
	case <-ctx.Done():
	}
}

func (f *fetcher) run(ctx context.Context) {
	backoff := f.m.cfg.ReplicaFetchBackoff
	for ctx.Err() == nil {
		f.awaitFlushed(ctx)
		req, states, nextReady := f.build()
		if req == nil {
			f.wait(ctx, nextReady)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, f.m.cfg.ReplicaFetchWaitMax+30*time.Second)
		kresp, err := f.conn.Request(rctx, req)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			f.m.lg.Debug("replica fetch failed", "leader", f.key.source, "addr", f.key.addr, "err", err)
			f.wait(ctx, backoff)
			continue
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			f.m.lg.Warn("replica fetch refused", "leader", f.key.source, "err", err)
			f.wait(ctx, backoff)
			continue
		}
		f.handle(ctx, resp, states)
	}
}

// flushRecheck bounds how long a fetcher's loop leaves a partition that waits for its
// group commit out of its fetches when no wake-up comes (one does, normally).
const flushRecheck = 10 * time.Millisecond

// awaitFlushed is how a follower under durable acks (acks.all.fsync, flush.messages=1)
// reports its flushed offset: it fsyncs what it appended before it asks for more, so
// that the fetch offset it sends, which the leader takes as its log end, means
// "everything below is on my disk", and the leader's high watermark, the least fetch
// offset over the ISR, is the least flushed offset. On the wire nothing changes: the
// fetch is an ordinary Fetch v15. The fsync is the group commit's, one per partition for
// every batch of the response, on the log's goroutine; this loop only waits for it. It
// stops waiting when ctx ends or the partition set changes.
func (f *fetcher) awaitFlushed(ctx context.Context) {
	f.mu.Lock()
	var ps []*partition.Partition
	for _, st := range f.parts {
		if st.p.DurableAcks() && st.p.FlushedOffset() < st.p.LogEndOffset() {
			ps = append(ps, st.p)
		}
	}
	f.mu.Unlock()
	for _, p := range ps {
		p.RequestSync()
	}
	for _, p := range ps {
		for {
			ch := p.FlushWaiter()
			if p.FlushedOffset() >= p.LogEndOffset() || p.SyncErr() != nil || p.Role() != partition.RoleFollower {
				break
			}
			p.RequestSync()
			select {
			case <-ch:
			case <-ctx.Done():
				return
			case <-f.changed:
				return
			}
		}
	}
}

// build makes the next Fetch for the partitions not backing off; when all are, it
// returns nil and how long until the first is ready.
func (f *fetcher) build() (*kmsg.FetchRequest, map[partition.TopicPartition]*fetchState, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.m.now()
	nextReady := time.Hour
	req := kmsg.NewPtrFetchRequest()
	req.Version = 15
	req.ReplicaID = f.m.cfg.NodeID
	req.ReplicaState.ID = f.m.cfg.NodeID
	req.ReplicaState.Epoch = f.m.store.BrokerEpoch()
	req.MaxWaitMillis = int32(f.m.cfg.ReplicaFetchWaitMax.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = f.m.cfg.ReplicaFetchResponseMaxBytes
	req.IsolationLevel = 0
	states := map[partition.TopicPartition]*fetchState{}
	topics := map[string]int{}
	throttleWait := f.m.followerQuota.wait(now)
	for _, tp := range f.order() {
		st := f.parts[tp]
		if wait := st.backoffUntil.Sub(now); wait > 0 {
			nextReady = min(nextReady, wait)
			continue
		}
		if st.throttled && throttleWait > 0 {
			// Kafka's follower throttle: a throttled replica sits out while the
			// broker's budget is spent.
			nextReady = min(nextReady, throttleWait)
			continue
		}
		leo := st.p.LogEndOffset()
		if st.p.DurableAcks() && st.p.FlushedOffset() < leo {
			// Its fetch offset must mean "fsynced below this" (see awaitFlushed): it
			// sits out until its group commit has run. A Driven manager's caller asks
			// again at its next round; the fetcher's own loop waits in awaitFlushed. One
			// whose group commit failed never reports what it could not sync (it is
			// offline, and could append nothing anyway).
			if st.p.SyncErr() != nil {
				nextReady = min(nextReady, f.m.cfg.ReplicaFetchBackoff)
				continue
			}
			st.p.RequestSync()
			nextReady = min(nextReady, flushRecheck)
			continue
		}
		i, ok := topics[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = tp.Topic, st.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[tp.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.Index
		rp.CurrentLeaderEpoch = st.leaderEpoch
		rp.FetchOffset = leo
		rp.LastFetchedEpoch = st.p.LatestEpoch()
		rp.LogStartOffset = st.p.LogStartOffset()
		rp.PartitionMaxBytes = f.m.cfg.ReplicaFetchMaxBytes
		SetFetchPartitionEpoch(&rp, st.p.PartitionEpoch())
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		states[tp] = st
	}
	if len(states) == 0 {
		return nil, nil, nextReady
	}
	return req, states, 0
}

// order is the fetcher's partitions in the order a request lists them: any order, except
// under a Driven manager, whose runs must repeat exactly.
func (f *fetcher) order() []partition.TopicPartition {
	tps := slices.Collect(maps.Keys(f.parts))
	if f.m.cfg.Driven {
		slices.SortFunc(tps, comparePartitions)
	}
	return tps
}

func comparePartitions(a, b partition.TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Index, b.Index))
}

func anyKey[K comparable, V any](m map[K]V) K {
	for k := range m {
		return k
	}
	var zero K
	return zero
}

func (f *fetcher) handle(ctx context.Context, resp *kmsg.FetchResponse, states map[partition.TopicPartition]*fetchState) {
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			name := rt.Topic
			if name == "" {
				name = f.topicByID(rt.TopicID)
			}
			st := states[partition.TopicPartition{Topic: name, Index: rp.Partition}]
			if st == nil {
				continue
			}
			if err := f.handlePartition(ctx, st, rp); err != nil {
				lvl := slog.LevelInfo
				if f.backoffFor(err) < f.m.cfg.ReplicaFetchBackoff {
					lvl = slog.LevelDebug
				}
				f.m.lg.Log(ctx, lvl, "replica fetch of a partition failed; backing off", "topic", name, "partition", rp.Partition,
					"leader", f.key.source, "leader_epoch", st.leaderEpoch, "err", err)
				f.mu.Lock()
				st.backoffUntil = f.m.now().Add(f.backoffFor(err))
				f.mu.Unlock()
			}
		}
	}
}

// metadataLagBackoff is the pause after an error that only says the leader's metadata is
// behind or ahead of ours (a topic just created, a leader change in flight): the next
// metadata update usually resolves it within milliseconds, so waiting the full
// replica.fetch.backoff.ms would stall acks=all producers for a second.
const metadataLagBackoff = 50 * time.Millisecond

func (f *fetcher) backoffFor(err error) time.Duration {
	for _, e := range []error{kerr.UnknownTopicID, kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition,
		kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch} {
		if errors.Is(err, e) {
			return min(metadataLagBackoff, f.m.cfg.ReplicaFetchBackoff)
		}
	}
	return f.m.cfg.ReplicaFetchBackoff
}

func (f *fetcher) topicByID(id [16]byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp, st := range f.parts {
		if st.topicID == id {
			return tp.Topic
		}
	}
	return ""
}

func (f *fetcher) handlePartition(ctx context.Context, st *fetchState, rp *kmsg.FetchResponseTopicPartition) error {
	p := st.p
	if p.Role() != partition.RoleFollower || p.LeaderEpoch() != st.leaderEpoch {
		return nil // the metadata moved on while the fetch was in flight
	}
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return f.outOfRange(ctx, st)
		}
		return err
	}
	if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
		leo, epoch := p.LogEndOffset(), p.LatestEpoch()
		if err := f.truncateDiverged(ctx, p, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset); err != nil {
			return err
		}
		if p.LogEndOffset() == leo && p.LatestEpoch() == epoch {
			// Never spin: a divergence that truncation cannot resolve backs off.
			return fmt.Errorf("divergence at epoch %d, end offset %d left the log unchanged (end offset %d, epoch %d)",
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset, leo, epoch)
		}
		return nil
	}
	if len(rp.RecordBatches) > 0 {
		n, err := p.AppendAsFollower(rp.RecordBatches, st.leaderEpoch)
		f.m.m.replicatedBytes.Add(float64(n))
		f.mu.Lock()
		throttled := st.throttled
		f.mu.Unlock()
		if throttled {
			f.m.followerQuota.record(len(rp.RecordBatches), f.m.now())
		}
		if err != nil {
			return fmt.Errorf("append as follower: %w", err)
		}
	}
	p.SetFollowerHighWatermark(rp.HighWatermark)
	if err := p.FollowLogStart(rp.LogStartOffset); err != nil {
		return fmt.Errorf("follow the leader's log start offset: %w", err)
	}
	return nil
}

// truncateDiverged truncates to where this replica's log stops agreeing with the
// leader's: the leader's epoch ended at leaderEnd. When this replica knows that epoch it
// truncates to the lower end of the two; when it does not, to the end of its own largest
// epoch below it, and the next fetch compares again (Kafka's truncation by leader epoch).
func (f *fetcher) truncateDiverged(ctx context.Context, p *partition.Partition, leaderEpoch int32, leaderEnd int64) error {
	myEpoch, myEnd := p.EndOffsetForEpoch(leaderEpoch)
	var to int64
	switch {
	case leaderEpoch < 0:
		// The leader knows no epoch this old: its log starts at leaderEnd, after
		// everything this replica could share with it.
		if leaderEnd <= p.LogStartOffset() || p.LogEndOffset() <= leaderEnd {
			// Only the remote segment ending exactly there will do: the leader's log end
			// is not known here.
			return f.m.restartFollower(ctx, p, leaderEnd, leaderEnd)
		}
		to = min(leaderEnd, p.LogEndOffset())
	case myEpoch == leaderEpoch:
		to = min(leaderEnd, myEnd)
	case myEpoch < 0:
		to = min(leaderEnd, p.LogEndOffset())
	default:
		to = myEnd
	}
	f.m.lg.Info("follower log diverged from the leader's; truncating", "topic", p.Topic(), "partition", p.Index(),
		"leader_epoch", leaderEpoch, "leader_end_offset", leaderEnd, "truncate_to", to, "log_end_offset", p.LogEndOffset())
	return p.TruncateTo(to)
}

// outOfRange handles a fetch offset outside the leader's log: this replica's log ends
// beyond the leader's (truncate to it) or before the leader's start (restart there).
func (f *fetcher) outOfRange(ctx context.Context, st *fetchState) error {
	p := st.p
	latest, err := f.listOffset(ctx, st, -1)
	if err != nil {
		return err
	}
	if p.LogEndOffset() > latest {
		return p.TruncateTo(latest)
	}
	earliest, err := f.listOffset(ctx, st, -2)
	if err != nil {
		return err
	}
	if p.LogEndOffset() < earliest {
		return f.m.restartFollower(ctx, p, earliest, latest)
	}
	return nil
}

func (f *fetcher) listOffset(ctx context.Context, st *fetchState, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.m.cfg.NodeID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = st.p.Topic()
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = st.p.Index(), st.leaderEpoch, ts
	t.Partitions = append(t.Partitions, lp)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kresp, err := f.conn.Request(rctx, req)
	if err != nil {
		return 0, fmt.Errorf("list offsets on the leader: %w", err)
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("list offsets on the leader: malformed response")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, fmt.Errorf("list offsets on the leader: %w", err)
	}
	return rp.Offset, nil
}

// DrivenFetch is one replica fetch that a Driven manager's caller carries to the leader
// and back.
type DrivenFetch struct {
	// Leader is the broker the request goes to.
	Leader  int32
	Request *kmsg.FetchRequest
	f       *fetcher
	states  map[partition.TopicPartition]*fetchState
}

// DrivenFetches returns the next request of every fetcher that has none out, is not
// backing off and has a partition to fetch now, in leader and fetcher order. Each must
// be completed (Complete) before its fetcher sends again.
func (m *Manager) DrivenFetches() []*DrivenFetch {
	fp := m.fetchers
	fp.mu.Lock()
	keys := slices.Collect(maps.Keys(fp.fetchers))
	fs := make([]*fetcher, 0, len(keys))
	slices.SortFunc(keys, func(a, b fetcherKey) int {
		return cmp.Or(cmp.Compare(a.source, b.source), cmp.Compare(a.index, b.index), strings.Compare(a.addr, b.addr))
	})
	for _, k := range keys {
		fs = append(fs, fp.fetchers[k])
	}
	fp.mu.Unlock()
	now := m.now()
	var out []*DrivenFetch
	for _, f := range fs {
		f.mu.Lock()
		busy := f.inFlight || now.Before(f.pausedUntil)
		f.mu.Unlock()
		if busy {
			continue
		}
		req, states, _ := f.build()
		if req == nil {
			continue
		}
		f.mu.Lock()
		f.inFlight = true
		f.mu.Unlock()
		out = append(out, &DrivenFetch{Leader: f.key.source, Request: req, f: f, states: states})
	}
	return out
}

// Complete hands the fetch its answer, or the error that took it (a lost request or
// response), as the fetcher's own loop would; ListOffsets that the answer calls for go
// through the fetcher's BrokerConn.
func (d *DrivenFetch) Complete(resp *kmsg.FetchResponse, err error) {
	f := d.f
	f.mu.Lock()
	f.inFlight = false
	f.mu.Unlock()
	if f.ctx.Err() != nil {
		return
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		f.mu.Lock()
		f.pausedUntil = f.m.now().Add(f.m.cfg.ReplicaFetchBackoff)
		f.mu.Unlock()
		return
	}
	f.handle(f.ctx, resp, d.states)
}
