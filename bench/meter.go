package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// meter counts one role's records (produced, or consumed) across its
// workers. Counters are atomics written by the workers; the latency
// histograms are one recorder per worker.
type meter struct {
	role        string
	latencyKind string

	// records and bytes count what completed inside the measurement
	// window (from start on); all and allBytes count everything, warm-up
	// included.
	records  atomic.Int64
	bytes    atomic.Int64
	all      atomic.Int64
	allBytes atomic.Int64
	errors   atomic.Int64
	// abandoned counts records given up unacknowledged at the end of a closed
	// loop.
	abandoned atomic.Int64
	start     atomic.Int64 // ns since epoch when the window opens
	last      atomic.Int64 // ns since epoch of the last counted record

	errMu    sync.Mutex
	firstErr error

	recMu sync.Mutex
	recs  []*recorder

	// Owned by the progress reporter.
	prevRecords, prevBytes int64
}

func newMeter(role, latencyKind string) *meter {
	return &meter{role: role, latencyKind: latencyKind}
}

// newRecorder gives a worker its own latency recorder.
func (m *meter) newRecorder() *recorder {
	r := newRecorder()
	m.recMu.Lock()
	m.recs = append(m.recs, r)
	m.recMu.Unlock()
	return r
}

// begin opens the measurement window at the given time; what completes
// before it is warm-up.
func (m *meter) begin(at time.Duration) { m.start.Store(int64(at)) }

// opening returns when the measurement window opens.
func (m *meter) opening() time.Duration { return time.Duration(m.start.Load()) }

// measuring reports whether a record intended (or completed) at t falls in
// the window; latencies are only recorded for those.
func (m *meter) measuring(t time.Duration) bool { return int64(t) >= m.start.Load() }

// add counts n records of b bytes that completed at the given time.
func (m *meter) add(n, b int64, at time.Duration) {
	m.all.Add(n)
	m.allBytes.Add(b)
	if !m.measuring(at) {
		return
	}
	m.records.Add(n)
	m.bytes.Add(b)
	for {
		prev := m.last.Load()
		if int64(at) <= prev || m.last.CompareAndSwap(prev, int64(at)) {
			return
		}
	}
}

func (m *meter) fail(err error) {
	m.errors.Add(1)
	m.errMu.Lock()
	if m.firstErr == nil {
		m.firstErr = err
	}
	m.errMu.Unlock()
}

func (m *meter) err() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.firstErr
}

func (m *meter) recorders() []*recorder {
	m.recMu.Lock()
	defer m.recMu.Unlock()
	return append([]*recorder(nil), m.recs...)
}

// interval returns the records and bytes since the previous call, warm-up
// included, and the latencies recorded in that time.
func (m *meter) interval() (records, bytes int64, lat *hdrhistogram.Histogram) {
	r, b := m.all.Load(), m.allBytes.Load()
	records, bytes = r-m.prevRecords, b-m.prevBytes
	m.prevRecords, m.prevBytes = r, b
	lat = newHistogram()
	for _, rec := range m.recorders() {
		rec.takeInterval(lat)
	}
	return records, bytes, lat
}

// stats reduces the role to its figures. The throughput window runs from
// the role's start to its last record, or to end when nothing was counted.
func (m *meter) stats(end time.Duration) RoleStats {
	s := RoleStats{
		Role:      m.role,
		Records:   m.records.Load(),
		Bytes:     m.bytes.Load(),
		Errors:    m.errors.Load(),
		Abandoned: m.abandoned.Load(),
	}
	s.WarmupRecords = m.all.Load() - s.Records
	if err := m.err(); err != nil {
		s.FirstError = err.Error()
	}
	start := time.Duration(m.start.Load())
	stop := time.Duration(m.last.Load())
	if s.Records == 0 || stop <= start {
		stop = end
	}
	// A run that ended before its window opened measured nothing, for no
	// time.
	s.Seconds = max(stop-start, 0).Seconds()
	if s.Seconds > 0 {
		s.RecordsPerSec = float64(s.Records) / s.Seconds
		s.MBPerSec = float64(s.Bytes) / s.Seconds / 1e6
	}
	h := newHistogram()
	for _, rec := range m.recorders() {
		rec.mergeTotal(h)
	}
	if sum := summarize(h); sum != nil {
		s.Latency = sum
		s.LatencyKind = m.latencyKind
	}
	return s
}
