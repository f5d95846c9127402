package controller

import (
	"context"

	pb "github.com/shalelog/shale/controller/proto"
)

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
