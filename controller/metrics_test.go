package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shalelog/shale/internal/testutil"
)

func gatherGauges(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]float64{}
	for _, mf := range mfs {
		vals[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	return vals
}

func TestCollector(t *testing.T) {
	q := newTestQuorum(t, 3, nil)
	lead := q.leader()
	b := q.broker(1, "")
	mustCreateTopic(t, b, "m", 1, 1)
	leaderID := float64(q.voters[lead].ID)
	for i, s := range q.servers {
		var vals map[string]float64
		// A follower learns the leader's id from its first heartbeat.
		testutil.Eventually(t, 30*time.Second, "the leader known", func() bool {
			vals = gatherGauges(t, s.Collector())
			return vals["shale_controller_active_id"] == leaderID
		})
		if len(vals) != 6 {
			t.Fatalf("controller %d: %v", i+1, vals)
		}
		wantActive, wantState := 0.0, 0.0
		if i == lead {
			wantActive, wantState = 1, 2
		}
		if vals["shale_controller_active"] != wantActive || vals["shale_raft_state"] != wantState ||
			vals["shale_raft_term"] < 1 || vals["shale_raft_commit_index"] < 1 || vals["shale_raft_applied_index"] < 1 {
			t.Errorf("controller %d: %v", i+1, vals)
		}
	}
	// A closed controller reports Raft's shutdown state.
	stopped := q.servers[(lead+1)%3]
	q.stop((lead + 1) % 3)
	if vals := gatherGauges(t, stopped.Collector()); vals["shale_raft_state"] != 3 || vals["shale_controller_active"] != 0 {
		t.Errorf("closed controller: %v", vals)
	}
	// Before Start, only activity is reported.
	s, err := NewServer(Config{NodeID: 1, Voters: q.voters[:1], DataDir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if vals := gatherGauges(t, s.Collector()); len(vals) != 1 || vals["shale_controller_active"] != 0 {
		t.Fatalf("unstarted: %v", vals)
	}
}
