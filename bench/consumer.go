package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeGoal decides when the consumers are done. A consume run is done
// when every partition has been read up to the end offset it had when the
// run began (offsets, not counts: gaps such as transaction markers would
// make a count wrong); an e2e run when it has received as many of its own
// records as the producers had acknowledged. Either stops early at limit.
type consumeGoal struct {
	limit int64 // records; 0: no limit

	ends []int64 // per partition, the offset to reach; nil for count goals
	next []atomic.Int64

	want atomic.Int64 // records to receive; -1 until the producers finish
	got  atomic.Int64 // records received, warm-up included

	done chan struct{}
	once sync.Once
}

func newOffsetGoal(starts, ends []int64, limit int64) *consumeGoal {
	g := &consumeGoal{limit: limit, ends: ends, next: make([]atomic.Int64, len(ends)), done: make(chan struct{})}
	for p := range ends {
		g.next[p].Store(starts[p])
	}
	g.check()
	return g
}

func newCountGoal() *consumeGoal {
	g := &consumeGoal{done: make(chan struct{})}
	g.want.Store(-1)
	return g
}

// advance records that partition p has been read up to (not including) next.
func (g *consumeGoal) advance(p int32, next int64) {
	if g.ends == nil || int(p) >= len(g.next) {
		return
	}
	a := &g.next[p]
	for {
		prev := a.Load()
		if next <= prev || a.CompareAndSwap(prev, next) {
			return
		}
	}
}

func (g *consumeGoal) counted(n int64) { g.got.Add(n) }

// setWant fixes how many records an e2e run must receive.
func (g *consumeGoal) setWant(n int64) {
	g.want.Store(n)
	g.check()
}

// check closes done once the goal is reached.
func (g *consumeGoal) check() {
	if g.reached() {
		g.once.Do(func() { close(g.done) })
	}
}

func (g *consumeGoal) reached() bool {
	got := g.got.Load()
	if g.limit > 0 && got >= g.limit {
		return true
	}
	if g.ends != nil {
		for p, end := range g.ends {
			if g.next[p].Load() < end {
				return false
			}
		}
		return true
	}
	want := g.want.Load()
	return want >= 0 && got >= want
}

// assignTracker follows a consumer group's assignments, so an e2e run can
// wait for the group to settle (every partition owned, every consumer busy)
// before producing, and rebalancing does not land inside the measurement.
type assignTracker struct {
	mu        sync.Mutex
	owned     map[int]int // consumer index -> partitions held
	total     int
	consumers int
	want      int
	settled   chan struct{}
	closeOne  sync.Once
}

func newAssignTracker(consumers, partitions int) *assignTracker {
	return &assignTracker{owned: map[int]int{}, consumers: consumers, want: partitions, settled: make(chan struct{})}
}

func (t *assignTracker) change(consumer, delta int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.owned[consumer] += delta
	t.total += delta
	busy := 0
	for _, n := range t.owned {
		if n > 0 {
			busy++
		}
	}
	if t.total == t.want && busy >= min(t.consumers, t.want) {
		t.closeOne.Do(func() { close(t.settled) })
	}
}

// consumerSpec is what one consumer worker needs from its run.
type consumerSpec struct {
	w         *Workload
	bootstrap []string
	extra     []kgo.Opt // RunOptions.ClientOpts
	epoch     time.Time
	runID     uint64
	meter     *meter
	goal      *consumeGoal
	index     int
	// Direct assignment: the partitions to read and where to start. Unused
	// with a group, which starts from its committed offsets.
	start   map[int32]int64
	group   string
	tracker *assignTracker // with a group
}

type consumer struct {
	spec consumerSpec
	cl   *kgo.Client
	rec  *recorder
	e2e  bool
}

func newConsumer(spec consumerSpec) (*consumer, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(spec.bootstrap...),
		kgo.ClientID("shale-bench-consumer"),
	}, spec.extra...)
	if spec.group != "" {
		idx, tr := spec.index, spec.tracker
		count := func(m map[string][]int32) int {
			n := 0
			for _, ps := range m {
				n += len(ps)
			}
			return n
		}
		opts = append(opts,
			kgo.ConsumerGroup(spec.group),
			kgo.ConsumeTopics(spec.w.Topic),
			kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.change(idx, count(m)) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.change(idx, -count(m)) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.change(idx, -count(m)) }),
		)
	} else {
		parts := map[int32]kgo.Offset{}
		for p, off := range spec.start {
			parts[p] = kgo.NewOffset().At(off)
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.w.Topic: parts}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("consumer %d: %w", spec.index, err)
	}
	return &consumer{spec: spec, cl: cl, rec: spec.meter.newRecorder(), e2e: spec.w.Mode == ModeE2E}, nil
}

// run polls until ctx ends. Fetch errors are counted in the meter.
func (c *consumer) run(ctx context.Context) {
	clk := newRealClock(c.spec.epoch)
	runID := c.spec.runID
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		now := clk.now()
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.spec.meter.fail(fmt.Errorf("fetch %s/%d: %w", topic, p, err))
			}
		})
		var n, b int64
		fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
			for _, r := range ftp.Records {
				if c.e2e {
					intended, ok := readE2EHeader(r.Value, runID)
					if !ok {
						continue
					}
					if c.spec.meter.measuring(intended) {
						c.rec.record(now - intended)
					}
				}
				n++
				b += int64(len(r.Key) + len(r.Value))
			}
			if k := len(ftp.Records); k > 0 {
				c.spec.goal.advance(ftp.Partition, ftp.Records[k-1].Offset+1)
			}
		})
		if n > 0 {
			c.spec.meter.add(n, b, now)
			c.spec.goal.counted(n)
		}
		c.spec.goal.check()
	}
}

func (c *consumer) close() { c.cl.Close() }
