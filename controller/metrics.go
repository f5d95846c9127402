package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsCollector reads the controller's state at scrape time, so nothing has to keep
// gauges up to date on every Raft transition.
type metricsCollector struct {
	s                                        *Server
	active, state, term, commit, applied, id *prometheus.Desc
}

// Collector returns the controller's Prometheus metrics: shale_controller_active (1 on
// the active controller), shale_raft_state (0 follower, 1 candidate, 2 leader, 3
// shutdown), shale_raft_term, shale_raft_commit_index, shale_raft_applied_index and
// shale_controller_active_id (the active controller's node id as this one sees it, -1
// when it knows none). Before Start only shale_controller_active is reported.
func (s *Server) Collector() prometheus.Collector {
	return &metricsCollector{
		s:       s,
		active:  prometheus.NewDesc("shale_controller_active", "1 when this node is the active controller, else 0.", nil, nil),
		state:   prometheus.NewDesc("shale_raft_state", "Raft state of this controller: 0 follower, 1 candidate, 2 leader, 3 shutdown.", nil, nil),
		term:    prometheus.NewDesc("shale_raft_term", "Current Raft term.", nil, nil),
		commit:  prometheus.NewDesc("shale_raft_commit_index", "Index of the last committed Raft log entry.", nil, nil),
		applied: prometheus.NewDesc("shale_raft_applied_index", "Index of the last Raft log entry applied to the metadata state machine.", nil, nil),
		id:      prometheus.NewDesc("shale_controller_active_id", "Node id of the active controller as this node sees it, -1 when unknown.", nil, nil),
	}
}

func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.active, m.state, m.term, m.commit, m.applied, m.id} {
		ch <- d
	}
}

func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	active := 0.0
	if m.s.IsActive() {
		active = 1
	}
	gauge(m.active, active)
	m.s.mu.Lock()
	r := m.s.raft
	m.s.mu.Unlock()
	if r == nil {
		return
	}
	gauge(m.state, float64(r.State()))
	gauge(m.term, float64(r.CurrentTerm()))
	gauge(m.commit, float64(r.CommitIndex()))
	gauge(m.applied, float64(r.AppliedIndex()))
	id, _ := m.s.Leader()
	gauge(m.id, float64(id))
}
