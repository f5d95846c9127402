package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// simStart is the virtual time every run starts at. It lies in the future on purpose:
// the log's time-based rules (retention.ms, segment.ms) read the wall clock, and records
// stamped after it are never old by it, while a backfill stamped in 2000 always is.
var simStart = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// event is one step of the run: something that happens at a virtual time.
type event struct {
	at   time.Time
	seq  uint64
	name string
	fn   func()
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// scheduler is the run's only source of time and order: a virtual clock, a queue of
// events ordered by time then by the order they were scheduled, and the seeded random
// source every choice draws from. Nothing in a run reads the wall clock or starts a
// goroutine that the scheduler does not step, so a seed replays the same run.
type scheduler struct {
	rng   *rand.Rand
	now   time.Time
	seq   uint64
	q     eventHeap
	trace *trace
}

func newScheduler(seed uint64, tr *trace) *scheduler {
	return &scheduler{rng: rand.New(rand.NewPCG(seed, seed^0x5a17e5a17e)), now: simStart, trace: tr}
}

// after schedules fn d from now.
func (s *scheduler) after(d time.Duration, name string, fn func()) {
	s.seq++
	heap.Push(&s.q, &event{at: s.now.Add(d), seq: s.seq, name: name, fn: fn})
}

// step runs the next event due by end; false when there is none.
func (s *scheduler) step(end time.Time) bool {
	if len(s.q) == 0 || s.q[0].at.After(end) {
		return false
	}
	e := heap.Pop(&s.q).(*event)
	s.now = e.at
	e.fn()
	return true
}

// chance is true with probability p.
func (s *scheduler) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

// between is a duration drawn uniformly from [lo, hi).
func (s *scheduler) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

// trace keeps the last events of a run, readable, for the report of a failing seed.
type trace struct {
	lines []string
	next  int
	full  bool
	clock func() time.Time
}

const traceLines = 400

func newTrace() *trace { return &trace{lines: make([]string, traceLines)} }

func (t *trace) add(format string, args ...any) {
	at := ""
	if t.clock != nil {
		at = fmt.Sprintf("%9.3fs ", t.clock().Sub(simStart).Seconds())
	}
	t.lines[t.next] = at + fmt.Sprintf(format, args...)
	t.next++
	if t.next == len(t.lines) {
		t.next, t.full = 0, true
	}
}

func (t *trace) String() string {
	var b strings.Builder
	if t.full {
		for _, l := range t.lines[t.next:] {
			b.WriteString(l + "\n")
		}
	}
	for _, l := range t.lines[:t.next] {
		b.WriteString(l + "\n")
	}
	return b.String()
}
