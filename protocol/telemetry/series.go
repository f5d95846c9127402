package telemetry

import (
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// series is one exported time series.
type series struct {
	name     string
	kind     kind
	names    []string
	values   []string
	value    float64
	instance [16]byte
}

// seriesSet holds the exported series, by key (name and labels), and which instance
// each belongs to.
type seriesSet struct {
	byKey      map[string]*series
	byInstance map[[16]byte]map[string]struct{}
	// kinds is the type each exported name has: Prometheus needs one per name, so a point
	// whose name is exported with the other type is dropped.
	kinds map[string]kind
	names map[string]int // series per name
}

func newSeriesSet() *seriesSet {
	return &seriesSet{byKey: map[string]*series{}, byInstance: map[[16]byte]map[string]struct{}{}, kinds: map[string]kind{}, names: map[string]int{}}
}

func (s *seriesSet) len() int { return len(s.byKey) }

// add records an instance's points and returns how many were dropped: new series past
// maxSeries (negative: none are kept), or a name exported with another type. Base
// labels win over attributes of the same name.
func (s *seriesSet) add(id [16]byte, base []label, points []point, maxSeries int) int {
	dropped := 0
	for _, p := range points {
		ls := append([]label(nil), base...)
		for _, l := range p.labels {
			if !slices.ContainsFunc(base, func(b label) bool { return b.name == l.name }) {
				ls = append(ls, l)
			}
		}
		sortLabels(ls)
		var key strings.Builder
		key.WriteString(p.name)
		for _, l := range ls {
			key.WriteString("\x00" + l.name + "\x01" + l.value)
		}
		k := key.String()
		sr := s.byKey[k]
		if sr == nil {
			if kd, ok := s.kinds[p.name]; ok && kd != p.kind {
				dropped++
				continue
			}
			if maxSeries < 0 || len(s.byKey) >= maxSeries {
				dropped++
				continue
			}
			sr = &series{name: p.name, kind: p.kind, instance: id}
			for _, l := range ls {
				sr.names = append(sr.names, l.name)
				sr.values = append(sr.values, l.value)
			}
			s.byKey[k] = sr
			if s.byInstance[id] == nil {
				s.byInstance[id] = map[string]struct{}{}
			}
			s.byInstance[id][k] = struct{}{}
			s.kinds[p.name] = p.kind
			s.names[p.name]++
		}
		if p.delta {
			sr.value += p.value
		} else {
			sr.value = p.value
		}
	}
	return dropped
}

func (s *seriesSet) removeInstance(id [16]byte) {
	for k := range s.byInstance[id] {
		sr := s.byKey[k]
		delete(s.byKey, k)
		if s.names[sr.name]--; s.names[sr.name] == 0 {
			delete(s.names, sr.name)
			delete(s.kinds, sr.name)
		}
	}
	delete(s.byInstance, id)
}

// collector exports the series: an unchecked collector, since the names and labels
// come from clients.
type collector struct{ m *Manager }

func (collector) Describe(chan<- *prometheus.Desc) {}

const seriesHelp = "Pushed by a client (KIP-714 client telemetry)."

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	m.expireLocked(m.cfg.Now())
	var out []prometheus.Metric
	for _, k := range slices.Sorted(maps.Keys(m.series.byKey)) {
		sr := m.series.byKey[k]
		vt := prometheus.GaugeValue
		if sr.kind == kindCounter {
			vt = prometheus.CounterValue
		}
		pm, err := prometheus.NewConstMetric(prometheus.NewDesc(sr.name, seriesHelp, sr.names, nil), vt, sr.value, sr.values...)
		if err != nil {
			continue // a name or label the sanitizing let through; never expected
		}
		out = append(out, pm)
	}
	m.mu.Unlock()
	for _, pm := range out {
		ch <- pm
	}
}
