package controller

import (
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Client metrics subscriptions (KIP-714's CLIENT_METRICS resources) live in the image as
// client quotas do: AlterClientMetrics proposes one subscription's complete configs, the
// FSM records them in the change, and brokers receive them in deltas and image chunks.

// clientMetricsToPB lists every subscription in name order.
func clientMetricsToPB(c metadata.ClientMetrics) []*pb.ClientMetricsState {
	var out []*pb.ClientMetricsState
	for _, name := range slices.Sorted(maps.Keys(c)) {
		out = append(out, &pb.ClientMetricsState{Name: name, Configs: maps.Clone(c[name])})
	}
	return out
}

// applyClientMetrics returns c with each state's subscription replaced.
func applyClientMetrics(c metadata.ClientMetrics, states []*pb.ClientMetricsState) metadata.ClientMetrics {
	for _, st := range states {
		c = c.With(st.Name, maps.Clone(st.Configs))
	}
	return c
}

func (f *fsm) applyClientMetricsRecord(c *change, r *pb.ClientMetricsRecord) applyResult {
	for _, st := range r.Subscriptions {
		if c.clientMetrics == nil {
			c.clientMetrics = map[string]*pb.ClientMetricsState{}
		}
		c.clientMetrics[st.Name] = st
	}
	return applyResult{}
}

// clientMetricsDelta lists the change's subscriptions for its delta.
func (c *change) clientMetricsDelta() []*pb.ClientMetricsState {
	var out []*pb.ClientMetricsState
	for _, name := range slices.Sorted(maps.Keys(c.clientMetrics)) {
		out = append(out, c.clientMetrics[name])
	}
	return out
}
