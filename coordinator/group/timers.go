package group

import "time"

// timerSlot is one re-armable timer of a group or member. Its sequence number tells a
// callback that fired late (after being stopped or re-armed) to do nothing.
type timerSlot struct {
	t   *time.Timer
	seq uint64
}

// arm (re)starts s: fn runs once after d, under c.mu, unless s is re-armed or stopped
// first or the coordinator closes.
func (c *Coordinator) arm(s *timerSlot, d time.Duration, fn func()) {
	s.stop()
	c.timerSeq++
	seq := c.timerSeq
	s.seq = seq
	s.t = time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || s.seq != seq {
			return
		}
		s.t = nil
		s.seq = 0
		fn()
	})
}

func (s *timerSlot) stop() {
	if s.t != nil {
		s.t.Stop()
		s.t = nil
	}
	s.seq = 0
}

func (s *timerSlot) armed() bool { return s.t != nil }
