package partition

import (
	"errors"
	"math"
	"sync"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// Compaction is a topic's cleanup.policy and compaction settings, with Kafka's names.
type Compaction struct {
	// Compact: cleanup.policy holds compact. (Whether it also holds delete is in the log
	// configuration: without it, retention is off.)
	Compact bool
	// MinCleanableRatio is min.cleanable.dirty.ratio (0.5).
	MinCleanableRatio float64
	// MinLagMs and MaxLagMs are min.compaction.lag.ms (0) and max.compaction.lag.ms
	// (MaxInt64): records younger than the first are never cleaned; a log holding dirty
	// records older than the second is cleaned whatever its ratio.
	MinLagMs, MaxLagMs int64
	// DeleteRetentionMs is delete.retention.ms (1 day): how long tombstones stay.
	DeleteRetentionMs int64
}

// CleanerStatus is what the cleaner sees of a compacted replica, for metrics and tools.
type CleanerStatus struct {
	// DirtyRatio is the share of the cleanable bytes (sealed segments below the high
	// watermark) not yet cleaned; DirtyBytes and CleanableBytes are the two counts.
	DirtyRatio                 float64
	DirtyBytes, CleanableBytes int64
	// LastRun is when the cleaner last finished with this replica (zero: never since
	// start); LastStats what it did then.
	LastRun   time.Time
	LastStats shalelog.CleanStats
}

// cleanerInfo is a partition's cleaner bookkeeping, under its own lock.
type cleanerInfo struct {
	mu      sync.Mutex
	lastRun time.Time
	last    shalelog.CleanStats
	// retryAt holds the replica back after a failed pass, so that a log the cleaner
	// cannot clean does not keep a thread spinning on it.
	retryAt time.Time
}

// CleanerStatus reports the replica's dirty ratio and last cleaner run; ok is false
// when the topic is not compacted.
func (p *Partition) CleanerStatus() (st CleanerStatus, ok bool) {
	set := p.Settings()
	if !set.Compaction.Compact {
		return st, false
	}
	st.DirtyRatio, st.DirtyBytes, st.CleanableBytes = p.log.DirtyRatio(p.HighWatermark(), set.Compaction.MinLagMs)
	p.cleanerInfo.mu.Lock()
	st.LastRun, st.LastStats = p.cleanerInfo.lastRun, p.cleanerInfo.last
	p.cleanerInfo.mu.Unlock()
	return st, true
}

// cleanable reports whether the cleaner should take this replica now, and its ratio.
func (p *Partition) cleanable(now time.Time) (float64, bool) {
	set := p.Settings()
	c := set.Compaction
	if !c.Compact {
		return 0, false
	}
	p.cleanerInfo.mu.Lock()
	retryAt := p.cleanerInfo.retryAt
	p.cleanerInfo.mu.Unlock()
	if now.Before(retryAt) {
		return 0, false
	}
	ratio, dirty, _ := p.log.DirtyRatio(p.HighWatermark(), c.MinLagMs)
	if dirty == 0 {
		return 0, false
	}
	if ratio >= c.MinCleanableRatio {
		return ratio, true
	}
	// max.compaction.lag.ms: a log whose dirty records have waited this long is due
	// whatever its ratio.
	if c.MaxLagMs > 0 && c.MaxLagMs < math.MaxInt64 {
		if ts := p.log.FirstDirtyTimestamp(p.HighWatermark(), c.MinLagMs); ts >= 0 && now.UnixMilli()-ts > c.MaxLagMs {
			return ratio, true
		}
	}
	return ratio, false
}

// Clean compacts the replica's log once, never past its high watermark. m is the
// cleaner thread's key map; throttle and done may be nil.
func (p *Partition) Clean(m *shalelog.OffsetMap, throttle func(int64), done <-chan struct{}) (shalelog.CleanStats, error) {
	c := p.Settings().Compaction
	st, err := p.log.Clean(shalelog.CleanOptions{
		UpperBound:         p.LastStableOffset(),
		Filter:             records.CompactionFilter{},
		Map:                m,
		DeleteRetentionMs:  c.DeleteRetentionMs,
		MinCompactionLagMs: c.MinLagMs,
		Throttle:           throttle,
		Done:               done,
		KeepEmptyBatch:     p.isLastProducerBatch,
	})
	p.cleanerInfo.mu.Lock()
	p.cleanerInfo.lastRun = time.Now()
	if err == nil {
		p.cleanerInfo.last = st
	}
	p.cleanerInfo.mu.Unlock()
	return st, err
}

// isLastProducerBatch says whether the batch ending at lastOffset is the last one of a
// producer this replica still tracks: only that one must keep its header when
// compaction empties it, so that the producer's epoch and last sequence survive a
// restart that rebuilds producer state from the log (Kafka's rule). Other emptied
// batches go.
func (p *Partition) isLastProducerBatch(producerID, lastOffset int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.producers.producers[producerID]
	return e != nil && len(e.Batches) > 0 && e.Batches[len(e.Batches)-1].LastOffset == lastOffset
}

// throttler holds the cleaners of a broker to log.cleaner.io.max.bytes.per.second, as
// Kafka's Throttler: it sleeps whenever the bytes since the window began run ahead of
// the rate.
type throttler struct {
	rate float64 // bytes per second; <= 0 or +Inf: no limit
	stop <-chan struct{}

	mu    sync.Mutex
	start time.Time
	bytes float64
}

const throttleWindow = time.Second

func (t *throttler) take(n int64) {
	if t == nil || t.rate <= 0 || math.IsInf(t.rate, 1) {
		return
	}
	t.mu.Lock()
	now := time.Now()
	if t.start.IsZero() || now.Sub(t.start) > throttleWindow {
		t.start, t.bytes = now, 0
	}
	t.bytes += float64(n)
	due := time.Duration(t.bytes / t.rate * float64(time.Second))
	wait := due - now.Sub(t.start)
	t.mu.Unlock()
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.stop:
	}
}

// cleanerRetryBackoff is how long a replica whose cleaning failed is left alone.
const cleanerRetryBackoff = time.Minute

// cleaners are the broker's cleaner threads (log.cleaner.threads), each with its own key
// map of log.cleaner.dedupe.buffer.size / threads bytes.
type cleaners struct {
	m        *Manager
	throttle *throttler
	wg       sync.WaitGroup

	mu         sync.Mutex
	inProgress map[*Partition]bool
}

func (m *Manager) startCleaners() {
	if m.cfg.CleanerDisabled {
		return
	}
	c := &cleaners{m: m, inProgress: map[*Partition]bool{}, throttle: &throttler{rate: m.cfg.CleanerIOMaxBytesPerSecond, stop: m.stop}}
	m.cleaners = c
	per := m.cfg.CleanerDedupeBufferSize / int64(m.cfg.CleanerThreads)
	for range m.cfg.CleanerThreads {
		c.wg.Add(1)
		go c.run(shalelog.NewOffsetMap(per))
	}
}

func (c *cleaners) run(om *shalelog.OffsetMap) {
	defer c.wg.Done()
	tick := time.NewTicker(c.m.cfg.CleanerBackoff)
	defer tick.Stop()
	for {
		select {
		case <-c.m.stop:
			return
		case <-tick.C:
		}
		// Clean the dirtiest logs until none is due, then wait for the next tick.
		for {
			select {
			case <-c.m.stop:
				return
			default:
			}
			p := c.pick()
			if p == nil {
				break
			}
			c.clean(p, om)
		}
	}
}

// pick takes the dirtiest due replica that no other thread is cleaning.
func (c *cleaners) pick() *Partition {
	now := time.Now()
	var best *Partition
	bestRatio := -1.0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.m.All() {
		if c.inProgress[p] {
			continue
		}
		if ratio, due := p.cleanable(now); due && ratio > bestRatio {
			best, bestRatio = p, ratio
		}
	}
	if best != nil {
		c.inProgress[best] = true
	}
	return best
}

func (c *cleaners) clean(p *Partition, om *shalelog.OffsetMap) {
	defer func() {
		c.mu.Lock()
		delete(c.inProgress, p)
		c.mu.Unlock()
	}()
	st, err := p.Clean(om, c.throttle.take, c.m.stop)
	if errors.Is(err, shalelog.ErrCleanAborted) {
		return
	}
	if err != nil {
		p.cleanerInfo.mu.Lock()
		p.cleanerInfo.retryAt = time.Now().Add(cleanerRetryBackoff)
		p.cleanerInfo.mu.Unlock()
		p.lg.Warn("log cleaner failed; retrying later", "retry_in", cleanerRetryBackoff, "err", err)
		return
	}
	p.lg.Info("log cleaner run", "segments", st.Segments, "bytes_read", st.BytesRead, "bytes_written", st.BytesWritten,
		"records_removed", st.RecordsRemoved, "dirty_from", st.FirstDirty, "cleaned_to", st.MapEnd, "duration", st.Duration)
}

// CleanNow runs one cleaning pass over every compacted replica that is due, on the
// caller's goroutine: for tests and tools.
func (m *Manager) CleanNow() {
	if m.cleaners == nil {
		return
	}
	om := shalelog.NewOffsetMap(m.cfg.CleanerDedupeBufferSize / int64(m.cfg.CleanerThreads))
	for p := m.cleaners.pick(); p != nil; p = m.cleaners.pick() {
		m.cleaners.clean(p, om)
	}
}
