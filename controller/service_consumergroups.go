package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) WriteConsumerGroup(ctx context.Context, req *pb.WriteConsumerGroupRequest) (*pb.WriteConsumerGroupResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Record == nil {
		return &pb.WriteConsumerGroupResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "no consumer group record"))}, nil
	}
	rec := &pb.Record{Record: &pb.Record_ConsumerGroup{ConsumerGroup: req.Record}}
	// A stale coordinator is answered without growing the log; the FSM checks again.
	res := v.s.fsm.dryRun(rec)
	if res.err == nil {
		var err error
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	return &pb.WriteConsumerGroupResponse{Error: toPBError(res.err)}, nil
}

func (v *service) LoadConsumerGroup(ctx context.Context, req *pb.LoadConsumerGroupRequest) (*pb.LoadConsumerGroupResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	// A coordinator taking over must see every state its predecessor committed.
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.LoadConsumerGroupResponse{State: v.s.fsm.loadConsumerGroup(req.Group)}, nil
}

func (v *service) ListConsumerGroups(ctx context.Context, _ *pb.ListConsumerGroupsRequest) (*pb.ListConsumerGroupsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	// A coordinator listing groups it has not loaded must see every stored one.
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.ListConsumerGroupsResponse{Groups: v.s.fsm.listConsumerGroups()}, nil
}
