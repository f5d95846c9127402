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

func (v *service) DescribeQuorum(ctx context.Context, _ *pb.DescribeQuorumRequest) (*pb.DescribeQuorumResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	return v.s.describeQuorum(ls), nil
}

func (v *service) UnregisterBroker(ctx context.Context, req *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	rec := &pb.Record{Record: &pb.Record_UnregisterBroker{UnregisterBroker: &pb.UnregisterBrokerRecord{
		BrokerId: req.BrokerId, Force: req.Force}}}
	// A refusal is answered without growing the log; the FSM checks again at apply.
	res := v.s.fsm.dryRun(rec)
	if res.err == nil {
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	if res.err != nil {
		return &pb.UnregisterBrokerResponse{Error: toPBError(res.err)}, nil
	}
	ls.mu.Lock()
	delete(ls.lastSeen, req.BrokerId)
	delete(ls.brokerOffsets, req.BrokerId)
	delete(ls.fencedAt, req.BrokerId)
	ls.mu.Unlock()
	v.s.log.Info("broker unregistered", "broker", req.BrokerId, "forced", req.Force, "replicas_left", res.value)
	return &pb.UnregisterBrokerResponse{}, nil
}
