// Package timertest has a timer.Clock for tests: its timers fire only when the test
// advances it, so that session, rebalance and join timeouts are decided by the test's
// steps and not by how long the machine took between them.
package timertest

import (
	"sync"
	"time"

	"github.com/shalelog/shale/coordinator/timer"
)

// Manual is a timer.Clock that starts at 0 and moves only on Advance. The zero value
// is ready.
type Manual struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*manualTimer
}

type manualTimer struct {
	clock   *Manual
	at      time.Duration
	f       func()
	stopped bool
}

// AfterFunc arms f to run once the clock has advanced by d.
func (c *Manual) AfterFunc(d time.Duration, f func()) timer.Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock by d and runs, in this goroutine, the timers that came due.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	var due []*manualTimer
	for _, t := range c.timers {
		if !t.stopped && t.at <= c.now {
			t.stopped = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}
