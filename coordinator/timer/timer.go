// Package timer is the coordinators' re-armable timer: the session, rebalance and join
// timeouts of the group coordinators and the periodic sweeps of the transaction
// coordinator.
//
// A coordinator keeps its state under one lock, and its timers fire under that lock
// too. A timer that fires just as it is re-armed or stopped must then do nothing, yet
// time.Timer.Stop cannot tell the callback that already started: each arming carries a
// sequence number that the callback checks once it holds the lock. The clock is an
// interface so that a test or a simulation can fire the timers itself.
package timer

import (
	"sync"
	"time"
)

// Clock starts timers.
type Clock interface {
	// AfterFunc runs f in its own goroutine after d, unless stopped first.
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper stops a timer started by a Clock.
type Stopper interface {
	// Stop prevents the timer from firing; false when it has already fired or been
	// stopped.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }

// Set is the timers of one coordinator, all firing under its lock. Every method but
// Wait must be called with that lock held.
type Set struct {
	clock  Clock
	mu     sync.Locker
	seq    uint64
	closed bool
	armed  map[*Slot]struct{}
	// running counts the timers armed and not stopped, so that Wait returns only once
	// no callback can run.
	running sync.WaitGroup
}

// NewSet returns the timers of the coordinator whose lock is mu; a nil clock is Real.
func NewSet(clock Clock, mu sync.Locker) *Set {
	if clock == nil {
		clock = Real{}
	}
	return &Set{clock: clock, mu: mu, armed: map[*Slot]struct{}{}}
}

// Slot is one re-armable timer. The zero value is stopped.
type Slot struct {
	set *Set
	t   Stopper
	seq uint64
}

// Arm (re)starts s: fn runs once after d, with the set's lock held, unless s is re-armed
// or stopped first or the set is closed.
func (set *Set) Arm(s *Slot, d time.Duration, fn func()) {
	s.Stop()
	if set.closed {
		return
	}
	set.seq++
	seq := set.seq
	s.set, s.seq = set, seq
	set.armed[s] = struct{}{}
	set.running.Add(1)
	s.t = set.clock.AfterFunc(d, func() {
		defer set.running.Done()
		set.mu.Lock()
		defer set.mu.Unlock()
		if set.closed || s.seq != seq {
			return
		}
		s.t, s.seq = nil, 0
		delete(set.armed, s)
		fn()
	})
}

// Stop stops s; a callback already waiting for the lock does nothing.
func (s *Slot) Stop() {
	if s.t != nil {
		if s.t.Stop() {
			s.set.running.Done()
		}
		delete(s.set.armed, s)
		s.t = nil
	}
	s.seq = 0
}

// Armed reports whether s is armed.
func (s *Slot) Armed() bool { return s.t != nil }

// Close stops every timer of the set; Arm does nothing afterwards.
func (set *Set) Close() {
	set.closed = true
	for s := range set.armed {
		s.Stop()
	}
}

// Wait waits, without the set's lock, until the callbacks of a closed set have
// returned.
func (set *Set) Wait() { set.running.Wait() }
