package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RunOptions says where and how to run a workload.
type RunOptions struct {
	// Bootstrap is the cluster's seed brokers.
	Bootstrap []string
	// Target labels the cluster in progress lines and the report.
	Target string
	// Progress, when not nil, gets a line a second.
	Progress io.Writer
	// Peak, for a workload with RateOfPeak, is a closed-loop peak
	// (records/s) already measured with the same shape; zero measures it.
	Peak float64
	// ClientOpts are added to every client the run makes: TLS and SASL for a secured
	// listener.
	ClientOpts []kgo.Opt
}

// settleWait bounds the wait for a consumer group to hand out every
// partition before an e2e run starts producing.
const settleWait = 30 * time.Second

// drainIdle ends an e2e run's drain when no record has arrived for this
// long after the producers finished; drainMax ends it regardless.
const (
	drainIdle = 5 * time.Second
	drainMax  = 30 * time.Second
)

// Run runs one workload against a cluster and reports its figures. A
// report comes back with the error when the run got far enough to measure
// anything.
func Run(ctx context.Context, w Workload, opt RunOptions) (*Report, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if len(opt.Bootstrap) == 0 {
		return nil, errors.New("no bootstrap servers")
	}
	if w.RateOfPeak == 0 || w.Rate > 0 {
		return runOnce(ctx, w, opt)
	}
	peak := opt.Peak
	var peakReport *Report
	if peak <= 0 {
		pw := w
		pw.RateOfPeak = 0
		pw.Name = w.Name + "/peak"
		var err error
		peakReport, err = runOnce(ctx, pw, opt)
		if err != nil {
			return peakReport, fmt.Errorf("measuring the peak for %s: %w", w.Name, err)
		}
		peak = peakRate(peakReport)
	}
	if peak <= 0 {
		return peakReport, fmt.Errorf("%s: the peak run acknowledged no records", w.Name)
	}
	w.Rate = peak * w.RateOfPeak
	r, err := runOnce(ctx, w, opt)
	if r != nil {
		r.PeakRate = peak
		r.Peak = peakReport
	}
	return r, err
}

// peakRate is a closed-loop run's sustained rate: the produce rate, or the
// consume rate when consumers kept up less well.
func peakRate(r *Report) float64 {
	peak := r.Role("produce").RecordsPerSec
	if c := r.Role("consume"); c.RecordsPerSec > 0 && r.Workload.Mode == ModeE2E && c.RecordsPerSec < peak {
		peak = c.RecordsPerSec
	}
	return peak
}

// run is one measurement's shared state.
type run struct {
	w       Workload
	opt     RunOptions
	epoch   time.Time
	clock   *realClock
	runID   uint64
	adm     *admin
	parts   int32
	report  *Report
	pattern []byte
}

func runOnce(ctx context.Context, w Workload, opt RunOptions) (*Report, error) {
	if w.Duration > 0 {
		// A generous cap, so a wedged cluster ends the run instead of
		// hanging it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*w.Duration+3*time.Minute)
		defer cancel()
	}
	epoch := time.Now()
	r := &run{
		w:     w,
		opt:   opt,
		epoch: epoch,
		clock: newRealClock(epoch),
		runID: rand.Uint64(),
		report: &Report{
			Workload:  w,
			Target:    opt.Target,
			Bootstrap: opt.Bootstrap,
			Started:   epoch.UTC(),
			Rate:      w.Rate,
		},
	}
	adm, err := newAdmin(opt.Bootstrap, opt.ClientOpts...)
	if err != nil {
		return nil, err
	}
	defer adm.close()
	r.adm = adm
	parts, note, err := adm.ensureTopic(ctx, &r.w)
	if err != nil {
		return nil, err
	}
	r.parts = parts
	if note != "" {
		r.report.Notes = append(r.report.Notes, note)
	}
	if w.Mode != ModeConsume || w.Preload {
		r.pattern = newPattern(w.RecordSize, 1)
	}
	switch w.Mode {
	case ModeProduce:
		err = r.produce(ctx)
	case ModeConsume:
		err = r.consume(ctx)
	case ModeE2E:
		err = r.e2e(ctx)
	}
	for _, rs := range r.report.Roles {
		switch {
		case rs.WarmupRecords > 0 && rs.Records == 0:
			r.report.Notes = append(r.report.Notes, fmt.Sprintf("%s: nothing was measured: all %s records completed in the %v warm-up",
				rs.Role, formatCount(float64(rs.WarmupRecords)), w.Warmup))
		case rs.WarmupRecords > 0:
			r.report.Notes = append(r.report.Notes, fmt.Sprintf("%s: %s records completed in the %v warm-up, before the measurement; they are in no figure",
				rs.Role, formatCount(float64(rs.WarmupRecords)), w.Warmup))
		}
		if rs.Abandoned > 0 {
			r.report.Notes = append(r.report.Notes, fmt.Sprintf("%s: %d records not yet acknowledged when the closed loop ended were abandoned (in no figure)", rs.Role, rs.Abandoned))
		}
		if rs.Errors > 0 {
			err = errors.Join(err, fmt.Errorf("%s: %d records failed, first: %s", rs.Role, rs.Errors, rs.FirstError))
		}
	}
	if err != nil {
		r.report.Error = err.Error()
	}
	return r.report, err
}

func (r *run) label() string {
	if r.opt.Target == "" {
		return r.w.Name
	}
	return r.w.Name + " @ " + r.opt.Target
}

// startProgress prints a line a second until the returned stop is called.
func (r *run) startProgress(meters ...*meter) (stop func()) {
	if r.opt.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		begun := r.clock.now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(r.opt.Progress, progressLine(r.label(), r.clock.now()-begun, meters))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func progressLine(label string, elapsed time.Duration, meters []*meter) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %3ds", label, int(elapsed.Round(time.Second)/time.Second))
	for _, m := range meters {
		n, bytes, lat := m.interval()
		fmt.Fprintf(&b, " | %s %s rec/s %s MB/s", m.role, formatCount(float64(n)), formatFloat(float64(bytes)/1e6))
		if s := summarize(lat); s != nil {
			fmt.Fprintf(&b, " p50 %s p99 %s max %s ms", formatMs(s.P50Ms), formatMs(s.P99Ms), formatMs(s.MaxMs))
		}
		if e := m.errors.Load(); e > 0 {
			fmt.Fprintf(&b, " errors %d", e)
		}
	}
	return b.String()
}

// runProducers sets up the workload's producers, then runs them for the
// warm-up and the measurement (or their quota) and waits for their
// acknowledgements. The measurement window of m and of every meter in also
// opens when the warm-up ends.
func (r *run) runProducers(ctx context.Context, m *meter, warmup time.Duration, also ...*meter) error {
	w := &r.w
	n := w.Producers
	var ps []*producer
	defer func() {
		for _, p := range ps {
			p.close()
		}
	}()
	for i := range n {
		spec := producerSpec{
			w:         w,
			bootstrap: r.opt.Bootstrap,
			extra:     r.opt.ClientOpts,
			epoch:     r.epoch,
			runID:     r.runID,
			pattern:   r.pattern,
			meter:     m,
			index:     i,
		}
		if w.Records > 0 {
			spec.quota = w.Records / int64(n)
			if int64(i) < w.Records%int64(n) {
				spec.quota++
			}
			if spec.quota == 0 {
				continue
			}
		}
		if w.Rate > 0 {
			spec.rate = w.Rate / float64(n)
		}
		p, err := newProducer(ctx, spec)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	// The clock starts once the producers exist: filling their slots can
	// take longer than a short run.
	startAt := r.clock.now()
	measureFrom := startAt + warmup
	var end time.Duration
	if w.Duration > 0 {
		end = measureFrom + w.Duration
	}
	for i, p := range ps {
		p.setWindow(startAt, end, i, len(ps))
	}
	m.begin(measureFrom)
	for _, o := range also {
		o.begin(measureFrom)
	}
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *run) produce(ctx context.Context) error {
	m := newMeter("produce", "send→ack")
	stop := r.startProgress(m)
	err := r.runProducers(ctx, m, r.w.Warmup)
	stop()
	r.report.Roles = append(r.report.Roles, m.stats(r.clock.now()))
	return err
}

// startConsumers starts the workload's consumers; direct consumers read
// from start, a group from its committed offsets.
func (r *run) startConsumers(ctx context.Context, m *meter, goal *consumeGoal, start []int64, group string, tracker *assignTracker) (stop func(), err error) {
	w := &r.w
	var cs []*consumer
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
		for _, c := range cs {
			c.close()
		}
	}
	for i := range w.Consumers {
		spec := consumerSpec{
			w:         w,
			bootstrap: r.opt.Bootstrap,
			extra:     r.opt.ClientOpts,
			epoch:     r.epoch,
			runID:     r.runID,
			meter:     m,
			goal:      goal,
			index:     i,
			group:     group,
			tracker:   tracker,
		}
		if group == "" {
			spec.start = map[int32]int64{}
			for p := int32(i); p < r.parts; p += int32(w.Consumers) {
				spec.start[p] = start[p]
			}
			if len(spec.start) == 0 {
				continue // more consumers than partitions: this one would idle
			}
		}
		c, err := newConsumer(spec)
		if err != nil {
			stop()
			return nil, err
		}
		cs = append(cs, c)
	}
	if w.Consumers > int(r.parts) {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d consumers for %d partitions: %d have nothing to read",
			w.Consumers, r.parts, w.Consumers-int(r.parts)))
	}
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(cctx)
		}()
	}
	return stop, nil
}

// runGroup names a fresh group for this run, so committed offsets of an
// earlier run never leak into it. A cluster without consumer groups gets
// direct assignment instead, and the report says so.
func (r *run) runGroup(ctx context.Context) (string, error) {
	if r.w.Group == "" {
		return "", nil
	}
	missing, err := r.adm.missingGroupAPIs(ctx)
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("the cluster does not support consumer groups (no %s): consumers were assigned partitions directly",
			strings.Join(missing, ", ")))
		r.report.GroupFallback = true
		return "", nil
	}
	return fmt.Sprintf("%s-%016x", r.w.Group, r.runID), nil
}

// consumeCap bounds a consume measurement of a topic preloaded for d.
func consumeCap(d time.Duration) time.Duration { return 2*d + 5*time.Second }

func (r *run) consume(ctx context.Context) error {
	w := &r.w
	starts, err := r.adm.offsets(ctx, w.Topic, r.parts, w.Preload)
	if err != nil {
		return err
	}
	if w.Preload {
		pm := newMeter("preload", "send→ack")
		stop := r.startProgress(pm)
		err := r.runProducers(ctx, pm, 0)
		stop()
		r.report.Roles = append(r.report.Roles, pm.stats(r.clock.now()))
		if err != nil {
			return err
		}
	}
	ends, err := r.adm.offsets(ctx, w.Topic, r.parts, true)
	if err != nil {
		return err
	}
	group, err := r.runGroup(ctx)
	if err != nil {
		return err
	}
	var tracker *assignTracker
	if group != "" {
		if err := r.adm.commitStart(ctx, group, w.Topic, starts); err != nil {
			return err
		}
		tracker = newAssignTracker(w.Consumers, int(r.parts))
	}
	cm := newMeter("consume", "")
	goal := newOffsetGoal(starts, ends, w.Records)
	cm.begin(r.clock.now())
	stopConsumers, err := r.startConsumers(ctx, cm, goal, starts, group, tracker)
	if err != nil {
		return err
	}
	stopProgress := r.startProgress(cm)
	var deadline <-chan time.Time
	if w.Duration > 0 {
		// Reading back what took Duration to write normally ends well
		// before this; the cap only stops a consumer that falls far behind.
		t := time.NewTimer(consumeCap(w.Duration))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-goal.done:
	case <-deadline:
	case <-ctx.Done():
	}
	end := r.clock.now()
	stopProgress()
	stopConsumers()
	r.report.Roles = append(r.report.Roles, cm.stats(end))
	var total int64
	for p := range ends {
		total += ends[p] - starts[p]
	}
	if !goal.reached() && ctx.Err() == nil {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("consumers stopped at the %v limit before reading all %d records", consumeCap(w.Duration), total))
	}
	return ctx.Err()
}

func (r *run) e2e(ctx context.Context) error {
	w := &r.w
	ends, err := r.adm.offsets(ctx, w.Topic, r.parts, true)
	if err != nil {
		return err
	}
	group, err := r.runGroup(ctx)
	if err != nil {
		return err
	}
	var tracker *assignTracker
	if group != "" {
		if err := r.adm.commitStart(ctx, group, w.Topic, ends); err != nil {
			return err
		}
		tracker = newAssignTracker(w.Consumers, int(r.parts))
	}
	pm := newMeter("produce", "send→ack")
	cm := newMeter("consume", "send→receive")
	goal := newCountGoal()
	stopConsumers, err := r.startConsumers(ctx, cm, goal, ends, group, tracker)
	if err != nil {
		return err
	}
	defer func() {
		if stopConsumers != nil {
			stopConsumers()
		}
	}()
	if tracker != nil {
		t := time.NewTimer(settleWait)
		select {
		case <-tracker.settled:
		case <-t.C:
			r.report.Notes = append(r.report.Notes, fmt.Sprintf("group %s had not assigned every partition after %v; producing anyway", group, settleWait))
		case <-ctx.Done():
		}
		t.Stop()
	}
	stopProgress := r.startProgress(pm, cm)
	perr := r.runProducers(ctx, pm, w.Warmup, cm)
	goal.setWant(pm.all.Load())
	r.drain(ctx, goal, cm)
	end := r.clock.now()
	stopProgress()
	stopConsumers()
	stopConsumers = nil
	ps, cs := pm.stats(end), cm.stats(end)
	r.report.Roles = append(r.report.Roles, ps, cs)
	if lost := pm.all.Load() - cm.all.Load(); lost > 0 && ctx.Err() == nil {
		r.report.Lost = lost
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d acknowledged records were not received within the drain time", lost))
	}
	return errors.Join(perr, ctx.Err())
}

// drain waits for the consumers to receive what the producers had
// acknowledged: until the goal, drainIdle without progress, or drainMax.
func (r *run) drain(ctx context.Context, goal *consumeGoal, cm *meter) {
	maxT := time.NewTimer(drainMax)
	defer maxT.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := cm.all.Load(), time.Now()
	for {
		select {
		case <-goal.done:
			return
		case <-maxT.C:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if n := cm.all.Load(); n != last {
				last, lastAt = n, time.Now()
			} else if time.Since(lastAt) > drainIdle {
				return
			}
		}
	}
}
