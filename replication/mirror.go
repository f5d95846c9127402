package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// Mirroring (issue 29): the leader of each destination partition of an active mirror
// topic copies its source partition, pulling with Kafka's Fetch as a consumer of the
// source cluster (replica id -1, read_uncommitted, so up to the source's high watermark,
// aborted transactions and markers included) and appending the batches at their offsets,
// byte for byte, with partition.AppendMirrored. Within the destination cluster the
// partition is replicated as any other: followers fetch from the leader, the ISR and
// acks work as for produced data, and the high watermark moves when the ISR has the
// batches.
//
// Leader epochs. The destination keeps the source's epochs: the batches carry them, the
// leader's epoch cache is built from them (becoming leader of a mirror records no
// destination epoch, partition.State.Mirror), and the followers' caches too, so that
// OffsetForLeaderEpoch and Fetch's divergence check answer the same within the
// destination as on the source. Consequences:
//
//   - A destination leader change is an ordinary one: the new leader (from the ISR) has
//     every batch below the high watermark, the old one truncates to the new leader's
//     log by the (source) epochs they share, and the new leader's copier resumes from
//     its own log end.
//   - A source leader change is invisible in the data as long as the source's election
//     is clean: the copier reads only below the source's high watermark, which a clean
//     election never truncates. It follows the new leader (metadata on
//     NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH) with the source epoch of its last
//     batch as LastFetchedEpoch.
//   - If the source did truncate (an unclean election, a lost disk), its Fetch answers
//     with a diverging epoch and the copier truncates the destination leader's log to
//     the point both logs agree (partition.TruncateMirror). The followers, whose
//     positions the leader forgets, find the same divergence on their next fetch.
//   - A consumer that moves from the source to the destination with a committed offset
//     and leader epoch validates it against the same epochs.
//   - Promotion must start the destination's own epochs above every source epoch in its
//     logs. Before the copier appends a batch of a source epoch above the mirror's
//     committed floor it raises the floor through the controller (RaiseMirrorEpoch,
//     once per source leader change), and promotion sets each partition's leader epoch
//     above its floor (controller/fsm_links.go), so the first destination epoch written
//     is larger than any epoch a replica holds.
//
// Copiers run only in a manager that is not Driven (the simulation does not mirror).

// LinkConn carries requests to a cluster link's source cluster.
type LinkConn interface {
	// Request sends req to the source broker with that id, or to any broker when id is
	// -1 (Metadata).
	Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
	Close()
}

type kgoLinkConn struct{ cl *kgo.Client }

func (c kgoLinkConn) Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	if broker < 0 {
		return c.cl.Request(ctx, req)
	}
	return c.cl.Broker(int(broker)).Request(ctx, req)
}

func (c kgoLinkConn) Close() { c.cl.Close() }

// dialLink is the default Config.DialLink: a franz-go client with the link's bootstrap
// servers and security configs.
func dialLink(l *metadata.ClusterLink) (LinkConn, error) {
	sec, err := client.SecurityFrom(l.Configs).KgoOpts()
	if err != nil {
		return nil, fmt.Errorf("cluster link %q: %w", l.Name, err)
	}
	var seeds []string
	for _, s := range strings.Split(l.Config(metadata.LinkBootstrapServers), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	id := l.Config(metadata.LinkClientID)
	if id == "" {
		id = "shale-link-" + l.Name
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(id), kgo.DialTimeout(10 * time.Second),
		kgo.RequestRetries(0), kgo.RetryTimeout(0)}, sec...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster link %q: %w", l.Name, err)
	}
	return kgoLinkConn{cl: cl}, nil
}

// mirrorTarget is a mirror partition this broker leads.
type mirrorTarget struct {
	p           *partition.Partition
	leaderEpoch int32
	mirror      *metadata.MirrorTopic
	topicID     [16]byte
}

func (t mirrorTarget) same(o mirrorTarget) bool {
	return t.p == o.p && t.leaderEpoch == o.leaderEpoch && t.mirror.Link == o.mirror.Link &&
		t.mirror.SourceTopic == o.mirror.SourceTopic && t.topicID == o.topicID
}

// linkRuntime is one link's connection and byte budget, shared by its copiers here.
type linkRuntime struct {
	link  *metadata.ClusterLink
	conn  LinkConn
	quota *quota
	// copied counts the bytes appended from the source (shale_mirror_bytes_copied_total).
	copiedMu sync.Mutex
	copied   int64
}

// mirrorPool owns the copiers and the links' connections.
type mirrorPool struct {
	m       *Manager
	mu      sync.Mutex
	links   map[string]*linkRuntime
	copiers map[partition.TopicPartition]*copier
	// syncers sync the links' consumer offsets, by link name (mirror_offsets.go).
	syncers map[string]*offsetSyncer
	closed  bool
}

func newMirrorPool(m *Manager) *mirrorPool {
	return &mirrorPool{m: m, links: map[string]*linkRuntime{}, copiers: map[partition.TopicPartition]*copier{},
		syncers: map[string]*offsetSyncer{}}
}

func sameLink(a, b *metadata.ClusterLink) bool {
	if a.ID != b.ID || len(a.Configs) != len(b.Configs) {
		return false
	}
	for k, v := range a.Configs {
		if w, ok := b.Configs[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// update runs a copier for every target and stops the others; a link whose configs
// changed is dialed anew (its copiers restart).
func (mp *mirrorPool) update(im *metadata.Image, targets map[partition.TopicPartition]mirrorTarget) {
	if mp.m.cfg.Driven {
		return
	}
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.closed || mp.m.ctx.Err() != nil {
		return
	}
	for name, lr := range mp.links {
		if l := im.Links[name]; l == nil || !sameLink(l, lr.link) {
			for tp, c := range mp.copiers {
				if c.link == lr {
					c.stop()
					delete(mp.copiers, tp)
				}
			}
			lr.conn.Close()
			delete(mp.links, name)
		}
	}
	for tp, c := range mp.copiers {
		if t, ok := targets[tp]; !ok || !t.same(c.t) {
			c.stop()
			delete(mp.copiers, tp)
		} else {
			c.setMirror(t.mirror)
		}
	}
	for tp, t := range targets {
		if mp.copiers[tp] != nil {
			continue
		}
		l := im.Links[t.mirror.Link]
		if l == nil {
			continue
		}
		lr := mp.links[l.Name]
		if lr == nil {
			dial := mp.m.cfg.DialLink
			if dial == nil {
				dial = dialLink
			}
			conn, err := dial(l)
			if err != nil {
				mp.m.lg.Error("cannot reach a cluster link's source", "link", l.Name, "err", err)
				continue
			}
			rate := l.ConfigInt(metadata.LinkFetchBytesPerSec)
			if rate <= 0 {
				rate = -1 // unlimited
			}
			lr = &linkRuntime{link: l, conn: conn, quota: newQuota(rate)}
			mp.links[l.Name] = lr
		}
		mp.copiers[tp] = startCopier(mp.m, lr, tp, t)
	}
	mp.updateSyncers(im)
	for name, lr := range mp.links {
		used := false
		for _, c := range mp.copiers {
			used = used || c.link == lr
		}
		if !used {
			lr.conn.Close()
			delete(mp.links, name)
		}
	}
}

// updateSyncers runs an offset syncer for every link whose offsets this broker syncs.
func (mp *mirrorPool) updateSyncers(im *metadata.Image) {
	for name, s := range mp.syncers {
		if l := im.Links[name]; l == nil || !sameLink(l, s.link) || !mp.m.syncsOffsets(im, l) {
			s.stop()
			delete(mp.syncers, name)
		}
	}
	for name, l := range im.Links {
		if mp.syncers[name] != nil || !mp.m.syncsOffsets(im, l) {
			continue
		}
		dial := mp.m.cfg.DialLink
		if dial == nil {
			dial = dialLink
		}
		src, err := dial(l)
		if err != nil {
			mp.m.lg.Error("cannot reach a cluster link's source for the offset sync", "link", name, "err", err)
			continue
		}
		dst, err := mp.m.dialSelf()
		if err != nil {
			src.Close()
			mp.m.lg.Error("cannot reach this cluster for the offset sync", "link", name, "err", err)
			continue
		}
		mp.syncers[name] = startOffsetSyncer(mp.m, l, src, dst)
	}
}

// close stops every copier and closes the links' connections.
func (mp *mirrorPool) close() {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	mp.closed = true
	for name, s := range mp.syncers {
		s.stop()
		delete(mp.syncers, name)
	}
	for tp, c := range mp.copiers {
		c.stop()
		delete(mp.copiers, tp)
	}
	for name, lr := range mp.links {
		lr.conn.Close()
		delete(mp.links, name)
	}
}

// MirrorLag is one mirror partition's position against its source, as its destination
// leader last saw it.
type MirrorLag struct {
	Topic     string
	Partition int32
	Link      string
	// SourceEnd is the source's high watermark at the last fetch (-1 before one), End
	// this replica's log end offset; Records = SourceEnd - End (at least 0).
	SourceEnd, End, Records int64
	// Bytes is the source's bytes not yet copied, as far as the last fetch tells (the
	// size of what it returned beyond what was appended; 0 when caught up).
	Bytes int64
	// CaughtUp is when this replica last held everything the source had committed;
	// LastFetch when it last heard from the source (zero: never).
	CaughtUp, LastFetch time.Time
}

// MirrorLags reports the mirror partitions this broker leads.
func (m *Manager) MirrorLags() []MirrorLag {
	m.mirrors.mu.Lock()
	defer m.mirrors.mu.Unlock()
	out := make([]MirrorLag, 0, len(m.mirrors.copiers))
	for _, c := range m.mirrors.copiers {
		out = append(out, c.lag())
	}
	return out
}

// copier copies one source partition into the mirror partition this broker leads.
type copier struct {
	m    *Manager
	link *linkRuntime
	tp   partition.TopicPartition
	t    mirrorTarget

	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	mirror    *metadata.MirrorTopic // newest state applied (its epoch floor)
	floor     int32                 // the floor this copier knows committed
	sourceEnd int64
	pending   int64
	caughtUp  time.Time
	lastFetch time.Time

	configErr string // the last config sync's error, logged once; only run touches it
}

func startCopier(m *Manager, lr *linkRuntime, tp partition.TopicPartition, t mirrorTarget) *copier {
	ctx, cancel := context.WithCancel(m.ctx)
	c := &copier{m: m, link: lr, tp: tp, t: t, cancel: cancel, done: make(chan struct{}), mirror: t.mirror,
		floor: floorOf(t.mirror, tp.Index), sourceEnd: -1}
	go func() {
		defer close(c.done)
		c.run(ctx)
	}()
	return c
}

func floorOf(mt *metadata.MirrorTopic, idx int32) int32 {
	if int(idx) < len(mt.SourceEpochs) {
		return mt.SourceEpochs[idx]
	}
	return -1
}

func (c *copier) stop() {
	c.cancel()
	<-c.done
}

func (c *copier) setMirror(mt *metadata.MirrorTopic) {
	c.mu.Lock()
	c.mirror = mt
	c.floor = max(c.floor, floorOf(mt, c.tp.Index))
	c.mu.Unlock()
}

func (c *copier) lag() MirrorLag {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := MirrorLag{Topic: c.tp.Topic, Partition: c.tp.Index, Link: c.link.link.Name, SourceEnd: c.sourceEnd,
		End: c.t.p.LogEndOffset(), Bytes: c.pending, CaughtUp: c.caughtUp, LastFetch: c.lastFetch}
	if c.sourceEnd >= 0 {
		l.Records = max(0, c.sourceEnd-l.End)
	}
	return l
}

// sourcePartition is where the source partition is served, from the source's metadata.
type sourcePartition struct {
	leader      int32
	leaderEpoch int32
	topicID     [16]byte
	partitions  int
}

// errSourceMoved asks for a metadata refresh before the next fetch.
var errSourceMoved = errors.New("the source partition's leader moved")

func (c *copier) run(ctx context.Context) {
	backoff := c.m.cfg.ReplicaFetchBackoff
	var src *sourcePartition
	var lastLookup time.Time
	var lastErr string
	for ctx.Err() == nil {
		now := c.m.now()
		// Partition 0's copier also follows the source's partition count and configs,
		// re-reading them every topic.config.sync.ms.
		if src == nil || (c.tp.Index == 0 && now.Sub(lastLookup) >= time.Duration(c.link.link.ConfigInt(metadata.LinkTopicSyncMs))*time.Millisecond) {
			s, err := c.lookup(ctx)
			lastLookup = now
			if err != nil {
				if msg := err.Error(); msg != lastErr && ctx.Err() == nil {
					c.m.lg.Warn("mirror cannot find its source partition", "partition", c.tp, "link", c.link.link.Name, "err", err)
					lastErr = msg
				}
				c.sleep(ctx, backoff)
				continue
			}
			src = s
			if c.tp.Index == 0 {
				c.followPartitionCount(ctx, s.partitions)
				c.syncConfigs(ctx)
			}
		}
		if w := c.link.quota.wait(c.m.now()); w > 0 {
			c.sleep(ctx, w)
			continue
		}
		err := c.fetchOnce(ctx, src)
		switch {
		case err == nil:
			lastErr = ""
		case errors.Is(err, errSourceMoved):
			src = nil
			c.sleep(ctx, 50*time.Millisecond)
		case ctx.Err() != nil:
			return
		default:
			if errors.Is(err, partition.ErrNotMirroring) {
				// The replica lost the leadership or the mirror was promoted: the next
				// metadata stops this copier.
				c.sleep(ctx, backoff)
				continue
			}
			if msg := err.Error(); msg != lastErr {
				c.m.lg.Warn("mirror fetch failed", "partition", c.tp, "link", c.link.link.Name, "err", err)
				lastErr = msg
			}
			src = nil
			c.sleep(ctx, backoff)
		}
	}
}

func (c *copier) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-c.m.after(d):
	}
}

func (c *copier) lookup(ctx context.Context) (*sourcePartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(c.t.mirror.SourceTopic)
	req.Topics = append(req.Topics, t)
	resp, err := c.link.conn.Request(ctx, -1, req)
	if err != nil {
		return nil, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 {
		return nil, fmt.Errorf("source answered metadata for %d topics", len(mr.Topics))
	}
	mt := mr.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return nil, fmt.Errorf("source topic %q: %w", c.t.mirror.SourceTopic, err)
	}
	s := &sourcePartition{leader: -1, topicID: mt.TopicID, partitions: len(mt.Partitions)}
	for _, p := range mt.Partitions {
		if p.Partition == c.tp.Index {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
				return nil, fmt.Errorf("source partition %s-%d: %w", c.t.mirror.SourceTopic, p.Partition, err)
			}
			s.leader, s.leaderEpoch = p.Leader, p.LeaderEpoch
		}
	}
	if s.leader < 0 {
		return nil, fmt.Errorf("source partition %s-%d has no leader", c.t.mirror.SourceTopic, c.tp.Index)
	}
	return s, nil
}

// followPartitionCount adds the destination partitions the source has gained.
func (c *copier) followPartitionCount(ctx context.Context, n int) {
	t := c.m.Image().Topic(c.tp.Topic)
	if t == nil || n <= len(t.Partitions) {
		return
	}
	errs := c.m.store.CreatePartitions(ctx, []metadata.PartitionsSpec{{Topic: c.tp.Topic, Count: int32(n)}}, false)
	if err := errors.Join(errs...); err != nil && !errors.Is(err, kerr.InvalidPartitions) {
		c.m.lg.Warn("mirror cannot follow its source's partition count", "topic", c.tp.Topic, "partitions", n, "err", err)
		return
	}
	c.m.lg.Info("mirror topic follows its source's partition count", "topic", c.tp.Topic, "partitions", n)
}

// syncConfigs makes the mirror's configs that matter to consumers
// (metadata.MirroredConfigs) those set on the source topic: creating the mirror copied
// them once, and the source's may change later (a retention change is the common one). A
// config the source no longer sets reverts to the destination's default; configs outside
// MirroredConfigs are the destination's own and left alone. Failures are logged once
// each and retried at the next sync.
func (c *copier) syncConfigs(ctx context.Context) {
	want, err := c.sourceConfigs(ctx)
	if err == nil {
		err = c.applyConfigs(ctx, want)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != "" && msg != c.configErr && ctx.Err() == nil {
		c.m.lg.Warn("mirror cannot sync its source's topic configs", "topic", c.tp.Topic, "link", c.link.link.Name, "err", err)
	}
	c.configErr = msg
}

func (c *copier) sourceConfigs(ctx context.Context) (map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = c.t.mirror.SourceTopic
	req.Resources = append(req.Resources, res)
	resp, err := c.link.conn.Request(ctx, -1, req)
	if err != nil {
		return nil, fmt.Errorf("source DescribeConfigs: %w", err)
	}
	dr := resp.(*kmsg.DescribeConfigsResponse)
	if len(dr.Resources) != 1 {
		return nil, fmt.Errorf("source answered DescribeConfigs for %d resources", len(dr.Resources))
	}
	if err := kerr.ErrorForCode(dr.Resources[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("source DescribeConfigs of %q: %w", c.t.mirror.SourceTopic, err)
	}
	// As at creation (server/restproxy): only what is set on the topic itself, not the
	// source brokers' defaults, which the destination has its own of.
	want := map[string]string{}
	for _, cfg := range dr.Resources[0].Configs {
		if cfg.Value != nil && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && slices.Contains(metadata.MirroredConfigs, cfg.Name) {
			want[cfg.Name] = *cfg.Value
		}
	}
	return want, nil
}

func (c *copier) applyConfigs(ctx context.Context, want map[string]string) error {
	t := c.m.Image().Topic(c.tp.Topic)
	if t == nil {
		return nil
	}
	var ops []metadata.ConfigOp
	for _, k := range metadata.MirroredConfigs {
		v, set := want[k]
		have, has := t.Configs[k]
		switch {
		case set && (!has || have != v):
			ops = append(ops, metadata.ConfigOp{Name: k, Value: &v, Op: metadata.ConfigSet})
		case !set && has:
			ops = append(ops, metadata.ConfigOp{Name: k, Op: metadata.ConfigDelete})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if err := c.m.store.AlterTopicConfigs(ctx, c.tp.Topic, ops, true, false); err != nil {
		return fmt.Errorf("alter the mirror's configs: %w", err)
	}
	c.m.lg.Info("mirror topic follows its source's configs", "topic", c.tp.Topic, "link", c.link.link.Name, "changes", len(ops))
	return nil
}

// fetchOnce fetches from the source leader once and applies what it answers.
func (c *copier) fetchOnce(ctx context.Context, src *sourcePartition) error {
	p := c.t.p
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(c.m.cfg.ReplicaFetchWaitMax / time.Millisecond)
	req.MinBytes = 1
	maxBytes := int32(c.link.link.ConfigInt(metadata.LinkFetchMaxBytes))
	req.MaxBytes = maxBytes
	req.IsolationLevel = 0 // read_uncommitted: aborted batches and markers are copied too
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = c.t.mirror.SourceTopic, src.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = c.tp.Index
	rp.CurrentLeaderEpoch = src.leaderEpoch
	end := p.LogEndOffset()
	rp.FetchOffset = end
	rp.LastFetchedEpoch = p.LatestEpoch()
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	resp, err := c.link.conn.Request(ctx, src.leader, req)
	if err != nil {
		return err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return fmt.Errorf("source fetch: %w", err)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return fmt.Errorf("source answered a fetch of one partition with %d topics", len(fr.Topics))
	}
	part := fr.Topics[0].Partitions[0]
	now := c.m.now()
	c.mu.Lock()
	c.lastFetch = now
	c.mu.Unlock()
	switch err := kerr.ErrorForCode(part.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.UnknownLeaderEpoch),
		errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.KafkaStorageError):
		return fmt.Errorf("%w: %w", errSourceMoved, err)
	case errors.Is(err, kerr.OffsetOutOfRange):
		return c.outOfRange(ctx, src, end)
	default:
		return fmt.Errorf("source partition %s-%d: %w", c.t.mirror.SourceTopic, c.tp.Index, err)
	}
	if part.DivergingEpoch.EndOffset >= 0 || part.DivergingEpoch.Epoch >= 0 {
		return c.diverged(part.DivergingEpoch.Epoch, part.DivergingEpoch.EndOffset, end)
	}
	if len(part.RecordBatches) == 0 {
		c.noteProgress(part.HighWatermark, 0)
		return nil
	}
	if top := maxBatchEpoch(part.RecordBatches); top > c.currentFloor() {
		if err := c.raiseFloor(ctx, top); err != nil {
			return err
		}
	}
	n, err := p.AppendMirrored(part.RecordBatches, c.t.leaderEpoch, c.currentFloor())
	c.link.quota.record(n, c.m.now())
	if n > 0 {
		c.link.copiedMu.Lock()
		c.link.copied += int64(n)
		c.link.copiedMu.Unlock()
	}
	c.noteProgress(part.HighWatermark, int64(len(part.RecordBatches)-n))
	if err != nil && !errors.Is(err, partition.ErrEpochAboveFloor) {
		return fmt.Errorf("appending the source's batches at %d: %w", end, err)
	}
	return nil
}

func (c *copier) noteProgress(sourceHW, pending int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sourceEnd, c.pending = sourceHW, max(0, pending)
	if c.t.p.LogEndOffset() >= sourceHW {
		c.caughtUp = c.m.now()
		c.pending = 0
	}
}

func (c *copier) currentFloor() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.floor
}

// raiseFloor commits a higher source epoch floor before any batch of that epoch is
// appended (see the package notes on promotion).
func (c *copier) raiseFloor(ctx context.Context, epoch int32) error {
	ls, ok := c.m.store.(metadata.LinkStore)
	if !ok {
		return errors.New("the metadata store cannot record mirror epochs")
	}
	if err := ls.RaiseMirrorEpoch(ctx, c.tp.Topic, c.tp.Index, epoch); err != nil {
		return fmt.Errorf("raising the mirror's source epoch floor to %d: %w", epoch, err)
	}
	c.mu.Lock()
	c.floor = max(c.floor, epoch)
	c.mu.Unlock()
	return nil
}

// maxBatchEpoch is the largest partition leader epoch among the whole batches of a
// fetch response.
func maxBatchEpoch(b []byte) int32 {
	top := int32(-1)
	for len(b) >= shalelog.BatchHeaderSize {
		h, err := shalelog.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			break
		}
		top = max(top, h.PartitionLeaderEpoch)
		b = b[h.Size():]
	}
	return top
}

// diverged truncates to where this log and the source's agree: the end of the
// diverging epoch on the source, or of the largest epoch not above it here, whichever is
// smaller (as a follower does, fetcher.truncateDiverged).
func (c *copier) diverged(epoch int32, sourceEnd, end int64) error {
	target := sourceEnd
	if epoch >= 0 {
		if _, localEnd := c.t.p.EndOffsetForEpoch(epoch); localEnd >= 0 {
			target = min(target, localEnd)
		}
	}
	target = min(target, end)
	c.m.lg.Warn("mirror diverged from its source; truncating", "partition", c.tp, "epoch", epoch, "source_end_offset", sourceEnd, "offset", target)
	return c.t.p.TruncateMirror(target, c.t.leaderEpoch, c.m.now())
}

// outOfRange handles OFFSET_OUT_OF_RANGE: the source's log starts after this one ends
// (restart there), or ends before it (truncate: the source lost records).
func (c *copier) outOfRange(ctx context.Context, src *sourcePartition, end int64) error {
	start, err := c.listOffset(ctx, src, -2)
	if err != nil {
		return err
	}
	if end < start {
		return c.t.p.RestartMirrorAt(start, c.t.leaderEpoch)
	}
	latest, err := c.listOffset(ctx, src, -1)
	if err != nil {
		return err
	}
	if end > latest {
		c.m.lg.Warn("mirror is ahead of its source's log end; truncating", "partition", c.tp, "offset", latest, "end", end)
		return c.t.p.TruncateMirror(latest, c.t.leaderEpoch, c.m.now())
	}
	return nil
}

func (c *copier) listOffset(ctx context.Context, src *sourcePartition, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = c.t.mirror.SourceTopic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.Timestamp = c.tp.Index, src.leaderEpoch, ts
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := c.link.conn.Request(ctx, src.leader, req)
	if err != nil {
		return 0, err
	}
	lr := resp.(*kmsg.ListOffsetsResponse)
	if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 {
		return 0, errors.New("source answered ListOffsets for another partition count")
	}
	rp := lr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, fmt.Errorf("%w: source ListOffsets: %w", errSourceMoved, err)
	}
	return rp.Offset, nil
}

// mirrorMetrics reports the mirror partitions led here and the links' traffic at scrape
// time.
type mirrorMetrics struct {
	m                          *Manager
	lag, lagSeconds, copied    *prometheus.Desc
	syncAge, sourceEnd, fetchd *prometheus.Desc
}

func newMirrorMetrics(m *Manager) *mirrorMetrics {
	labels := []string{"link", "topic", "partition"}
	return &mirrorMetrics{m: m,
		lag: prometheus.NewDesc("shale_mirror_partition_lag_records",
			"Records a mirror partition led here lacks of its source (the source's high watermark at the last fetch minus this log's end).", labels, nil),
		lagSeconds: prometheus.NewDesc("shale_mirror_partition_lag_seconds",
			"Seconds since a mirror partition led here last held everything its source had committed (0 while caught up).", labels, nil),
		sourceEnd: prometheus.NewDesc("shale_mirror_partition_source_end_offset",
			"The source partition's high watermark at a mirror's last fetch.", labels, nil),
		fetchd: prometheus.NewDesc("shale_mirror_partition_seconds_since_fetch",
			"Seconds since a mirror partition led here last heard from its source.", labels, nil),
		copied: prometheus.NewDesc("shale_mirror_bytes_copied_total",
			"Bytes this broker appended to mirror partitions from a link's source since the link was last (re)connected here.", []string{"link"}, nil),
		syncAge: prometheus.NewDesc("shale_mirror_offset_sync_age_seconds",
			"Seconds since this broker last completed a consumer offset sync of a link (only on the broker that syncs it; -1 before the first).", []string{"link"}, nil),
	}
}

func (mm *mirrorMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mm.lag, mm.lagSeconds, mm.sourceEnd, mm.fetchd, mm.copied, mm.syncAge} {
		ch <- d
	}
}

func (mm *mirrorMetrics) Collect(ch chan<- prometheus.Metric) {
	now := mm.m.now()
	for _, l := range mm.m.MirrorLags() {
		lv := []string{l.Link, l.Topic, strconv.Itoa(int(l.Partition))}
		if l.SourceEnd >= 0 {
			ch <- prometheus.MustNewConstMetric(mm.lag, prometheus.GaugeValue, float64(l.Records), lv...)
			ch <- prometheus.MustNewConstMetric(mm.sourceEnd, prometheus.GaugeValue, float64(l.SourceEnd), lv...)
		}
		if !l.CaughtUp.IsZero() {
			behind := 0.0
			if l.Records > 0 {
				behind = now.Sub(l.CaughtUp).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(mm.lagSeconds, prometheus.GaugeValue, behind, lv...)
		}
		if !l.LastFetch.IsZero() {
			ch <- prometheus.MustNewConstMetric(mm.fetchd, prometheus.GaugeValue, now.Sub(l.LastFetch).Seconds(), lv...)
		}
	}
	mp := mm.m.mirrors
	mp.mu.Lock()
	defer mp.mu.Unlock()
	for name, lr := range mp.links {
		lr.copiedMu.Lock()
		n := lr.copied
		lr.copiedMu.Unlock()
		ch <- prometheus.MustNewConstMetric(mm.copied, prometheus.CounterValue, float64(n), name)
	}
	for name, s := range mp.syncers {
		age := s.age()
		v := -1.0
		if age >= 0 {
			v = age.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(mm.syncAge, prometheus.GaugeValue, v, name)
	}
}
