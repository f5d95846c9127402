package bench

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestRecorderPercentiles(t *testing.T) {
	r := newRecorder()
	// 1..10000 µs, once each: the q-quantile is about q*10 ms.
	for us := 1; us <= 10000; us++ {
		r.record(time.Duration(us) * time.Microsecond)
	}
	h := newHistogram()
	r.mergeTotal(h)
	s := summarize(h)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*0.002+0.002 {
			t.Errorf("%s = %v ms, want %v", name, got, want)
		}
	}
	if s.Count != 10000 {
		t.Errorf("count %d", s.Count)
	}
	near("p50", s.P50Ms, 5)
	near("p95", s.P95Ms, 9.5)
	near("p99", s.P99Ms, 9.9)
	near("p99.9", s.P999Ms, 9.99)
	near("max", s.MaxMs, 10)
	near("mean", s.MeanMs, 5.0005)
}

func TestRecorderClampsAndIntervals(t *testing.T) {
	r := newRecorder()
	r.record(-time.Second)  // a clock oddity: clamped to 1µs
	r.record(2 * time.Hour) // beyond the range: clamped, not dropped
	r.recordN(time.Millisecond, 3)
	r.recordN(time.Millisecond, 0)

	iv := newHistogram()
	r.takeInterval(iv)
	if iv.TotalCount() != 5 {
		t.Errorf("interval count %d, want 5", iv.TotalCount())
	}
	if got := summarize(iv).MaxMs; math.Abs(got-float64(time.Hour/time.Millisecond)) > 3600 {
		t.Errorf("max %v ms, want about an hour", got)
	}
	// The interval restarts; the total keeps everything.
	iv2 := newHistogram()
	r.takeInterval(iv2)
	if iv2.TotalCount() != 0 {
		t.Errorf("second interval has %d values", iv2.TotalCount())
	}
	r.record(time.Millisecond)
	tot := newHistogram()
	r.mergeTotal(tot)
	if tot.TotalCount() != 6 {
		t.Errorf("total %d, want 6", tot.TotalCount())
	}
	if summarize(newHistogram()) != nil {
		t.Error("an empty histogram should summarize to nil")
	}
}

func TestRecorderConcurrent(t *testing.T) {
	r := newRecorder()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				r.record(time.Millisecond)
			}
		}()
	}
	iv := newHistogram()
	for range 10 {
		r.takeInterval(iv)
	}
	wg.Wait()
	r.takeInterval(iv)
	if iv.TotalCount() != 4000 {
		t.Errorf("intervals saw %d values, want 4000", iv.TotalCount())
	}
}

func TestMeterWindow(t *testing.T) {
	m := newMeter("produce", "send→ack")
	m.begin(time.Second)
	m.add(10, 100, 500*time.Millisecond) // warm-up
	m.add(20, 200, 1500*time.Millisecond)
	m.add(20, 200, 3*time.Second)
	if !m.measuring(time.Second) || m.measuring(999*time.Millisecond) {
		t.Error("window edge")
	}
	s := m.stats(10 * time.Second)
	if s.Records != 40 || s.Bytes != 400 || m.all.Load() != 50 {
		t.Errorf("records %d bytes %d all %d", s.Records, s.Bytes, m.all.Load())
	}
	// From the window's start to the last record: 2 s.
	if s.Seconds != 2 || s.RecordsPerSec != 20 || s.MBPerSec != 400.0/2/1e6 {
		t.Errorf("seconds %v rec/s %v MB/s %v", s.Seconds, s.RecordsPerSec, s.MBPerSec)
	}
	// Progress intervals count warm-up too.
	n, b, _ := m.interval()
	if n != 50 || b != 500 {
		t.Errorf("interval %d %d", n, b)
	}
	if n, _, _ := m.interval(); n != 0 {
		t.Errorf("second interval %d", n)
	}
	m.fail(errTest("first"))
	m.fail(errTest("second"))
	if s := m.stats(0); s.Errors != 2 || s.FirstError != "first" {
		t.Errorf("errors %d %q", s.Errors, s.FirstError)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
