package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// clock is the time source of one run, as durations since the run's epoch.
// Tests substitute a fake one to drive the scheduler deterministically.
type clock interface {
	now() time.Duration
	// sleepUntil returns when now() >= t, or with ctx's error.
	sleepUntil(ctx context.Context, t time.Duration) error
}

// realClock measures from a monotonic epoch, so wall-clock steps never
// distort a latency.
type realClock struct {
	epoch time.Time
	timer *time.Timer // reused by one goroutine: sleeping allocates nothing
}

func newRealClock(epoch time.Time) *realClock { return &realClock{epoch: epoch} }

func (c *realClock) now() time.Duration { return time.Since(c.epoch) }

// spinThreshold is the wait below which sleeping is not worth it: the timer
// would wake later than the record is due anyway.
const spinThreshold = 50 * time.Microsecond

func (c *realClock) sleepUntil(ctx context.Context, t time.Duration) error {
	d := t - c.now()
	if d <= spinThreshold {
		return ctx.Err()
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return nil
	case <-ctx.Done():
		c.timer.Stop()
		return ctx.Err()
	}
}

// schedule is an open-loop send schedule: record n is due at
// start + n*interval, whatever happened to the records before it.
type schedule struct {
	start    time.Duration
	interval float64 // nanoseconds between records
	n        int64
}

func newSchedule(start time.Duration, rate float64) *schedule {
	return &schedule{start: start, interval: float64(time.Second) / rate}
}

// next returns the next record's intended send time.
func (s *schedule) next() time.Duration {
	t := s.start + time.Duration(float64(s.n)*s.interval)
	s.n++
	return t
}

// pacer decides when each record is sent. Closed loop (sched nil), a record
// goes as soon as the previous one is handed over, and its latency is
// measured from then. Open loop, the pacer waits for each record's due time
// and hands back that intended time: if the producer falls behind, the
// overdue records go at once and their latency includes how late they are.
type pacer struct {
	clock clock
	sched *schedule
	end   time.Duration // no record is due at or after end; 0: no end
	quota int64         // records to measure; 0: no limit
	// warm counts the records that completed before the measurement
	// window opened: a quota counts records measured, so these come on
	// top of it. Nil: none.
	warm *atomic.Int64
	sent int64
}

// quotaLeft reports whether the quota allows another record.
func (p *pacer) quotaLeft() bool {
	if p.quota <= 0 {
		return true
	}
	limit := p.quota
	if p.warm != nil {
		limit += p.warm.Load()
	}
	return p.sent < limit
}

// next waits until the next record is due and returns its intended send
// time; ok is false once the run is over (end, quota or ctx).
func (p *pacer) next(ctx context.Context) (intended time.Duration, ok bool) {
	if !p.quotaLeft() {
		return 0, false
	}
	if ctx.Err() != nil {
		return 0, false
	}
	if p.sched == nil {
		now := p.clock.now()
		if p.end > 0 && now >= p.end {
			return 0, false
		}
		p.sent++
		return now, true
	}
	t := p.sched.next()
	if p.end > 0 && t >= p.end {
		return 0, false
	}
	if err := p.clock.sleepUntil(ctx, t); err != nil {
		return 0, false
	}
	p.sent++
	return t, true
}

// openLoop reports whether records carry scheduled rather than actual send
// times.
func (p *pacer) openLoop() bool { return p.sched != nil }
