package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// flushTimeout bounds the wait for in-flight records once a producer has
// sent its last one. A variable for tests: an idempotent producer cannot
// give up records already sent (their outcome is unknown), so a cluster
// that never acknowledges holds a run for this long.
var flushTimeout = 30 * time.Second

// deliveryTimeout fails a record the cluster has not acknowledged in this
// time, so a wedged broker ends the run with errors rather than a hang.
const deliveryTimeout = 60 * time.Second

// producerSpec is what one producer worker needs from its run.
type producerSpec struct {
	w         *Workload
	bootstrap []string
	extra     []kgo.Opt // RunOptions.ClientOpts
	epoch     time.Time
	runID     uint64
	pattern   []byte
	meter     *meter
	index     int
	quota     int64   // records to measure (warm-up ones come on top); 0: until the end of the window
	rate      float64 // this producer's records/s; 0: closed loop
}

// producer is one franz-go client producing the workload's records.
type producer struct {
	spec  producerSpec
	cl    *kgo.Client
	clock *realClock // the producer goroutine's own (its timer is not shared)
	pacer *pacer
	start time.Duration
	pool  *slotPool
	keys  *keySource
	rec   *recorder
	e2e   bool
	bytes int64
	// aborting is set once a closed loop gives up its buffered records.
	aborting atomic.Bool
	// warm counts this producer's records that completed (acknowledged or
	// failed) before the measurement window opened.
	warm   atomic.Int64
	onAckF func(*kgo.Record, error)
}

func producerOpts(w *Workload, bootstrap []string, slots int) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.ClientID("shale-bench-producer"),
		kgo.ProducerLinger(w.Linger),
		kgo.ProducerBatchMaxBytes(w.BatchMaxBytes),
		kgo.ProducerBatchCompression(compressionCodecs[w.Compression]()),
		// A little headroom over the slots: the promise hands a slot back
		// before franz-go stops counting its record as buffered.
		kgo.MaxBufferedRecords(slots + 64),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
	}
	return append(opts, w.Acks.clientOpts()...)
}

func newProducer(ctx context.Context, spec producerSpec) (*producer, error) {
	w := spec.w
	slots := w.slots()
	cl, err := kgo.NewClient(append(producerOpts(w, spec.bootstrap, slots), spec.extra...)...)
	if err != nil {
		return nil, fmt.Errorf("producer %d: %w", spec.index, err)
	}
	p := &producer{
		spec:  spec,
		cl:    cl,
		clock: newRealClock(spec.epoch),
		pool:  newSlotPool(ctx, slots, w.RecordSize, spec.pattern),
		keys:  newKeySource(w.Keys, uint64(spec.index)+1),
		rec:   spec.meter.newRecorder(),
		e2e:   w.Mode == ModeE2E,
		bytes: w.recordBytes(),
	}
	p.onAckF = p.onAck
	return p, nil
}

// setWindow fixes when producer i of n starts and when it must stop. Open
// loop, the n schedules are staggered so that together they are even.
func (p *producer) setWindow(start, end time.Duration, i, n int) {
	p.start = start
	p.pacer = &pacer{clock: p.clock, end: end, quota: p.spec.quota, warm: &p.warm}
	if p.spec.rate > 0 {
		total := p.spec.rate * float64(n)
		p.pacer.sched = newSchedule(start+time.Duration(float64(i)*float64(time.Second)/total), p.spec.rate)
	}
}

// run sends records until the pacer says stop, then waits for the last
// acknowledgements. Send errors are counted in the meter, not returned.
func (p *producer) run(ctx context.Context) error {
	if p.pacer.sched == nil {
		if err := p.clock.sleepUntil(ctx, p.start); err != nil {
			return nil
		}
	}
	// A cluster that acknowledges nothing keeps every slot taken; the wait
	// for one must end with the window, not with the run's far later cap.
	var windowEnd <-chan time.Time
	if p.pacer.end > 0 {
		t := time.NewTimer(p.pacer.end - p.clock.now())
		defer t.Stop()
		windowEnd = t.C
	}
	for {
		if !p.send(ctx, windowEnd) {
			break
		}
		// The quota was reached. A warm-up acknowledgement counted only
		// now (its promise was running as the window opened) raises it:
		// wait for every outstanding record, then send what is still owed.
		if err := p.flush(ctx); err != nil {
			return err
		}
		if !p.pacer.quotaLeft() || ctx.Err() != nil {
			return nil
		}
	}
	return p.flush(ctx)
}

// send hands records to the client until the pacer says stop; it reports
// whether the quota (rather than the window or ctx) ended it.
func (p *producer) send(ctx context.Context, windowEnd <-chan time.Time) (quotaReached bool) {
	topic := p.spec.w.Topic
	for {
		intended, ok := p.pacer.next(ctx)
		if !ok {
			return ctx.Err() == nil && !p.pacer.quotaLeft()
		}
		var s *slot
		select {
		case s = <-p.pool.free:
		default:
			// Only when no slot is free: a record due before the end
			// whose timer woke after it is still sent, as it always was.
			select {
			case s = <-p.pool.free:
			case <-windowEnd:
				return false
			case <-ctx.Done():
				return false
			}
		}
		// Closed loop, latency runs from now. Open loop, from the intended
		// time, or from now when the pacer let the record go a few
		// microseconds early: never from the later of the two.
		// A record due in the measurement window stays in it when it goes
		// early across the window's opening: its latency then runs from the
		// opening, at most spinThreshold late.
		if now := p.clock.now(); !p.pacer.openLoop() {
			intended = now
		} else if now < intended {
			if open := p.spec.meter.opening(); now < open && open <= intended {
				intended = open
			} else {
				intended = now
			}
		}
		s.intended = intended
		if p.e2e {
			putE2EHeader(s.value, p.spec.runID, intended)
		}
		s.rec = kgo.Record{Topic: topic, Key: p.keys.key(s.key), Value: s.value, Context: s}
		p.cl.Produce(ctx, &s.rec, p.onAckF)
	}
}

// flush waits for the records handed to the client, or, when a closed loop
// ran out of time, gives up those not yet acknowledged.
func (p *producer) flush(ctx context.Context) error {
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if ctx.Err() != nil {
		// Interrupted: give in-flight records a moment, not the full wait.
		flushCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
	}
	wait := p.cl.Flush
	if p.pacer.sched == nil && p.pacer.end > 0 && p.pacer.quotaLeft() {
		// A closed loop that ran out of time keeps its buffer full to the
		// end; draining it would stretch the run by the buffer's worth at
		// the measured rate and add nothing to the figures. Every record
		// not yet acknowledged is failed and counted as abandoned, those
		// in a request too: franz-go's AbortBufferedRecords fails a
		// partition's batches only when none of them is in flight, and an
		// idempotent producer pipelines up to five requests per broker, so
		// under load it drained the whole buffer. The measurement window
		// ends at the last acknowledgement counted, so the rate stays
		// true, and the client is closed next: no sequence is reused.
		//
		// A window that closed before any acknowledgement (a short one on a
		// slow start) first waits for one, up to flushTimeout, so that the
		// run measures something; a cluster that acknowledges nothing then
		// fails the run as records still unacknowledged.
		p.aborting.Store(true)
		p.awaitFirstAck(flushCtx)
		if p.spec.meter.records.Load() > 0 {
			p.cl.UnsafeAbortBufferedRecords()
		} else {
			wait = p.cl.AbortBufferedRecords
		}
	}
	if err := wait(flushCtx); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("producer %d: records still unacknowledged %v after the last send: %w",
			p.spec.index, flushTimeout, err)
	}
	return nil
}

// awaitFirstAck returns once the run has counted an acknowledgement in its
// window, nothing is left to acknowledge, or ctx ends.
func (p *producer) awaitFirstAck(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for p.spec.meter.records.Load() == 0 && p.cl.BufferedProduceRecords() > 0 {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// onAck is the promise of every record; franz-go calls a client's promises
// one at a time.
func (p *producer) onAck(r *kgo.Record, err error) {
	s := r.Context.(*slot)
	now := p.clock.now()
	aborted := err != nil && p.aborting.Load() && errors.Is(err, kgo.ErrAborting)
	if !aborted && !p.spec.meter.measuring(now) {
		p.warm.Add(1)
	}
	switch {
	case aborted:
		p.spec.meter.abandoned.Add(1)
	case err != nil:
		p.spec.meter.fail(err)
	default:
		// Open loop, a latency counts when its record was due in the
		// window (so a stall shows, however long); closed loop, when it
		// completed there, as the record counts.
		measured := now
		if p.pacer.openLoop() {
			measured = s.intended
		}
		if p.spec.meter.measuring(measured) {
			p.rec.record(now - s.intended)
		}
		p.spec.meter.add(1, p.bytes, now)
	}
	// franz-go reads nothing of the record after its promise returns, and
	// the headroom in MaxBufferedRecords covers its bookkeeping lag.
	p.pool.free <- s
}

func (p *producer) close() { p.cl.Close() }
