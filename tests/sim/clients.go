package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/replication"
)

// nilCtx is the context of the simulation's synchronous calls: nothing in a run is
// cancelled from outside.
var nilCtx = context.Background()

// producer is an idempotent acks=all producer of one partition of one topic
// generation, with one batch in flight: it retries that batch, same sequence, until it
// is answered, and takes an answer it did not get as possibly written.
type producer struct {
	w        *World
	g        *topicGen
	index    int32
	pid      int64
	seq      int32
	inflight []byte
	values   []string
	attempt  int
	backfill bool
	// acks is -1 (all) or 1 (the leader alone: not checked for loss, and piles records
	// above the high watermark while a follower lags).
	acks int16
}

func (w *World) startProducer(g *topicGen, index int32, acks int16) {
	p := &producer{w: w, g: g, index: index, pid: w.newProducerID(), backfill: w.f.backfill && w.s.chance(0.5), acks: acks}
	w.producers = append(w.producers, p)
	w.s.after(w.s.between(0, 50*time.Millisecond), "produce", p.send)
}

func (w *World) newProducerID() int64 {
	w.nextPID++
	return 1000 + w.nextPID
}

// leaderFor is where a client sends: the leader in a metadata view a client could hold
// (a broker's, drawn at random, as clients refresh from any broker).
func (w *World) leaderFor(idx int32) *broker {
	b := w.brokers[w.s.rng.IntN(len(w.brokers))]
	if !b.up {
		return nil
	}
	mp := partitionOf(b.mgr.Image(), idx)
	if mp == nil || mp.Leader < 0 {
		return nil
	}
	return w.broker(mp.Leader)
}

func (p *producer) send() {
	w := p.w
	if p.g.dead {
		return
	}
	if p.inflight == nil {
		if w.healing {
			return
		}
		n := 1 + w.s.rng.IntN(3)
		ts := w.s.now.UnixMilli()
		if p.backfill {
			ts = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		}
		p.values = p.values[:0]
		recs := make([]records.Record, n)
		for i := range recs {
			v := fmt.Sprintf("g%d-p%d-s%d", p.g.gen, p.pid, int(p.seq)+i)
			p.values = append(p.values, v)
			recs[i] = records.Record{OffsetDelta: int32(i), Value: []byte(v + pad)}
		}
		h := shalelog.Header{Magic: 2, ProducerID: p.pid, ProducerEpoch: 0, BaseSequence: p.seq, FirstTimestamp: ts, MaxTimestamp: ts}
		b, err := records.Build(h, 0, recs)
		if err != nil {
			w.violate("build batch: %v", err)
			return
		}
		p.inflight, p.attempt = b, 0
	}
	p.attempt++
	attempt := p.attempt
	answered := false
	answer := func(base int64, err error) {
		if answered || attempt != p.attempt {
			return
		}
		answered = true
		p.answered(base, err)
	}
	w.s.after(produceTimeout+time.Second, "produce timeout", func() { answer(0, errTimeout) })
	l := w.leaderFor(p.index)
	if l == nil {
		w.s.after(50*time.Millisecond, "produce retry", func() { answer(0, kerr.LeaderNotAvailable) })
		return
	}
	batch := append([]byte(nil), p.inflight...)
	inc := l.incarnation
	w.deliver(true, fmt.Sprintf("produce p%d s%d to broker %d", p.pid, p.seq, l.id), func() {
		if !l.up || l.incarnation != inc {
			return
		}
		l.serveProduce(p.g, p.index, batch, p.acks, func(base int64, err error) {
			w.deliver(true, fmt.Sprintf("produce answer p%d s%d", p.pid, p.seq), func() { answer(base, err) })
		})
	})
}

// pad makes records big enough that a few batches fill a small segment.
const pad = "........................................................................................................"

func (p *producer) answered(base int64, err error) {
	w := p.w
	if err == nil {
		for i, v := range p.values {
			if p.acks == -1 {
				p.g.acked = append(p.g.acked, record{gen: p.g.gen, index: p.index, offset: base + int64(i), value: v})
			}
		}
		w.stats.Acked += len(p.values)
		w.s.trace.add("acked p%d s%d-%d at %s-%d offset %d", p.pid, p.seq, int(p.seq)+len(p.values)-1, p.g.name, p.index, base)
		p.seq += int32(len(p.values))
		p.inflight = nil
		w.s.after(w.s.between(time.Millisecond, 30*time.Millisecond), "produce", p.send)
		return
	}
	w.s.trace.add("produce p%d s%d failed: %v", p.pid, p.seq, err)
	switch {
	case kerr.IsRetriable(err) || err == errTimeout:
		w.s.after(w.s.between(10*time.Millisecond, 100*time.Millisecond), "produce retry", p.send)
	default:
		// Fatal for this producer (its sequence is unknown to the partition, say): a new
		// producer takes over, as an application would start one.
		w.s.trace.add("producer p%d gives up at s%d: %v", p.pid, p.seq, err)
		p.pid, p.seq, p.inflight = w.newProducerID(), 0, nil
		w.s.after(50*time.Millisecond, "produce", p.send)
	}
}

// pendingProduce is an acks=all produce waiting for its ISR.
type pendingProduce struct {
	pp       *replication.ProducePartition
	deadline time.Time
	answer   func(int64, error)
	lost     bool
}

// serveProduce is the produce handler: a request for a topic id the broker does not
// know is refused (Produce by topic id), then the replica manager appends.
func (b *broker) serveProduce(g *topicGen, idx int32, batch []byte, acks int16, answer func(int64, error)) {
	if b.w.topicIDAt(b) != g.id {
		answer(0, kerr.UnknownTopicID)
		return
	}
	pp := &replication.ProducePartition{Topic: g.name, Index: idx, Records: batch}
	b.mgr.Append(nilCtx, acks, []*replication.ProducePartition{pp})
	if pp.Err != nil || acks != -1 {
		answer(pp.Result.BaseOffset, pp.Err)
		return
	}
	b.waiting = append(b.waiting, &pendingProduce{pp: pp, deadline: b.w.s.now.Add(produceTimeout), answer: answer})
}

// answerWaiting answers the produces whose ISR caught up, whose leadership moved, or
// whose timeout passed.
func (b *broker) answerWaiting() {
	keep := b.waiting[:0]
	for _, w := range b.waiting {
		switch {
		case !w.pp.NeedsReplication():
			w.answer(w.pp.Result.BaseOffset, w.pp.Err)
		case !b.w.s.now.Before(w.deadline):
			w.answer(0, kerr.RequestTimedOut)
		default:
			keep = append(keep, w)
		}
	}
	b.waiting = keep
	purges := b.purges[:0]
	for _, g := range b.purges {
		low, done, err := g.purge.Poll()
		switch {
		case done:
			g.answer(low, err)
		case !b.w.s.now.Before(g.deadline):
			g.answer(0, kerr.RequestTimedOut)
		default:
			purges = append(purges, g)
		}
	}
	b.purges = purges
}

// pendingPurge is a DeleteRecords waiting for the followers' log starts.
type pendingPurge struct {
	purge    *replication.Purge
	deadline time.Time
	answer   func(int64, error)
}

// serveDeleteRecords is the DeleteRecords handler: the leader moves its log start, and
// the answer waits for the low watermark (answerWaiting), as protocol's handler does.
func (w *World) serveDeleteRecords(l *broker, g *topicGen, idx int32, offset int64, answer func(int64, error)) {
	g2, err := l.mgr.StartDeleteRecords(g.name, idx, offset)
	if err != nil {
		answer(0, err)
		return
	}
	l.purges = append(l.purges, &pendingPurge{purge: g2, deadline: w.s.now.Add(produceTimeout), answer: answer})
}

// consumer reads one partition of one topic generation from its leader, from the
// start, and checks every record it is served as it arrives.
type consumer struct {
	w      *World
	g      *topicGen
	index  int32
	offset int64
	seen   []record
}

func (w *World) startConsumer(g *topicGen, index int32) {
	c := &consumer{w: w, g: g, index: index}
	w.consumers = append(w.consumers, c)
	w.s.after(w.s.between(0, 50*time.Millisecond), "consume", c.fetch)
}

func (c *consumer) fetch() {
	w := c.w
	if c.g.dead {
		return
	}
	next := func(d time.Duration) { w.s.after(d, "consume", c.fetch) }
	l := w.leaderFor(c.index)
	if l == nil {
		next(50 * time.Millisecond)
		return
	}
	// KIP-392: one fetch in three goes to a follower, as a consumer sent there by a
	// preferred read replica would (its fetch carries client metadata).
	var client *replication.ClientMetadata
	if f := w.followerFor(l, c.index); f != nil && w.s.rng.IntN(3) == 0 {
		l, client = f, &replication.ClientMetadata{RackID: "sim"}
	}
	inc := l.incarnation
	answered := false
	w.s.after(time.Second, "consume timeout", func() {
		if !answered {
			answered = true
			next(10 * time.Millisecond)
		}
	})
	w.deliver(true, fmt.Sprintf("consumer fetch %s-%d@%d from broker %d", c.g.name, c.index, c.offset, l.id), func() {
		if !l.up || l.incarnation != inc {
			return
		}
		if w.topicIDAt(l) != c.g.id {
			return
		}
		res := l.mgr.Fetch(replication.Reader{ReplicaID: -1, Client: client}, replication.FetchPartition{Topic: c.g.name, TopicID: c.g.id, Index: c.index,
			CurrentLeaderEpoch: -1, FetchOffset: c.offset, LastFetchedEpoch: -1, MaxBytes: 4096, MinOne: true})
		data := viewBytes(res.View)
		// What was purged by the time the broker served the read, as the admin knew it.
		purged := c.g.deleted[c.index]
		if res.Err == nil && w.deposed(l, c.index) {
			// A leader cut off from the controllers (or whose metadata lags) serves on
			// what it has, as Kafka's brokers do without a quorum: a stale read, which
			// may include records a DeleteRecords on the new leader has purged. Once the
			// controller has told it that it is fenced it stops (Manager.Leader); a
			// purge undone on the settled cluster, or one served by a current leader,
			// is still a violation.
			w.stats.DeposedReads++
			purged = 0
		}
		if res.Err == nil && client != nil {
			// A follower serves what it holds up to its own high watermark, as Kafka's
			// do: one that was out of the ISR when the leader answered a DeleteRecords
			// may still hold, and serve, records below it. The high watermark and the
			// committed log still bound what it serves (take, and the settled check).
			w.stats.FollowerReads++
			purged = 0
		}
		from := l.id
		start := int64(-1)
		if res.Err != nil && kafkaCode(res.Err) == kerr.OffsetOutOfRange.Code {
			if p := l.mgr.Replica(c.g.name, c.index); p != nil {
				start = p.LogStartOffset()
			}
		}
		w.deliver(true, "consumer fetch answer", func() {
			if answered {
				return
			}
			answered = true
			if start >= 0 {
				c.offset = start
			}
			c.take(from, purged, res.HighWatermark, data)
			next(w.s.between(time.Millisecond, 20*time.Millisecond))
		})
	})
}

// followerFor picks a replica of partition idx other than leader l, as l's metadata
// lists them, on a broker that is up; nil when there is none.
func (w *World) followerFor(l *broker, idx int32) *broker {
	if !l.up || l.mgr == nil {
		return nil
	}
	mp := partitionOf(l.mgr.Image(), idx)
	if mp == nil || len(mp.Replicas) < 2 {
		return nil
	}
	id := mp.Replicas[w.s.rng.IntN(len(mp.Replicas))]
	b := w.broker(id)
	if id == l.id || b == nil || !b.up {
		return nil
	}
	return b
}

// deposed says whether b, which believes it leads partition idx of the topic, has been
// deposed in the controller's metadata: a newer leader epoch, or the topic gone.
func (w *World) deposed(b *broker, idx int32) bool {
	mine, now := b.mgr.Image().Topic(topicName), w.ctl.image().Topic(topicName)
	if mine == nil || now == nil || mine.ID != now.ID {
		return true
	}
	mp, cp := partitionOf(b.mgr.Image(), idx), partitionOf(w.ctl.image(), idx)
	return mp == nil || cp == nil || cp.LeaderEpoch > mp.LeaderEpoch || cp.Leader != b.id
}

// take checks and records what a fetch answered with high watermark hw returned.
func (c *consumer) take(from int32, purged, hw int64, data []byte) {
	w := c.w
	for len(data) >= shalelog.BatchHeaderSize {
		h, recs, err := records.Records(data[:min(len(data), batchLen(data))])
		if err != nil {
			w.violate("consumer of %s-%d got an undecodable batch from broker %d: %v", c.g.name, c.index, from, err)
			return
		}
		data = data[h.Size():]
		for _, r := range recs {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off < c.offset {
				continue
			}
			v := trimPad(string(r.Value))
			rec := record{gen: c.g.gen, index: c.index, offset: off, value: v}
			w.checkServed(c.g, rec, from, purged)
			if off >= hw {
				w.violate("record served above the high watermark: broker %d served %s-%d offset %d to a consumer with the high watermark at %d",
					from, c.g.name, c.index, off, hw)
			}
			c.seen = append(c.seen, rec)
			w.stats.Consumed++
			c.offset = off + 1
		}
	}
}

func batchLen(b []byte) int {
	h, err := shalelog.ParseHeader(b)
	if err != nil {
		return len(b)
	}
	return h.Size()
}

func trimPad(v string) string {
	if len(v) >= len(pad) && v[len(v)-len(pad):] == pad {
		return v[:len(v)-len(pad)]
	}
	return v
}
