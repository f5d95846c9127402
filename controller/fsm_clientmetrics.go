package controller

import (
	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Client metrics subscriptions (KIP-714's CLIENT_METRICS resources) are named configs
// (namedconfigs.go) and live in the image as client quotas do: AlterClientMetrics
// proposes one subscription's complete configs, the FSM records them in the change, and
// brokers receive them in deltas and image chunks.

// clientMetricsToPB lists every subscription in name order.
func clientMetricsToPB(c metadata.ClientMetrics) []*pb.ClientMetricsState {
	return namedConfigsToPB(c, func(name string, configs map[string]string) *pb.ClientMetricsState {
		return &pb.ClientMetricsState{Name: name, Configs: configs}
	})
}

// applyClientMetrics returns c with each state's subscription replaced.
func applyClientMetrics(c metadata.ClientMetrics, states []*pb.ClientMetricsState) metadata.ClientMetrics {
	return applyNamedConfigs(c, states, (*pb.ClientMetricsState).GetName)
}

func (f *fsm) applyClientMetricsRecord(c *change, r *pb.ClientMetricsRecord) applyResult {
	recordNamedConfigs(&c.clientMetrics, r.Subscriptions, (*pb.ClientMetricsState).GetName)
	return applyResult{}
}

// clientMetricsDelta lists the change's subscriptions for its delta.
func (c *change) clientMetricsDelta() []*pb.ClientMetricsState {
	return namedConfigsDelta(c.clientMetrics)
}
