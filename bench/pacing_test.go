package bench

import (
	"context"
	"testing"
	"time"
)

// fakeClock advances only when told to, or when a sleeper asks for a time
// in the future (it jumps there).
type fakeClock struct{ t time.Duration }

func (c *fakeClock) now() time.Duration { return c.t }
func (c *fakeClock) sleepUntil(ctx context.Context, t time.Duration) error {
	if t > c.t {
		c.t = t
	}
	return ctx.Err()
}

func TestSchedule(t *testing.T) {
	s := newSchedule(time.Second, 1000)
	for i := range 5 {
		if got, want := s.next(), time.Second+time.Duration(i)*time.Millisecond; got != want {
			t.Fatalf("record %d due at %v, want %v", i, got, want)
		}
	}
	// Fractional intervals do not accumulate rounding error.
	s = newSchedule(0, 3)
	var last time.Duration
	for range 3001 {
		last = s.next()
	}
	if last != 1000*time.Second {
		t.Errorf("record 3000 at 3/s due at %v, want 1000s", last)
	}
}

func TestPacerClosedLoop(t *testing.T) {
	clk := &fakeClock{}
	p := &pacer{clock: clk, end: time.Second}
	n := 0
	for {
		at, ok := p.next(context.Background())
		if !ok {
			break
		}
		if at != clk.t {
			t.Fatalf("closed loop intended %v, now %v", at, clk.t)
		}
		clk.t += 10 * time.Millisecond
		n++
	}
	if n != 100 {
		t.Errorf("sent %d records in 1s at 10ms each, want 100", n)
	}

	p = &pacer{clock: &fakeClock{}, quota: 7}
	for n = 0; ; n++ {
		if _, ok := p.next(context.Background()); !ok {
			break
		}
	}
	if n != 7 {
		t.Errorf("quota 7 sent %d", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := (&pacer{clock: &fakeClock{}}).next(ctx); ok {
		t.Error("a cancelled context still sends")
	}
}

// TestOpenLoopMeasuresFromIntendedTime is the coordinated-omission check:
// when the sender stalls, the records that fell due during the stall are
// late, and their latency must say so. Measuring from the actual send time
// would show one slow record and hide the rest.
func TestOpenLoopMeasuresFromIntendedTime(t *testing.T) {
	const rate = 1000 // 1 ms apart
	clk := &fakeClock{}
	p := &pacer{clock: clk, sched: newSchedule(0, rate), end: time.Second}
	if !p.openLoop() {
		t.Fatal("open loop not detected")
	}
	r := newRecorder()
	var fromSend []time.Duration
	sent := 0
	for {
		intended, ok := p.next(context.Background())
		if !ok {
			break
		}
		sendAt := clk.now()
		if sent == 100 {
			clk.t += 100 * time.Millisecond // the send blocks for 100 ms
		}
		// Acknowledged at once: latency is all lateness.
		r.record(clk.now() - intended)
		fromSend = append(fromSend, clk.now()-sendAt)
		sent++
	}
	if sent != rate {
		t.Fatalf("sent %d records in 1s at %d/s, want exactly %d", sent, rate, rate)
	}
	h := newHistogram()
	r.mergeTotal(h)
	// Record 100 waited 100 ms; the 99 due during the stall went late by
	// 99, 98, ... 1 ms. So about 10% of records are late, the worst by 100 ms.
	late := 0
	for _, b := range h.Distribution() {
		if b.From >= 1000 { // 1 ms, in µs
			late += int(b.Count)
		}
	}
	if late < 95 || late > 101 {
		t.Errorf("%d records late by >= 1ms, want about 100", late)
	}
	if got := summarize(h).MaxMs; got < 99 || got > 101 {
		t.Errorf("max latency %v ms, want 100", got)
	}
	if p95 := h.ValueAtPercentile(95); p95 < 40_000 {
		t.Errorf("p95 %d µs: the stall is hidden", p95)
	}
	slowFromSend := 0
	for _, d := range fromSend {
		if d >= time.Millisecond {
			slowFromSend++
		}
	}
	if slowFromSend != 1 {
		t.Errorf("measured from send time, %d records look slow; the test's premise is that only 1 does", slowFromSend)
	}
}

func TestRealClockSleepUntil(t *testing.T) {
	c := newRealClock(time.Now())
	target := c.now() + 2*time.Millisecond
	if err := c.sleepUntil(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	if c.now() < target-spinThreshold {
		t.Errorf("woke at %v, before %v", c.now(), target)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.sleepUntil(ctx, c.now()+time.Hour); err == nil {
		t.Error("sleep ignored a cancelled context")
	}
}
