package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	pb "github.com/shalelog/shale/controller/proto"
)

// submitShareOps commits share-state operations as one record and returns each op's
// outcome.
func (s *Server) submitShareOps(ctx context.Context, ops []*pb.ShareStateOp) ([]error, error) {
	res, _, err := s.propose(ctx, &pb.Record{Record: &pb.Record_ShareStateOps{ShareStateOps: &pb.ShareStateOpsRecord{Ops: ops}}})
	if err != nil {
		return nil, err
	}
	if res.err != nil {
		return nil, res.err
	}
	errs, _ := res.value.([]error)
	if len(errs) != len(ops) {
		return nil, kafkaErrorf(kerr.UnknownServerError, "share state result has %d entries for %d ops", len(errs), len(ops))
	}
	return errs, nil
}

func (v *service) WriteShareState(ctx context.Context, req *pb.WriteShareStateRequest) (*pb.WriteShareStateResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	ops := make([]*pb.ShareStateOp, len(req.States))
	for i, st := range req.States {
		ops[i] = &pb.ShareStateOp{Write: st}
	}
	errs, err := v.s.submitShareOps(ctx, ops)
	if err != nil {
		kafkaErr, err := v.outcome(err)
		if err != nil {
			return nil, err
		}
		return &pb.WriteShareStateResponse{Error: kafkaErr}, nil
	}
	resp := &pb.WriteShareStateResponse{Errors: make([]*pb.Error, len(errs))}
	for i, e := range errs {
		resp.Errors[i] = shareOpError(e)
	}
	return resp, nil
}

func (v *service) InitializeShareState(ctx context.Context, req *pb.InitializeShareStateRequest) (*pb.InitializeShareStateResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	ops := make([]*pb.ShareStateOp, len(req.States))
	for i, st := range req.States {
		ops[i] = &pb.ShareStateOp{Initialize: st}
	}
	errs, err := v.s.submitShareOps(ctx, ops)
	if err != nil {
		kafkaErr, err := v.outcome(err)
		if err != nil {
			return nil, err
		}
		return &pb.InitializeShareStateResponse{Error: kafkaErr}, nil
	}
	resp := &pb.InitializeShareStateResponse{Errors: make([]*pb.Error, len(errs))}
	for i, e := range errs {
		resp.Errors[i] = shareOpError(e)
	}
	return resp, nil
}

// shareOpError is an op's outcome on the wire: an empty Error for success keeps the
// list aligned with the request.
func shareOpError(err error) *pb.Error {
	if err == nil {
		return &pb.Error{}
	}
	return toPBError(err)
}

func (v *service) ReadShareState(ctx context.Context, req *pb.ReadShareStateRequest) (*pb.ReadShareStateResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	// A write acknowledged before this call must be seen: confirm leadership first.
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	states := v.s.fsm.readShareState(req.Group, topicFilter(req.AllPartitions, req.Partitions), req.IncludeDeleted)
	resp := &pb.ReadShareStateResponse{States: make([]*pb.SharePartitionState, len(states))}
	for i, s := range states {
		resp.States[i] = proto.Clone(s).(*pb.SharePartitionState)
	}
	return resp, nil
}

func (v *service) DeleteShareState(ctx context.Context, req *pb.DeleteShareStateRequest) (*pb.DeleteShareStateResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Group == "" {
		return &pb.DeleteShareStateResponse{Error: toPBError(kafkaErrorf(kerr.InvalidGroupID, "group id is empty"))}, nil
	}
	op := &pb.ShareStateOp{DeleteGroup: req.Group}
	if !req.AllPartitions {
		if len(req.Partitions) == 0 {
			return &pb.DeleteShareStateResponse{}, nil
		}
		op.DeletePartitions = req.Partitions
	}
	errs, err := v.s.submitShareOps(ctx, []*pb.ShareStateOp{op})
	if err == nil {
		err = errs[0]
	}
	kafkaErr, err := v.outcome(err)
	if err != nil {
		return nil, err
	}
	return &pb.DeleteShareStateResponse{Error: kafkaErr}, nil
}

func (v *service) ListShareStateGroups(ctx context.Context, _ *pb.ListShareStateGroupsRequest) (*pb.ListShareStateGroupsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.ListShareStateGroupsResponse{Groups: v.s.fsm.shareGroups()}, nil
}
