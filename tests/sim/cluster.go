package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"

	pb "github.com/shalelog/shale/controller/proto"
)

// Timings of the simulated cluster (virtual time).
const (
	sessionTimeout    = 2 * time.Second
	heartbeatInterval = 200 * time.Millisecond
	replicaLagMax     = 1500 * time.Millisecond
	fetchInterval     = 5 * time.Millisecond
	fetchTimeout      = 150 * time.Millisecond
	alterTimeout      = 500 * time.Millisecond
	produceTimeout    = 3 * time.Second
)

// errTimeout is the outcome of a request whose answer never came: it may or may not
// have been applied.
var errTimeout = fmt.Errorf("simulated timeout: %w", context.DeadlineExceeded)

// ctl is the controller quorum: the real metadata state machine in one linearizable log,
// the active controller's lease tracking of the brokers beside it, and failovers that
// rebuild both from the log.
type ctl struct {
	w        *World
	m        *controller.Machine
	lastSeen map[int32]time.Time
	// fencedAt is the metadata offset of each fenced broker's fencing, as the active
	// controller knows it (a new one takes its own start): controller.ReadyToUnfence.
	fencedAt map[int32]uint64
	// downUntil: a failover in progress; requests until then are lost.
	downUntil time.Time
	// history of images, by metadata offset, for delayed deliveries.
	images []*metadata.Image
}

func newCtl(w *World) *ctl {
	c := &ctl{w: w, m: controller.NewMachine(slog.New(slog.DiscardHandler)), lastSeen: map[int32]time.Time{}, fencedAt: map[int32]uint64{}}
	c.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 100, ClusterId: "sim"}}})
	return c
}

func (c *ctl) available() bool { return !c.w.s.now.Before(c.downUntil) }

func (c *ctl) apply(rec *pb.Record) error {
	err := c.m.Apply(rec)
	im := c.m.Image()
	if n := len(c.images); n == 0 || c.images[n-1] != im {
		c.images = append(c.images, im)
	}
	return err
}

func (c *ctl) image() *metadata.Image { return c.m.Image() }

// failover elects a new active controller: the state machine is rebuilt from a snapshot
// and every broker's lease starts afresh, as a new KRaft controller grants them.
func (c *ctl) failover(down time.Duration) {
	n, err := c.m.Failover()
	if err != nil {
		c.w.violate("controller failover: %v", err)
		return
	}
	c.m = n
	c.downUntil = c.w.s.now.Add(down)
	for id := range c.lastSeen {
		c.lastSeen[id] = c.downUntil
	}
	// The new controller does not know where the fenced brokers were fenced: they must
	// catch up to its start.
	clear(c.fencedAt)
	im := c.image()
	for id, b := range im.Brokers {
		if b.Fenced {
			c.fencedAt[id] = im.Offset
		}
	}
	c.w.s.trace.add("controller failover, down for %v", down)
}

// tick expires the leases of brokers whose heartbeats stopped (FenceBrokers, which
// elects new leaders).
func (c *ctl) tick() {
	if !c.available() {
		return
	}
	im := c.image()
	var ids []int32
	var epochs []int64
	for _, id := range c.w.brokerIDs() {
		b, ok := im.Brokers[id]
		if !ok || b.Fenced {
			continue
		}
		if seen, ok := c.lastSeen[id]; !ok || c.w.s.now.Sub(seen) > sessionTimeout {
			ids, epochs = append(ids, id), append(epochs, b.Epoch)
		}
	}
	if len(ids) > 0 {
		err := c.apply(&pb.Record{Record: &pb.Record_FenceBrokers{FenceBrokers: &pb.FenceBrokersRecord{BrokerIds: ids, BrokerEpochs: epochs, Reason: "session expired"}}})
		if err == nil {
			for _, id := range ids {
				c.fencedAt[id] = c.image().Offset
			}
		}
		c.w.s.trace.add("controller fences %v (session expired): %v", ids, err)
	}
}

// heartbeat is a broker's heartbeat arriving: it renews the lease and unfences a broker
// that has caught up with its registration and its fencing. It returns whether the
// broker is fenced (or unknown under that epoch), as the heartbeat's answer says.
func (c *ctl) heartbeat(id int32, epoch int64, metadataOffset uint64) (fenced bool) {
	b, ok := c.image().Brokers[id]
	if !ok || b.Epoch != epoch {
		return true
	}
	c.lastSeen[id] = c.w.s.now
	if b.Fenced && controller.ReadyToUnfence(b.Epoch, c.fencedAt[id], metadataOffset) {
		err := c.apply(&pb.Record{Record: &pb.Record_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{BrokerId: id, BrokerEpoch: epoch}}})
		if err == nil {
			delete(c.fencedAt, id)
		}
		c.w.s.trace.add("controller unfences broker %d epoch %d: %v", id, epoch, err)
	}
	return c.image().Brokers[id].Fenced
}

// register is RegisterBroker; it returns the broker epoch.
func (c *ctl) register(id int32, incarnation string) (int64, error) {
	if !c.available() {
		return 0, errTimeout
	}
	err := c.apply(&pb.Record{Record: &pb.Record_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		BrokerId: id, Incarnation: incarnation, Rack: "",
		Listeners: []*pb.Listener{{Name: "PLAINTEXT", Host: fmt.Sprintf("broker-%d", id), Port: 9092, SecurityProtocol: "PLAINTEXT"}}}}})
	if err != nil {
		return 0, err
	}
	c.lastSeen[id] = c.w.s.now
	return c.image().Brokers[id].Epoch, nil
}

// alterPartition is AlterPartition as the active controller serves it: a stale request
// is answered from a dry run, a current one is committed.
func (c *ctl) alterPartition(broker int32, epoch int64, req metadata.AlterPartitionRequest) (metadata.Partition, error) {
	rec := &pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: broker, BrokerEpoch: epoch, Topic: req.Topic, Partition: req.Partition,
		LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, NewIsr: req.NewISR}}}
	if err := c.m.DryRun(rec); err != nil {
		return metadata.Partition{}, err
	}
	if err := c.apply(rec); err != nil {
		return metadata.Partition{}, err
	}
	p := c.image().Partition(req.Topic, req.Partition)
	if p == nil {
		return metadata.Partition{}, kerr.UnknownTopicOrPartition
	}
	return *p, nil
}

// broker is one simulated broker process: the real replica manager over a real log
// directory, driven by the scheduler.
type broker struct {
	w   *World
	id  int32
	dir string
	up  bool
	// registering: a registration retry is pending.
	registering bool
	incarnation int
	epoch       int64
	mgr         *replication.Manager
	store       *brokerStore
	clock       *brokerClock
	// cutFromController: its requests to the controllers and their answers are lost,
	// and no metadata reaches it.
	cutFromController bool
	// cut lists the brokers it cannot reach (both ways).
	cut map[int32]bool
	// produces waiting for their ISR.
	waiting []*pendingProduce
	// purges are DeleteRecords waiting for the followers' log starts.
	purges []*pendingPurge
	// disk tracks what the broker's logs made durable, for power cuts.
	disk *shalelog.Faults
}

type brokerClock struct {
	w    *World
	skew time.Duration
}

func (c *brokerClock) Now() time.Time { return c.w.s.now.Add(c.skew) }

func (b *broker) name() string { return fmt.Sprintf("broker %d", b.id) }

// start registers the broker and opens its replica manager on its directory, unless it
// is up or already retrying its registration (a restart and the heal may both ask).
func (b *broker) start() {
	if b.up || b.registering {
		return
	}
	b.register()
}

func (b *broker) register() {
	b.registering = false
	b.incarnation++
	epoch, err := b.w.ctl.register(b.id, fmt.Sprintf("b%d-i%d", b.id, b.incarnation))
	if err != nil {
		b.w.s.trace.add("%s registration failed: %v; retrying", b.name(), err)
		b.registering = true
		b.w.s.after(100*time.Millisecond, "register", b.register)
		return
	}
	b.epoch = epoch
	b.store = &brokerStore{b: b, image: b.w.ctl.image(), fenced: true}
	mgr, err := replication.NewManager(replication.Config{
		NodeID:              b.id,
		LogDir:              b.dir,
		ReplicaLagTimeMax:   replicaLagMax,
		ReplicaFetchWaitMax: 0,
		ReplicaFetchBackoff: 50 * time.Millisecond,
		RecoveryThreads:     1,
		// Few mappings: 1 KiB segments add up to thousands, each a descriptor while mapped.
		MaxMappedSegments: 32,
		CleanerDisabled:   true,
		Logger:            b.w.logger.With("broker", b.id),
		Clock:             b.clock,
		Driven:            true,
		DiskFaults:        b.disk,
		LogBackground:     logBackground{b},
		Dial:              b.dial,
		Spawn:             b.spawn,
	}, b.store)
	if err != nil {
		b.w.violate("%s cannot start: %v", b.name(), err)
		return
	}
	b.mgr, b.up = mgr, true
	b.w.s.trace.add("%s started, epoch %d (incarnation %d)", b.name(), epoch, b.incarnation)
	inc := b.incarnation
	b.loop(inc, "heartbeat", heartbeatInterval, b.heartbeat)
	b.loop(inc, "fetch", fetchInterval, b.fetch)
	b.loop(inc, "isr check", 100*time.Millisecond, b.mgr.CheckISR)
	b.loop(inc, "metadata", 0, b.pullMetadata)
}

// loop runs fn every d (with jitter) while this incarnation lives.
func (b *broker) loop(inc int, name string, d time.Duration, fn func()) {
	var tick func()
	tick = func() {
		if !b.up || b.incarnation != inc {
			return
		}
		fn()
		next := d
		if name == "metadata" {
			next = b.w.metadataDelay()
		}
		b.w.s.after(next+b.w.s.between(0, d/4+time.Millisecond), name, tick)
	}
	b.w.s.after(b.w.s.between(0, d+time.Millisecond), name, tick)
}

// crash kills the process: nothing more is written; the page cache keeps what was.
func (b *broker) crash() {
	if !b.up {
		return
	}
	b.up = false
	b.mgr.Crash()
	b.mgr = nil
	for _, pp := range b.waiting {
		pp.lost = true
	}
	b.waiting, b.purges = nil, nil // (their answers are lost with the process)
	b.w.s.trace.add("%s crashed", b.name())
}

// losePower puts the crashed broker's disk back to what it had made durable: every
// write since the last fsync of its file, and every file created, renamed or removed
// since the last fsync of its directory, undone (log.Faults.PowerLoss).
func (b *broker) losePower() {
	n, err := b.disk.PowerLoss()
	if err != nil {
		b.w.violate("%s power loss: %v", b.name(), err)
		return
	}
	b.w.stats.PowerLosses++
	b.w.s.trace.add("%s loses power: %d of %d tracked files back to what was fsynced", b.name(), n, b.disk.TrackedFiles())
}

// heartbeat renews the broker's lease as controller.BrokerClient does: the answer says
// whether the broker is fenced, and an unfenced one holds its lease for the session
// timeout from when the heartbeat was sent, so that it lapses no later than the
// controller's view of the session.
func (b *broker) heartbeat() {
	epoch, offset, sent := b.epoch, b.store.image.Offset, b.clock.Now()
	fenced := true
	b.w.toController(b, "heartbeat", func() {
		fenced = b.w.ctl.heartbeat(b.id, epoch, offset)
	}, func() {
		if b.epoch != epoch {
			return
		}
		b.store.fenced = fenced
		if fenced {
			b.store.leaseUntil = time.Time{}
		} else {
			b.store.leaseUntil = sent.Add(sessionTimeout)
		}
	})
}

// pullMetadata delivers the controller's metadata to the broker: the newest image, or
// one older than it (a delayed stream), never one older than what the broker has. An
// image delivered whole stands for every delta it coalesces.
func (b *broker) pullMetadata() {
	if b.cutFromController || !b.w.ctl.available() {
		return
	}
	imgs := b.w.ctl.images
	cur := b.store.image.Offset
	first := len(imgs) - 1
	for first > 0 && imgs[first-1].Offset > cur {
		first--
	}
	if imgs[len(imgs)-1].Offset <= cur {
		return
	}
	im := imgs[len(imgs)-1]
	if n := len(imgs) - first; n > 1 && b.w.s.chance(b.w.f.metadataLag) {
		im = imgs[first+b.w.s.rng.IntN(n)]
	}
	b.store.image = im
	b.mgr.ApplyImage(im)
}

// fetch sends every replica fetch the manager has ready to its leader.
func (b *broker) fetch() {
	for _, df := range b.mgr.DrivenFetches() {
		b.w.fetchRound(b, df)
	}
}

// spawn runs an ISR proposal as a request that leaves the broker later.
func (b *broker) spawn(fn func()) {
	inc := b.incarnation
	b.w.s.after(b.w.s.between(0, 20*time.Millisecond), "isr proposal", func() {
		if b.up && b.incarnation == inc {
			fn()
		}
	})
}

// logBackground runs the logs' deferred work (syncing and trimming rolled segments,
// moving the recovery point, unlinking deleted segments) as events of the scheduler, a
// little after the roll or deletion that asked for it: a crash or power cut in between
// finds a rolled segment not yet synced or a deleted one renamed but not yet unlinked.
// After a crash the work of the old incarnation's logs is dropped, as the process's would
// be (an abandoned log also ignores it).
type logBackground struct{ b *broker }

func (lb logBackground) Go(fn func()) {
	b := lb.b
	inc := b.incarnation
	b.w.s.after(b.w.s.between(0, 20*time.Millisecond), "log background", func() {
		if b.up && b.incarnation == inc {
			fn()
		}
	})
}

// dial is the fetchers' connection to a leader: ListOffsets answered synchronously by
// the leader as it is now, when the link is up.
func (b *broker) dial(leader metadata.Broker) (replication.BrokerConn, error) {
	return &simConn{w: b.w, from: b, to: leader.ID}, nil
}

type simConn struct {
	w    *World
	from *broker
	to   int32
}

func (c *simConn) Close() {}

func (c *simConn) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	l := c.w.broker(c.to)
	if l == nil || !l.up || !c.w.linked(c.from, l) || c.w.s.chance(c.w.f.drop) {
		return nil, errTimeout
	}
	switch r := req.(type) {
	case *kmsg.ListOffsetsRequest:
		return l.serveListOffsets(r), nil
	}
	return nil, fmt.Errorf("simulated connection: unsupported request %T", req)
}

// serveListOffsets answers a replica's ListOffsets as the protocol layer does: through the
// replica manager, which decides the fencing and the read bound.
func (b *broker) serveListOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, lp := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = lp.Partition
			o, err := b.mgr.ListOffset(replication.ListOffsetsPartition{Topic: t.Topic, Index: lp.Partition,
				CurrentLeaderEpoch: lp.CurrentLeaderEpoch, Timestamp: lp.Timestamp, Follower: req.ReplicaID >= 0})
			rp.ErrorCode, rp.Offset, rp.Timestamp, rp.LeaderEpoch = kafkaCode(err), o.Offset, o.Timestamp, o.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// serveFetch answers a replica's Fetch as the protocol layer does at v13+: topics by id
// through the applied metadata, each partition through the replica manager.
func (b *broker) serveFetch(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	im := b.mgr.Image()
	who := replication.Reader{ReplicaID: req.ReplicaState.ID, BrokerEpoch: req.ReplicaState.Epoch}
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := ""
		for n, tt := range im.Topics {
			if tt.ID == t.TopicID {
				name = n
			}
		}
		for _, fp := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			if name == "" {
				rp.ErrorCode = kerr.UnknownTopicID.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			f := replication.FetchRequestPartition(&fp)
			f.Topic, f.TopicID, f.MinOne = name, t.TopicID, true
			res := b.mgr.Fetch(who, f)
			rp.ErrorCode = kafkaCode(res.Err)
			rp.HighWatermark, rp.LogStartOffset, rp.LastStableOffset = res.HighWatermark, res.LogStartOffset, res.LastStableOffset
			rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch, res.DivergingEndOffset
			rp.RecordBatches = viewBytes(res.View)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// brokerStore is the metadata.Store a simulated broker sees: the images delivered to it
// and its requests to the controller through the simulated network.
type brokerStore struct {
	b     *broker
	image *metadata.Image
	// fenced and leaseUntil are what the last heartbeat answer said.
	fenced     bool
	leaseUntil time.Time
}

var errNotSimulated = errors.New("not simulated")

func (s *brokerStore) Current() *metadata.Image { return s.image }
func (s *brokerStore) Watch(ctx context.Context) <-chan *metadata.Image {
	ch := make(chan *metadata.Image)
	close(ch)
	return ch
}
func (s *brokerStore) LeaseValid() bool {
	return !s.fenced && s.b.clock.Now().Before(s.leaseUntil)
}
func (s *brokerStore) Fenced() bool       { return s.fenced }
func (s *brokerStore) BrokerEpoch() int64 { return s.b.epoch }
func (s *brokerStore) CreateTopics(context.Context, []metadata.TopicSpec, bool) []metadata.TopicResult {
	return nil
}
func (s *brokerStore) DeleteTopics(context.Context, []string) []error { return nil }
func (s *brokerStore) CreatePartitions(context.Context, []metadata.PartitionsSpec, bool) []error {
	return nil
}
func (s *brokerStore) AlterTopicConfigs(context.Context, string, []metadata.ConfigOp, bool, bool) error {
	return errNotSimulated
}

// AlterPartition reaches the controller through the simulated network, synchronously:
// the request may be lost (not applied), applied with its answer lost, applied twice
// (a retry delivered late) or held in flight to be applied after the broker gave up on
// it. Each lost answer is a timeout: possibly applied.
func (s *brokerStore) AlterPartition(_ context.Context, req metadata.AlterPartitionRequest) (metadata.Partition, error) {
	w, b := s.b.w, s.b
	epoch := b.epoch
	if b.cutFromController || !w.ctl.available() || w.s.chance(w.f.drop) {
		w.s.trace.add("%s AlterPartition %s-%d isr %v: request lost", b.name(), req.Topic, req.Partition, req.NewISR)
		return metadata.Partition{}, errTimeout
	}
	if w.s.chance(w.f.delay) {
		d := w.s.between(alterTimeout, 3*alterTimeout)
		w.s.trace.add("%s AlterPartition %s-%d isr %v: delayed %v, broker times out", b.name(), req.Topic, req.Partition, req.NewISR, d)
		w.s.after(d, "late AlterPartition", func() {
			_, err := w.ctl.alterPartition(b.id, epoch, req)
			w.s.trace.add("late AlterPartition %s-%d isr %v from broker %d applied: %v", req.Topic, req.Partition, req.NewISR, b.id, err)
		})
		return metadata.Partition{}, errTimeout
	}
	p, err := w.ctl.alterPartition(b.id, epoch, req)
	w.s.trace.add("%s AlterPartition %s-%d isr %v (epochs %d/%d): %v", b.name(), req.Topic, req.Partition, req.NewISR, req.LeaderEpoch, req.PartitionEpoch, err)
	if w.s.chance(w.f.dup) {
		w.s.after(w.s.between(0, alterTimeout), "duplicate AlterPartition", func() {
			_, err := w.ctl.alterPartition(b.id, epoch, req)
			w.s.trace.add("duplicate AlterPartition %s-%d isr %v from broker %d: %v", req.Topic, req.Partition, req.NewISR, b.id, err)
		})
	}
	if w.s.chance(w.f.drop) {
		w.s.trace.add("%s AlterPartition answer lost", b.name())
		return metadata.Partition{}, errTimeout
	}
	return p, err
}
func (s *brokerStore) AllocateProducerIDs(context.Context) (int64, int32, error) {
	return 0, 0, errNotSimulated
}
func (s *brokerStore) ElectLeaders(context.Context, bool, map[string][]int32) (map[string]map[int32]error, error) {
	return nil, errNotSimulated
}
func (s *brokerStore) AlterPartitionReassignments(context.Context, []metadata.Reassignment) ([]error, error) {
	return nil, errNotSimulated
}
func (s *brokerStore) CommitOffsets(context.Context, string, metadata.GroupFence, []metadata.CommittedOffset) error {
	return errNotSimulated
}
func (s *brokerStore) FetchOffsets(context.Context, string, map[string][]int32) ([]metadata.CommittedOffset, error) {
	return nil, errNotSimulated
}
func (s *brokerStore) DeleteGroupOffsets(context.Context, string, metadata.GroupFence, map[string][]int32) error {
	return errNotSimulated
}
func (s *brokerStore) ListOffsetGroups(context.Context) ([]string, error) {
	return nil, errNotSimulated
}
func (s *brokerStore) ReadOffsetsLog(context.Context, int32, int64, int32, time.Duration) (metadata.OffsetsLogSlice, error) {
	return metadata.OffsetsLogSlice{}, errNotSimulated
}
func (s *brokerStore) Close() error { return nil }

var _ metadata.Store = (*brokerStore)(nil)

func brokerDir(root string, id int32) string {
	return filepath.Join(root, fmt.Sprintf("broker-%d", id))
}
