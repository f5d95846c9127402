package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) WriteTxnState(ctx context.Context, req *pb.WriteTxnStateRequest) (*pb.WriteTxnStateResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Record == nil {
		return &pb.WriteTxnStateResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "no transaction record"))}, nil
	}
	rec := &pb.Record{Record: &pb.Record_TxnState{TxnState: req.Record}}
	// A stale coordinator is answered without growing the log; the FSM checks again.
	res := v.s.fsm.dryRun(rec)
	if res.err == nil {
		var err error
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	return &pb.WriteTxnStateResponse{Error: toPBError(res.err)}, nil
}

func (v *service) TxnOffsetCommit(ctx context.Context, req *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Record == nil {
		return &pb.TxnOffsetCommitResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "no offsets record"))}, nil
	}
	if err := validateCommit(req.Record.Group, req.Record.Offsets); err != nil {
		return &pb.TxnOffsetCommitResponse{Error: toPBError(err)}, nil
	}
	rec := &pb.Record{Record: &pb.Record_TxnOffsetCommit{TxnOffsetCommit: req.Record}}
	res := v.s.fsm.dryRun(rec)
	if res.err == nil {
		var err error
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	return &pb.TxnOffsetCommitResponse{Error: toPBError(res.err)}, nil
}

func (v *service) LoadTxnStates(ctx context.Context, req *pb.LoadTxnStatesRequest) (*pb.LoadTxnStatesResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	// A coordinator taking over must see every transition its predecessor committed.
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.LoadTxnStatesResponse{States: v.s.fsm.loadTxns(req.Partitions, req.AllPartitions)}, nil
}

func (v *service) PendingTxnOffsets(ctx context.Context, req *pb.PendingTxnOffsetsRequest) (*pb.PendingTxnOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.PendingTxnOffsetsResponse{Partitions: topicPartitionsPB(v.s.fsm.pendingTxnOffsets(req.Group))}, nil
}
