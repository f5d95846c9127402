package controller

import (
	"context"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) AlterGroupConfigs(ctx context.Context, req *pb.AlterGroupConfigsRequest) (*pb.AlterGroupConfigsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	ops := make([]metadata.ConfigOp, len(req.Ops))
	for i, op := range req.Ops {
		ops[i] = metadata.ConfigOp{Name: op.Name, Value: op.Value, Op: metadata.ConfigOpType(op.Op)}
	}
	// Without bounds: the ranges are the brokers' group.* configs, which the broker the
	// request reached checked; the controller checks names and types.
	cfg, err := metadata.ApplyGroupConfigOps(req.Group, v.s.fsm.image().GroupConfigs[req.Group], ops, req.Incremental, nil)
	if err != nil {
		return &pb.AlterGroupConfigsResponse{Error: toPBError(err)}, nil
	}
	if req.ValidateOnly {
		return &pb.AlterGroupConfigsResponse{}, nil
	}
	rec := &pb.GroupConfigsRecord{Groups: []*pb.GroupConfigState{{Group: req.Group, Configs: cfg}}}
	if _, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_GroupConfigs{GroupConfigs: rec}}); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.AlterGroupConfigsResponse{}, nil
}
