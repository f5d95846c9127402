package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

// UpdateRemoteLog commits one remote log change from a partition leader. A stale leader's
// change is answered from a dry run, without growing the log; the FSM checks again at
// apply, where a leader change in between fences it.
func (v *service) UpdateRemoteLog(ctx context.Context, req *pb.UpdateRemoteLogRequest) (*pb.UpdateRemoteLogResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Record == nil {
		return &pb.UpdateRemoteLogResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "no remote log record"))}, nil
	}
	rec := &pb.Record{Record: &pb.Record_RemoteLog{RemoteLog: req.Record}}
	res := v.s.fsm.dryRun(rec)
	if res.err == nil {
		var err error
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	return &pb.UpdateRemoteLogResponse{Error: toPBError(res.err), MetadataOffset: v.s.fsm.image().Offset}, nil
}
