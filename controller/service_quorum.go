package controller

import (
	"context"

	pb "github.com/shalelog/shale/controller/proto"
)

// The quorum-management and broker-removal calls of the gRPC service (quorum.go,
// fsm_unregister.go).

func (v *service) AddVoter(ctx context.Context, req *pb.AddVoterRequest) (*pb.AddVoterResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	kafkaErr, err := v.outcome(v.s.addVoter(ctx, req.VoterId, req.Address))
	if err != nil {
		return nil, err
	}
	return &pb.AddVoterResponse{Error: kafkaErr}, nil
}

func (v *service) RemoveVoter(ctx context.Context, req *pb.RemoveVoterRequest) (*pb.RemoveVoterResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	kafkaErr, err := v.outcome(v.s.removeVoter(ctx, req.VoterId))
	if err != nil {
		return nil, err
	}
	return &pb.RemoveVoterResponse{Error: kafkaErr}, nil
}

func (v *service) UpdateVoter(ctx context.Context, req *pb.UpdateVoterRequest) (*pb.UpdateVoterResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	kafkaErr, err := v.outcome(v.s.updateVoter(ctx, req.VoterId, req.Address))
	if err != nil {
		return nil, err
	}
	return &pb.UpdateVoterResponse{Error: kafkaErr}, nil
}

func (v *service) DescribeQuorum(ctx context.Context, _ *pb.DescribeQuorumRequest) (*pb.DescribeQuorumResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	return v.s.describeQuorum(ls), nil
}
