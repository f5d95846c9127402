package console

import (
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Clock is the console's time: the sampler's ticker and the history's timestamps come
// from it, so that tests (and the simulation) drive sampling without sleeping.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker is a time.Ticker behind an interface.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// WallClock is the real clock.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// NewTicker is time.NewTicker.
func (WallClock) NewTicker(d time.Duration) Ticker { return wallTicker{time.NewTicker(d)} }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }

// Point is one sample: Unix milliseconds and a value.
type Point struct {
	T int64   `json:"t"`
	V float64 `json:"v"`
}

// Series is one named series' points, oldest first. Names are "in/<topic>" (records
// appended per second), "out/<topic>" (records committed by groups per second) and
// "lag/<group>/<topic>/<partition>" and "lagtotal/<group>" (records).
type Series struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// ring is one series' last points, a fixed-size circular buffer.
type ring struct {
	pts  []Point
	next int // where the next point goes
	full bool
}

func (r *ring) add(p Point) {
	r.pts[r.next] = p
	r.next++
	if r.next == len(r.pts) {
		r.next, r.full = 0, true
	}
}

func (r *ring) points() []Point {
	if !r.full {
		return append([]Point(nil), r.pts[:r.next]...)
	}
	out := make([]Point, 0, len(r.pts))
	out = append(out, r.pts[r.next:]...)
	return append(out, r.pts[:r.next]...)
}

func (r *ring) last() (Point, bool) {
	if !r.full && r.next == 0 {
		return Point{}, false
	}
	i := r.next - 1
	if i < 0 {
		i = len(r.pts) - 1
	}
	return r.pts[i], true
}

// History is a bounded in-memory store of series: each keeps its last Capacity points,
// and a series that got no point within the window is dropped, so neither a long run
// nor deleted topics and groups grow it; at most MaxSeries series are kept.
type History struct {
	mu        sync.Mutex
	capacity  int
	window    time.Duration
	maxSeries int
	series    map[string]*ring
}

// NewHistory keeps window's worth of points sampled every interval (at least one), and
// at most maxSeries series.
func NewHistory(window, interval time.Duration, maxSeries int) *History {
	c := int(window / interval)
	if c < 1 {
		c = 1
	}
	return &History{capacity: c, window: window, maxSeries: maxSeries, series: map[string]*ring{}}
}

// Add records v for name at t. A new series beyond MaxSeries is not kept (false).
func (h *History) Add(name string, t time.Time, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.series[name]
	if !ok {
		if len(h.series) >= h.maxSeries {
			return false
		}
		r = &ring{pts: make([]Point, h.capacity)}
		h.series[name] = r
	}
	r.add(Point{T: t.UnixMilli(), V: v})
	return true
}

// Prune drops the series whose last point is older than the window before now.
func (h *History) Prune(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cut := now.Add(-h.window).UnixMilli()
	for name, r := range h.series {
		if p, ok := r.last(); !ok || p.T < cut {
			delete(h.series, name)
		}
	}
}

// Snapshot returns the series whose names start with prefix ("" for all), by name.
func (h *History) Snapshot(prefix string) []Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Series
	for name, r := range h.series {
		if strings.HasPrefix(name, prefix) {
			out = append(out, Series{Name: name, Points: r.points()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len is the number of series held.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series)
}

// Merge joins histories of the same series from several nodes: points are bucketed by
// interval and a bucket's value is the mean of the nodes' points in it (every node
// samples the whole cluster, so their points differ only by when they were taken).
func Merge(interval time.Duration, sets ...[]Series) []Series {
	step := interval.Milliseconds()
	if step <= 0 {
		step = 1
	}
	type acc struct {
		sum float64
		n   int
	}
	byName := map[string]map[int64]*acc{}
	for _, set := range sets {
		for _, s := range set {
			b := byName[s.Name]
			if b == nil {
				b = map[int64]*acc{}
				byName[s.Name] = b
			}
			for _, p := range s.Points {
				k := p.T / step
				a := b[k]
				if a == nil {
					a = &acc{}
					b[k] = a
				}
				a.sum += p.V
				a.n++
			}
		}
	}
	out := make([]Series, 0, len(byName))
	for name, b := range byName {
		s := Series{Name: name, Points: make([]Point, 0, len(b))}
		for k, a := range b {
			s.Points = append(s.Points, Point{T: k * step, V: a.sum / float64(a.n)})
		}
		sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].T < s.Points[j].T })
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
