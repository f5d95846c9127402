package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const partitions = 6

// ack is one acknowledged record.
type ack struct {
	seq    int64
	part   int32
	offset int64
	at     time.Time
}

// workload is one producer writing numbered records (value = sequence number, partition =
// sequence mod 6, so each partition's values must come out increasing) and one consumer
// group member reading them. Both run until stop.
type workload struct {
	topic string
	acks1 bool // acks=1 without idempotence, the demonstration of what it can lose
	rate  int  // records per second

	producer, consumer *kgo.Client
	stopLoop           context.CancelFunc // ends the produce loop
	cancel             context.CancelFunc // fails buffered records and ends the consumer
	wg                 sync.WaitGroup

	phase atomic.Int32 // the row an ack or failure is counted in

	mu       sync.Mutex
	next     int64
	acked    []ack
	failed   map[int32]int   // phase -> records whose produce failed
	produced map[int32]int   // phase -> records handed to the producer
	lastErr  map[int32]error // phase -> one produce error, for the report
	seen     map[int64]bool  // what the consumer got
	consErrs int
	stopped  bool
}

func startWorkload(c *cluster, topic, group string, acks1 bool, rate int) (*workload, error) {
	w := &workload{
		topic: topic, acks1: acks1, rate: rate,
		failed: map[int32]int{}, produced: map[int32]int{}, lastErr: map[int32]error{}, seen: map[int64]bool{},
	}
	popts := []kgo.Opt{
		kgo.SeedBrokers(c.seeds()...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(4000),
		kgo.MetadataMinAge(500 * time.Millisecond),
		kgo.DialTimeout(3 * time.Second),
		kgo.ProduceRequestTimeout(10 * time.Second),
	}
	if acks1 {
		popts = append(popts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	} else {
		popts = append(popts, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent: kgo's default
	}
	var err error
	if w.producer, err = kgo.NewClient(popts...); err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	w.consumer, err = kgo.NewClient(
		kgo.SeedBrokers(c.seeds()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(500*time.Millisecond),
		kgo.DialTimeout(3*time.Second),
	)
	if err != nil {
		w.producer.Close()
		return nil, fmt.Errorf("consumer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	loopCtx, stopLoop := context.WithCancel(ctx)
	w.cancel, w.stopLoop = cancel, stopLoop
	w.wg.Add(2)
	go w.produce(loopCtx, ctx)
	go w.consume(ctx)
	return w, nil
}

// produce hands rate records a second to the producer in 10 ms steps. A full buffer
// blocks Produce, which is what the producer "trying" means while a partition is down;
// the steps missed meanwhile are dropped rather than sent in a burst afterwards.
func (w *workload) produce(ctx, recCtx context.Context) {
	defer w.wg.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	perTick := max(1, w.rate/100)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range perTick {
			w.mu.Lock()
			seq := w.next
			w.next++
			phase := w.phase.Load()
			w.produced[phase]++
			w.mu.Unlock()
			part := int32(seq % partitions)
			r := &kgo.Record{
				Partition: part,
				Key:       []byte("k" + strconv.Itoa(int(part))),
				Value:     []byte(strconv.FormatInt(seq, 10)),
			}
			w.producer.Produce(recCtx, r, func(r *kgo.Record, err error) {
				at := time.Now()
				ph := w.phase.Load()
				w.mu.Lock()
				defer w.mu.Unlock()
				if err != nil {
					w.failed[ph]++
					w.lastErr[ph] = err
					return
				}
				w.acked = append(w.acked, ack{seq: seq, part: r.Partition, offset: r.Offset, at: at})
			})
			if ctx.Err() != nil {
				return
			}
		}
	}
}

func (w *workload) consume(ctx context.Context) {
	defer w.wg.Done()
	for ctx.Err() == nil {
		fs := w.consumer.PollFetches(ctx)
		errs := 0
		fs.EachError(func(string, int32, error) { errs++ })
		var seqs []int64
		fs.EachRecord(func(r *kgo.Record) {
			if seq, err := strconv.ParseInt(string(r.Value), 10, 64); err == nil {
				seqs = append(seqs, seq)
			}
		})
		w.mu.Lock()
		w.consErrs += errs
		for _, s := range seqs {
			w.seen[s] = true
		}
		w.mu.Unlock()
	}
}

// stop stops producing, waits up to drain for the records in flight, and closes both
// clients; records still unanswered then count as failed.
func (w *workload) stop(drain time.Duration) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	w.stopLoop() // no new records; those buffered go on
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	_ = w.producer.Flush(ctx)
	cancel()
	w.cancel() // fails what is still buffered, and ends the consumer
	w.wg.Wait()
	closeBounded(w.producer, 10*time.Second)
	closeBounded(w.consumer, 10*time.Second)
}

// closeBounded closes a client, giving up (and leaving its goroutines to finish on their
// own) after d: a group member's LeaveGroup can wait on an unreachable coordinator.
func closeBounded(cl *kgo.Client, d time.Duration) {
	done := make(chan struct{})
	go func() {
		cl.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// snapshot is what was acknowledged and seen before a verification starts.
type snapshot struct {
	acked []ack
	seen  map[int64]bool
}

// minEnd is, per partition, one past the highest acknowledged offset.
func (s snapshot) minEnd() map[int32]int64 {
	out := map[int32]int64{}
	for _, a := range s.acked {
		out[a.part] = max(out[a.part], a.offset+1)
	}
	return out
}

func (w *workload) snapshot() snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return snapshot{acked: slices.Clone(w.acked), seen: mapsClone(w.seen)}
}

func mapsClone(m map[int64]bool) map[int64]bool {
	out := make(map[int64]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// logRecord is one record read back: its offset and sequence number.
type logRecord struct {
	offset int64
	seq    int64
}

// readAll reads every partition from offset 0 up to its high watermark as ListOffsets
// reports it when the read starts, within timeout. A new leader's high watermark can trail
// the old one's for a moment (until its followers fetch again), so while some partition's
// is below minEnd (one past the highest offset acknowledged there) it asks again for up to
// settle; a log really truncated below an acknowledged record then shows as a loss.
func readAll(c *cluster, topic string, minEnd map[int32]int64, settle, timeout time.Duration) (map[int32][]logRecord, map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DialTimeout(3*time.Second), kgo.MetadataMinAge(500*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	settleBy := time.Now().Add(settle)
	var ends map[int32]int64
	for {
		ends = map[int32]int64{}
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			lo.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					ends[o.Partition] = o.Offset
				}
			})
		}
		behind := false
		for p, want := range minEnd {
			if e, ok := ends[p]; ok && e < want {
				behind = true
			}
		}
		if len(ends) == partitions && (!behind || time.Now().After(settleBy)) {
			break
		}
		if ctx.Err() != nil {
			return nil, ends, fmt.Errorf("list end offsets: %d of %d partitions answered: %w", len(ends), partitions, errors.Join(err, ctx.Err()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	out := map[int32][]logRecord{}
	want := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > 0 {
			want[p] = kgo.NewOffset().At(0)
		}
	}
	if len(want) == 0 {
		return out, ends, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DialTimeout(3*time.Second),
		kgo.MetadataMinAge(500*time.Millisecond),
	)
	if err != nil {
		return nil, ends, err
	}
	defer cl.Close()
	next := map[int32]int64{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var short []string
			for p := range want {
				short = append(short, fmt.Sprintf("p%d at %d of %d", p, next[p], ends[p]))
			}
			return out, ends, fmt.Errorf("read incomplete after %v: %v", timeout, short)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			seq, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				seq = -1
			}
			out[r.Partition] = append(out[r.Partition], logRecord{offset: r.Offset, seq: seq})
			next[r.Partition] = r.Offset + 1
			if r.Offset+1 >= ends[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out, ends, nil
}

// verdict is what one verification found new since the previous one.
type verdict struct {
	lost, dup, reorder, consMissing int
	examples                        []string
}

// verifier remembers what earlier verifications reported, so that each row counts only
// what it found first.
type verifier struct {
	lost, dup, reorder, consMissing map[int64]bool
}

func newVerifier() *verifier {
	return &verifier{lost: map[int64]bool{}, dup: map[int64]bool{}, reorder: map[int64]bool{}, consMissing: map[int64]bool{}}
}

// check compares the log read back with what was acknowledged and consumed before the
// read began.
func (v *verifier) check(snap snapshot, log map[int32][]logRecord) verdict {
	var out verdict
	example := func(format string, args ...any) {
		if len(out.examples) < 8 {
			out.examples = append(out.examples, fmt.Sprintf(format, args...))
		}
	}
	count := map[int64]int{}
	for p := int32(0); p < partitions; p++ {
		maxSeq := int64(-1)
		inPart := map[int64]bool{}
		for _, r := range log[p] {
			count[r.seq]++
			if r.seq < 0 {
				continue
			}
			if r.seq%partitions != int64(p) {
				example("record %d in partition %d at offset %d belongs to partition %d", r.seq, p, r.offset, r.seq%partitions)
			}
			if inPart[r.seq] {
				continue // a duplicate, counted below
			}
			inPart[r.seq] = true
			if r.seq < maxSeq && !v.reorder[r.seq] {
				v.reorder[r.seq] = true
				out.reorder++
				example("reordered: p%d offset %d holds record %d after record %d", p, r.offset, r.seq, maxSeq)
			}
			maxSeq = max(maxSeq, r.seq)
		}
	}
	for seq, n := range count {
		if n > 1 && seq >= 0 && !v.dup[seq] {
			v.dup[seq] = true
			out.dup += n - 1
			example("duplicated: record %d appears %d times", seq, n)
		}
	}
	for _, a := range snap.acked {
		if count[a.seq] == 0 && !v.lost[a.seq] {
			v.lost[a.seq] = true
			out.lost++
			example("lost: record %d acknowledged at p%d offset %d is not in the log", a.seq, a.part, a.offset)
		}
	}
	for seq := range snap.seen {
		if count[seq] == 0 && !v.consMissing[seq] {
			v.consMissing[seq] = true
			out.consMissing++
			example("consumed but missing: record %d", seq)
		}
	}
	return out
}

// phaseStats are the producer's figures for one row: acks and failures counted in it, and
// the longest time any partition went without an ack inside [from, to].
func (w *workload) phaseStats(phase int32, from, to time.Time) (produced, acked, failed int, worst time.Duration, lastErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := map[int32]time.Time{}
	for p := int32(0); p < partitions; p++ {
		last[p] = from
	}
	for _, a := range w.acked {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		acked++
		worst = max(worst, a.at.Sub(last[a.part]))
		last[a.part] = a.at
	}
	for _, t := range last {
		worst = max(worst, to.Sub(t))
	}
	return w.produced[phase], acked, w.failed[phase], worst, w.lastErr[phase]
}

// ackedSince reports whether every partition has an acknowledgement after t.
func (w *workload) ackedSince(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := map[int32]bool{}
	for i := len(w.acked) - 1; i >= 0 && w.acked[i].at.After(t); i-- {
		got[w.acked[i].part] = true
	}
	return len(got) == partitions
}

// firstAllAckedAfter is when the last partition to acknowledge again after t did so.
func (w *workload) firstAllAckedAfter(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := map[int32]time.Time{}
	for _, a := range w.acked {
		if a.at.After(t) {
			if _, ok := first[a.part]; !ok {
				first[a.part] = a.at
			}
		}
	}
	latest := t
	for _, at := range first {
		latest = later(latest, at)
	}
	return latest
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
