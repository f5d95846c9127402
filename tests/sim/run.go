package sim

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"

	pb "github.com/shalelog/shale/controller/proto"
)

// faults are the probabilities and switches a seed draws for its run.
type faults struct {
	drop, delay, dup float64 // per message
	metadataLag      float64 // a delivery brings an older image than the newest
	metadataPause    bool    // brokers are cut off from the controllers for a while
	crashes          bool
	partitions       bool // links between brokers cut for a while
	clockJumps       bool
	retentionBytes   bool
	backfill         bool // records stamped in 2000, with retention.ms
	deleteRecords    bool
	recreate         bool // topic deleted and recreated under the same name
	failovers        bool
	reassign         bool // partitions moved between replica sets (KIP-455)
	// powerLoss: acknowledgements wait for fsyncs (flush.messages=1, or acks.all.fsync
	// when acksAllFsync), and half the crashes, and one blackout of every broker, lose
	// whatever was not fsynced: no acknowledged record may be lost.
	powerLoss    bool
	acksAllFsync bool
}

func drawFaults(s *scheduler) faults {
	pick := func(p float64) bool { return s.chance(p) }
	f := faults{
		metadataPause:  pick(0.5),
		crashes:        pick(0.5),
		partitions:     pick(0.4),
		clockJumps:     pick(0.3),
		retentionBytes: pick(0.35),
		backfill:       pick(0.2),
		deleteRecords:  pick(0.35),
		recreate:       pick(0.35),
		failovers:      pick(0.3),
	}
	if pick(0.7) {
		f.drop = s.rng.Float64() * 0.05
	}
	if pick(0.6) {
		f.delay = s.rng.Float64() * 0.15
	}
	if pick(0.4) {
		f.dup = s.rng.Float64() * 0.05
	}
	if pick(0.5) {
		f.metadataLag = s.rng.Float64() * 0.5
	}
	f.reassign = pick(0.3)
	f.powerLoss = pick(0.3)
	if f.powerLoss {
		f.acksAllFsync = pick(0.5)
	}
	return f
}

func (f faults) String() string {
	var on []string
	add := func(b bool, n string) {
		if b {
			on = append(on, n)
		}
	}
	add(f.metadataPause, "metadata-pause")
	add(f.crashes, "crashes")
	add(f.partitions, "partitions")
	add(f.clockJumps, "clock-jumps")
	add(f.retentionBytes, "retention.bytes")
	add(f.backfill, "backfill+retention.ms")
	add(f.deleteRecords, "delete-records")
	add(f.recreate, "recreate-topic")
	add(f.failovers, "controller-failover")
	add(f.reassign, "reassign")
	add(f.powerLoss && !f.acksAllFsync, "power-loss(flush.messages=1)")
	add(f.powerLoss && f.acksAllFsync, "power-loss(acks.all.fsync)")
	return fmt.Sprintf("drop=%.3f delay=%.3f dup=%.3f metadata-lag=%.2f %s", f.drop, f.delay, f.dup, f.metadataLag, strings.Join(on, " "))
}

// Options shape one run.
type Options struct {
	Seed uint64
	// Dir holds the brokers' log directories.
	Dir string
	// Chaos is how long faults are injected (virtual time); Settle how long the healed
	// cluster then runs before the final checks.
	Chaos, Settle time.Duration
	// Log, when set, receives the brokers' logs (for a replay).
	Log io.Writer
}

// Result is a run's outcome.
type Result struct {
	Seed       uint64
	Faults     string
	Violations []string
	Trace      string
	Stats      Stats
}

// Stats count what a run did.
type Stats struct {
	Events, Acked, Consumed, Crashes, Recreations, DeleteRecords, Reassignments int
	// DeposedReads counts consumer fetches served by a deposed leader that had not yet
	// heard so (see consumer.fetch).
	DeposedReads int
	// FollowerReads counts consumer fetches a follower served (KIP-392).
	FollowerReads int
	// PowerLosses counts brokers that lost power (a blackout counts each).
	PowerLosses int
}

// World is one simulated cluster and its clients.
type World struct {
	s       *scheduler
	f       faults
	opt     Options
	logger  *slog.Logger
	ctl     *ctl
	brokers []*broker
	topic   *topicGen
	gens    map[[16]byte]*topicGen
	// violations found so far.
	violations []string
	stats      Stats
	producers  []*producer
	consumers  []*consumer
	healing    bool
	nextPID    int64
	// lastLEO is each replica's log end offset when last seen up (a crashed broker's log
	// keeps it).
	lastLEO map[replicaKey]int64
}

type replicaKey struct {
	broker  int32
	topicID [16]byte
	index   int32
}

// topicGen is one incarnation of the simulated topic.
type topicGen struct {
	gen        int
	name       string
	id         [16]byte
	partitions int32
	configs    map[string]string
	// deleted[p] is the highest low watermark a DeleteRecords was answered with.
	deleted map[int32]int64
	acked   []record
	dead    bool
}

// record is one record as a client saw it.
type record struct {
	gen    int
	index  int32
	offset int64
	value  string
}

const (
	numBrokers    = 3
	numPartitions = 2
	topicName     = "sim"
)

// Run runs one seed.
func Run(opt Options) Result {
	tr := newTrace()
	w := &World{s: newScheduler(opt.Seed, tr), opt: opt, gens: map[[16]byte]*topicGen{}, lastLEO: map[replicaKey]int64{}}
	tr.clock = func() time.Time { return w.s.now }
	var out io.Writer = io.Discard
	if opt.Log != nil {
		out = opt.Log
	}
	w.logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w.f = drawFaults(w.s)
	if opt.Chaos == 0 {
		opt.Chaos = 20 * time.Second
	}
	if opt.Settle == 0 {
		opt.Settle = 12 * time.Second
	}
	w.opt = opt
	drawn := w.f.String()
	tr.add("seed %d faults: %s", opt.Seed, drawn)
	w.ctl = newCtl(w)
	for i := range numBrokers {
		id := int32(i + 1)
		b := &broker{w: w, id: id, dir: brokerDir(opt.Dir, id), cut: map[int32]bool{}, disk: &shalelog.Faults{}}
		// Tracked from the broker's first start, across every restart: what an earlier
		// incarnation wrote and never synced is still not durable.
		b.disk.TrackDurability()
		b.clock = &brokerClock{w: w}
		w.brokers = append(w.brokers, b)
		b.start()
	}
	w.every("controller tick", 100*time.Millisecond, w.ctl.tick)
	w.every("retention", 300*time.Millisecond, w.retention)
	w.every("hw checkpoint", 500*time.Millisecond, w.checkpoint)
	w.s.after(300*time.Millisecond, "create topic", func() { w.createTopic() })
	w.scheduleFaults(opt.Chaos)
	end := simStart.Add(opt.Chaos)
	w.s.after(opt.Chaos, "heal", w.heal)
	final := end.Add(opt.Settle)
	for w.s.step(final) {
		w.stats.Events++
		w.afterEvent()
		if len(w.violations) > 0 {
			break
		}
	}
	if len(w.violations) == 0 {
		w.finalChecks()
	}
	for _, b := range w.brokers {
		if b.up {
			b.crash()
		}
	}
	return Result{Seed: opt.Seed, Faults: drawn, Violations: w.violations, Trace: tr.String(), Stats: w.stats}
}

func (w *World) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	w.s.trace.add("VIOLATION: %s", v)
	w.violations = append(w.violations, v)
}

func (w *World) every(name string, d time.Duration, fn func()) {
	var tick func()
	tick = func() {
		fn()
		w.s.after(d, name, tick)
	}
	w.s.after(d, name, tick)
}

func (w *World) brokerIDs() []int32 {
	ids := make([]int32, len(w.brokers))
	for i, b := range w.brokers {
		ids[i] = b.id
	}
	return ids
}

func (w *World) broker(id int32) *broker {
	for _, b := range w.brokers {
		if b.id == id {
			return b
		}
	}
	return nil
}

func (w *World) linked(a, b *broker) bool { return !a.cut[b.id] && !b.cut[a.id] }

// metadataDelay is the pause between two metadata deliveries to a broker.
func (w *World) metadataDelay() time.Duration {
	if w.s.chance(w.f.delay) {
		return w.s.between(200*time.Millisecond, 1500*time.Millisecond)
	}
	return w.s.between(5*time.Millisecond, 60*time.Millisecond)
}

// deliver sends a message: lost with the drop probability (or over a cut link), late
// with the delay one, twice with the dup one.
func (w *World) deliver(ok bool, name string, fn func()) {
	if !ok || w.s.chance(w.f.drop) {
		w.s.trace.add("lost: %s", name)
		return
	}
	d := w.s.between(100*time.Microsecond, 3*time.Millisecond)
	if w.s.chance(w.f.delay) {
		d = w.s.between(50*time.Millisecond, 900*time.Millisecond)
	}
	w.s.after(d, name, fn)
	if w.s.chance(w.f.dup) {
		w.s.after(d+w.s.between(0, 200*time.Millisecond), name+" (duplicate)", fn)
	}
}

// toController sends a request from a broker to the controller and its answer back.
func (w *World) toController(b *broker, name string, req, answered func()) {
	inc := b.incarnation
	w.deliver(!b.cutFromController, fmt.Sprintf("%s from broker %d", name, b.id), func() {
		if !w.ctl.available() {
			return
		}
		req()
		w.deliver(!b.cutFromController, name+" answer", func() {
			if b.up && b.incarnation == inc {
				answered()
			}
		})
	})
}

// fetchRound carries one replica fetch to its leader and the answer back; an answer
// that does not come within fetchTimeout is a failed fetch.
func (w *World) fetchRound(b *broker, df *replication.DrivenFetch) {
	inc := b.incarnation
	done := false
	complete := func(resp *kmsg.FetchResponse, err error) {
		if done || !b.up || b.incarnation != inc {
			return
		}
		done = true
		df.Complete(resp, err)
	}
	w.s.after(fetchTimeout, "fetch timeout", func() { complete(nil, errTimeout) })
	l := w.broker(df.Leader)
	w.deliver(l != nil && w.linked(b, l), fmt.Sprintf("fetch %d->%d", b.id, df.Leader), func() {
		if !l.up {
			return
		}
		resp := l.serveFetch(df.Request)
		w.deliver(w.linked(b, l), fmt.Sprintf("fetch answer %d->%d", df.Leader, b.id), func() { complete(resp, nil) })
	})
}

func (w *World) retention() {
	for _, b := range w.brokers {
		if b.up {
			b.mgr.Partitions().EnforceRetention(nilCtx)
		}
	}
}

func (w *World) checkpoint() {
	for _, b := range w.brokers {
		if b.up {
			if err := b.mgr.Partitions().CheckpointHighWatermarks(); err != nil {
				w.violate("%s: high watermark checkpoint: %v", b.name(), err)
			}
		}
	}
}

// createTopic creates the next generation of the topic.
func (w *World) createTopic() {
	if !w.ctl.available() {
		w.s.after(100*time.Millisecond, "create topic", w.createTopic)
		return
	}
	g := &topicGen{name: topicName, partitions: numPartitions, deleted: map[int32]int64{}}
	if w.topic != nil {
		g.gen = w.topic.gen + 1
	}
	for i := range g.id {
		g.id[i] = byte(w.s.rng.UintN(256))
	}
	g.configs = map[string]string{
		"min.insync.replicas": "2",
		"segment.bytes":       "1024",
		"segment.index.bytes": "4096",
	}
	if w.f.retentionBytes {
		g.configs["retention.bytes"] = "3072"
	}
	if w.f.powerLoss {
		if w.f.acksAllFsync {
			g.configs["acks.all.fsync"] = "true"
		} else {
			g.configs["flush.messages"] = "1"
		}
		// Index entries every few batches: an fsync per append covers the data, not
		// the active segment's indexes, which a power cut then takes back to what the
		// last full sync left and recovery must rebuild.
		g.configs["index.interval.bytes"] = "128"
	}
	if w.f.backfill {
		g.configs["retention.ms"] = "86400000"
	}
	err := w.ctl.apply(&pb.Record{Record: &pb.Record_CreateTopics{CreateTopics: &pb.CreateTopicsRecord{Topics: []*pb.NewTopic{{
		Name: g.name, Id: g.id[:], Seed: w.s.rng.Uint32(), NumPartitions: g.partitions, ReplicationFactor: numBrokers, Configs: g.configs}}}}})
	if t := w.ctl.image().Topic(g.name); err != nil || t == nil || t.ID != g.id {
		// Too few unfenced brokers for the replication factor, say: try again.
		w.s.trace.add("create topic generation %d failed (%v); retrying", g.gen, err)
		w.s.after(100*time.Millisecond, "create topic", w.createTopic)
		return
	}
	w.topic = g
	w.gens[g.id] = g
	w.s.trace.add("topic %s generation %d created (id %x)", g.name, g.gen, g.id[:4])
	for i := range g.partitions {
		w.startProducer(g, i, -1)
		w.startProducer(g, i, -1)
		if w.s.chance(0.5) {
			w.startProducer(g, i, 1)
		}
		w.startConsumer(g, i)
	}
}

// recreateTopic deletes the topic and creates it again under the same name.
func (w *World) recreateTopic() {
	g := w.topic
	if g == nil || !w.ctl.available() {
		return
	}
	err := w.ctl.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{{Name: g.name, Id: g.id[:]}}}}})
	w.s.trace.add("topic %s generation %d deleted: %v", g.name, g.gen, err)
	if err != nil {
		return
	}
	g.dead = true
	w.stats.Recreations++
	w.createTopic()
}

// deleteRecords is an admin's DeleteRecords to the partition's leader, as the protocol
// handler serves it.
func (w *World) deleteRecords() {
	g := w.topic
	if g == nil || g.dead {
		return
	}
	idx := w.s.rng.Int32N(g.partitions)
	mp := w.ctl.image().Partition(g.name, idx)
	if mp == nil || mp.Leader < 0 {
		return
	}
	l := w.broker(mp.Leader)
	w.deliver(true, "DeleteRecords", func() {
		if !l.up || w.topicIDAt(l) != g.id {
			return
		}
		p, err := l.mgr.Leader(g.name, idx, -1)
		if err != nil {
			return
		}
		hw := p.HighWatermark()
		if hw <= p.LogStartOffset() {
			return
		}
		off := p.LogStartOffset() + w.s.rng.Int64N(hw-p.LogStartOffset()) + 1
		w.serveDeleteRecords(l, g, idx, off, func(low int64, err error) {
			w.s.trace.add("DeleteRecords %s-%d before %d on broker %d: low watermark %d, %v", g.name, idx, off, l.id, low, err)
			if err != nil {
				return
			}
			w.deliver(true, "DeleteRecords answer", func() {
				w.stats.DeleteRecords++
				g.deleted[idx] = max(g.deleted[idx], low)
			})
			if w.f.crashes && w.s.chance(0.3) {
				// The worst moment: the leader dies before its followers fetch again.
				w.crashAndRestart(l)
			}
		})
	})
}

// reassign moves a partition to another replica set (AlterPartitionReassignments): two
// or three of the brokers in a new order, or, sometimes, cancels the one in progress. A
// broker dropped from the set deletes its replica; one added starts empty and joins the
// ISR once caught up.
func (w *World) reassign() {
	g := w.topic
	if g == nil || g.dead {
		return
	}
	idx := w.s.rng.Int32N(g.partitions)
	ra := &pb.PartitionReassignment{Topic: g.name, Partition: idx}
	if w.s.chance(0.2) {
		ra.Cancel = true
	} else {
		for _, i := range w.s.rng.Perm(numBrokers)[:2+w.s.rng.IntN(numBrokers-1)] {
			ra.Replicas = append(ra.Replicas, int32(i+1))
		}
	}
	w.deliver(true, "AlterPartitionReassignments", func() {
		if !w.ctl.available() {
			return
		}
		err := w.ctl.apply(&pb.Record{Record: &pb.Record_AlterPartitionReassignments{
			AlterPartitionReassignments: &pb.AlterPartitionReassignmentsRecord{Reassignments: []*pb.PartitionReassignment{ra}}}})
		mp := w.ctl.image().Partition(g.name, idx)
		if mp == nil {
			return
		}
		w.stats.Reassignments++
		w.s.trace.add("reassign %s-%d to %v (cancel %v): %v; replicas %v adding %v removing %v isr %v", g.name, idx, ra.Replicas, ra.Cancel, err,
			mp.Replicas, mp.AddingReplicas, mp.RemovingReplicas, mp.ISR)
	})
}

func (w *World) topicIDAt(b *broker) [16]byte {
	if t := b.mgr.Image().Topic(topicName); t != nil {
		return t.ID
	}
	return [16]byte{}
}

// scheduleFaults draws the run's fault events.
func (w *World) scheduleFaults(chaos time.Duration) {
	at := func(name string, fn func()) {
		w.s.after(w.s.between(500*time.Millisecond, chaos), name, func() {
			if !w.healing {
				fn()
			}
		})
	}
	n := func(max int) int { return 1 + w.s.rng.IntN(max) }
	if w.f.crashes {
		for range n(4) {
			at("crash", func() { w.crashAndRestart(w.brokers[w.s.rng.IntN(len(w.brokers))]) })
		}
	}
	if w.f.metadataPause {
		for range n(4) {
			at("cut from controller", func() {
				b := w.brokers[w.s.rng.IntN(len(w.brokers))]
				b.cutFromController = true
				w.s.trace.add("broker %d cut from the controllers", b.id)
				if w.f.recreate && w.s.chance(0.5) {
					w.s.after(w.s.between(10*time.Millisecond, 500*time.Millisecond), "recreate topic", w.recreateTopic)
				}
				w.s.after(w.s.between(200*time.Millisecond, 4*time.Second), "reconnect to controller", func() {
					b.cutFromController = false
					w.s.trace.add("broker %d reaches the controllers again", b.id)
				})
			})
		}
	}
	if w.f.partitions {
		for range n(4) {
			at("partition", func() {
				a := w.brokers[w.s.rng.IntN(len(w.brokers))]
				c := w.brokers[w.s.rng.IntN(len(w.brokers))]
				if a == c {
					return
				}
				a.cut[c.id] = true
				w.s.trace.add("link %d-%d cut", a.id, c.id)
				w.s.after(w.s.between(200*time.Millisecond, 4*time.Second), "heal link", func() {
					delete(a.cut, c.id)
					w.s.trace.add("link %d-%d healed", a.id, c.id)
				})
			})
		}
	}
	if w.f.clockJumps {
		for range n(3) {
			at("clock jump", func() {
				b := w.brokers[w.s.rng.IntN(len(w.brokers))]
				j := w.s.between(100*time.Millisecond, 3*time.Second)
				b.clock.skew += j
				w.s.trace.add("broker %d clock jumps %v ahead", b.id, j)
			})
		}
	}
	if w.f.deleteRecords {
		for range n(12) {
			at("delete records", w.deleteRecords)
		}
	}
	if w.f.recreate {
		for range n(2) {
			at("recreate topic", w.recreateTopic)
		}
	}
	if w.f.reassign {
		for range n(4) {
			at("reassign", w.reassign)
		}
	}
	if w.f.powerLoss {
		at("blackout", w.blackout)
	}
	if w.f.failovers {
		for range n(2) {
			at("controller failover", func() { w.ctl.failover(w.s.between(50*time.Millisecond, 1500*time.Millisecond)) })
		}
	}
}

// crashAndRestart kills a broker and starts it again a while later.
func (w *World) crashAndRestart(b *broker) {
	if !b.up || w.healing {
		return
	}
	w.stats.Crashes++
	b.crash()
	if w.f.powerLoss && w.s.chance(0.5) {
		b.losePower()
	}
	w.s.after(w.s.between(100*time.Millisecond, 4*time.Second), "restart", func() {
		if !b.up {
			b.start()
		}
	})
}

// blackout cuts the power of every broker at once; each comes back a while later. Only
// what was fsynced survives, which with flush.messages=1 or acks.all.fsync is every
// acknowledged record: the high watermark is the least flushed offset over the ISR.
func (w *World) blackout() {
	w.s.trace.add("blackout")
	for _, b := range w.brokers {
		if b.up {
			w.stats.Crashes++
			b.crash()
		}
		b.losePower()
		w.s.after(w.s.between(100*time.Millisecond, 3*time.Second), "restart", func() {
			if !b.up {
				b.start()
			}
		})
	}
}

// heal ends the faults: every broker up and reachable, clients stop producing new
// records; the cluster then settles.
func (w *World) heal() {
	w.healing = true
	w.s.trace.add("healing")
	for _, b := range w.brokers {
		b.cutFromController = false
		clear(b.cut)
		if !b.up {
			b.start()
		}
	}
	w.f.drop, w.f.delay, w.f.dup, w.f.metadataLag = 0, 0, 0, 0
}

// afterEvent answers produces whose ISR caught up and checks the invariants that must
// hold at every instant.
func (w *World) afterEvent() {
	for _, b := range w.brokers {
		if b.up {
			b.answerWaiting()
		}
	}
	w.checkInstant()
}

func kafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, shalelog.ErrOffsetOutOfRange) {
		return kerr.OffsetOutOfRange.Code
	}
	if errors.Is(err, shalelog.ErrClosed) {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownServerError.Code
}

func viewBytes(v *shalelog.View) []byte {
	if v == nil {
		return nil
	}
	defer v.Release()
	var out []byte
	for _, c := range v.Chunks {
		out = append(out, c...)
	}
	return out
}

func partitionOf(im *metadata.Image, idx int32) *metadata.Partition {
	return im.Partition(topicName, idx)
}

// Replay is the command that runs one seed again with its trace and logs.
func Replay(seed uint64) string {
	return fmt.Sprintf("go test ./tests/sim/ -run 'TestSimulation$' -count=1 -v -sim.seed=%d", seed)
}
