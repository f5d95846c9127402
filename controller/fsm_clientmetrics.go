package controller

import (
	"context"
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

func (v *service) AlterClientMetrics(ctx context.Context, req *pb.AlterClientMetricsRequest) (*pb.AlterClientMetricsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	ops := make([]metadata.ConfigOp, len(req.Ops))
	for i, op := range req.Ops {
		ops[i] = metadata.ConfigOp{Name: op.Name, Value: op.Value, Op: metadata.ConfigOpType(op.Op)}
	}
	cfg, err := metadata.ApplyClientMetricsOps(req.Name, v.s.fsm.image().ClientMetrics[req.Name], ops, req.Incremental)
	if err != nil {
		return &pb.AlterClientMetricsResponse{Error: toPBError(err)}, nil
	}
	if req.ValidateOnly {
		return &pb.AlterClientMetricsResponse{}, nil
	}
	rec := &pb.ClientMetricsRecord{Subscriptions: []*pb.ClientMetricsState{{Name: req.Name, Configs: cfg}}}
	if _, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClientMetrics{ClientMetrics: rec}}); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.AlterClientMetricsResponse{}, nil
}

// AlterClientMetrics changes a client metrics subscription through the controller
// (metadata.ClientMetricsStore).
func (c *BrokerClient) AlterClientMetrics(ctx context.Context, name string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	req := &pb.AlterClientMetricsRequest{Name: name, Incremental: incremental, ValidateOnly: validateOnly}
	for _, op := range ops {
		req.Ops = append(req.Ops, &pb.ConfigOp{Name: op.Name, Value: op.Value, Op: int32(op.Op)})
	}
	_, err := rpc(ctx, c, pb.ControllerClient.AlterClientMetrics, req)
	return err
}
