package controller

import (
	"context"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

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
