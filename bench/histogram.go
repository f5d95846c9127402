package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1µs to one hour with three
// significant digits: 0.1% resolution everywhere in that range.
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, histHighest, histSigFigs)
}

// recorder collects one worker's latencies: a histogram for the whole run
// and one for the current progress interval. Each worker has its own, so
// the lock is only contended when the progress line takes the interval.
type recorder struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram
	interval *hdrhistogram.Histogram
}

func newRecorder() *recorder {
	return &recorder{total: newHistogram(), interval: newHistogram()}
}

func toMicros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if us < histLowest {
		return histLowest
	}
	if us > histHighest {
		return histHighest
	}
	return us
}

// record adds one latency. Values beyond an hour are clamped, not dropped,
// so a stall can never vanish from the percentiles.
func (r *recorder) record(d time.Duration) {
	us := toMicros(d)
	r.mu.Lock()
	// The value is clamped into range, so RecordValue cannot fail.
	_ = r.total.RecordValue(us)
	_ = r.interval.RecordValue(us)
	r.mu.Unlock()
}

// recordN adds n samples of the same latency under one lock.
func (r *recorder) recordN(d time.Duration, n int64) {
	if n <= 0 {
		return
	}
	us := toMicros(d)
	r.mu.Lock()
	_ = r.total.RecordValues(us, n)
	_ = r.interval.RecordValues(us, n)
	r.mu.Unlock()
}

// takeInterval merges the current interval into into and starts a new one.
func (r *recorder) takeInterval(into *hdrhistogram.Histogram) {
	r.mu.Lock()
	into.Merge(r.interval)
	r.interval.Reset()
	r.mu.Unlock()
}

// mergeTotal merges the whole run into into.
func (r *recorder) mergeTotal(into *hdrhistogram.Histogram) {
	r.mu.Lock()
	into.Merge(r.total)
	r.mu.Unlock()
}

// LatencySummary is a histogram reduced to the figures reports print, in
// milliseconds.
type LatencySummary struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) *LatencySummary {
	if h.TotalCount() == 0 {
		return nil
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	q := h.ValueAtPercentiles([]float64{50, 95, 99, 99.9})
	return &LatencySummary{
		Count:  h.TotalCount(),
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(q[50]),
		P95Ms:  ms(q[95]),
		P99Ms:  ms(q[99]),
		P999Ms: ms(q[99.9]),
		MaxMs:  ms(h.Max()),
	}
}
