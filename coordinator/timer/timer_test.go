package timer

import (
	"sync"
	"testing"
	"time"
)

// fakeClock fires timers only when the test says so, even stopped ones (as a real
// timer whose callback started just before Stop would).
type fakeClock struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{d: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// fire runs timer i's callback, marking it fired (so that a later Stop returns false).
func (c *fakeClock) fire(i int) {
	c.mu.Lock()
	t := c.timers[i]
	c.mu.Unlock()
	t.stopped = true
	t.f()
}

func TestSlot(t *testing.T) {
	var mu sync.Mutex
	clock := &fakeClock{}
	set := NewSet(clock, &mu)
	var s Slot
	fired := 0

	mu.Lock()
	set.Arm(&s, time.Second, func() { fired++ })
	if !s.Armed() {
		t.Fatal("not armed after Arm")
	}
	mu.Unlock()
	clock.fire(0)
	if fired != 1 || s.Armed() {
		t.Fatalf("fired %d times, armed %v; want 1, false", fired, s.Armed())
	}

	// A callback that starts just before its slot is re-armed does nothing.
	mu.Lock()
	set.Arm(&s, time.Second, func() { fired += 10 })
	clock.timers[1].stopped = true // the callback has started: Stop is too late
	set.Arm(&s, 2*time.Second, func() { fired += 100 })
	mu.Unlock()
	clock.fire(1)
	if fired != 1 || !s.Armed() {
		t.Fatalf("late callback ran: fired %d, armed %v", fired, s.Armed())
	}
	clock.fire(2)
	if fired != 101 {
		t.Fatalf("fired %d, want 101", fired)
	}

	// Stop, and Close, prevent the callbacks that have not started.
	var a, b Slot
	mu.Lock()
	set.Arm(&a, time.Second, func() { t.Error("stopped timer fired") })
	a.Stop()
	set.Arm(&b, time.Second, func() { t.Error("timer fired after Close") })
	set.Close()
	if a.Armed() || b.Armed() {
		t.Error("armed after Stop and Close")
	}
	set.Arm(&a, time.Second, func() { t.Error("timer armed after Close fired") })
	if a.Armed() {
		t.Error("Arm after Close armed the slot")
	}
	mu.Unlock()
	if !clock.timers[3].stopped || !clock.timers[4].stopped || len(clock.timers) != 5 {
		t.Fatalf("timers not stopped: %+v", clock.timers)
	}
	set.Wait()
}

// A callback that has started when the set closes still returns, and Wait waits for it.
func TestWaitForRunningCallback(t *testing.T) {
	var mu sync.Mutex
	clock := &fakeClock{}
	set := NewSet(clock, &mu)
	var s Slot
	mu.Lock()
	set.Arm(&s, time.Second, func() { t.Error("callback ran after Close") })
	clock.timers[0].stopped = true // started: Close cannot stop it
	set.Close()
	mu.Unlock()
	done := make(chan struct{})
	go func() { set.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatal("Wait returned before the running callback did")
	case <-time.After(50 * time.Millisecond):
	}
	clock.timers[0].f()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return after the callback")
	}
}

func TestRealClock(t *testing.T) {
	var mu sync.Mutex
	set := NewSet(nil, &mu)
	var s Slot
	fired := make(chan struct{})
	mu.Lock()
	set.Arm(&s, time.Millisecond, func() { close(fired) })
	mu.Unlock()
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("real timer did not fire")
	}
	mu.Lock()
	set.Close()
	mu.Unlock()
	set.Wait()
}
