package controller

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/shalelog/shale/controller/proto"
)

// service is the gRPC face of a Server. Requests that a Kafka error answers get it in the
// response; a controller that is not active answers UNAVAILABLE with a NotLeader detail.
type service struct {
	pb.UnimplementedControllerServer
	s *Server
}

func (v *service) rpcError(err error) error {
	switch {
	case isLeadershipError(err):
		id, addr := v.s.Leader()
		if id == v.s.cfg.NodeID {
			id, addr = -1, "" // still taking office, or just lost it
		}
		return notLeaderStatus(id, addr)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

// outcome splits an error into a Kafka error for the response and a transport error.
func (v *service) outcome(err error) (*pb.Error, error) {
	if err == nil {
		return nil, nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return toPBError(err), nil
	}
	return nil, v.rpcError(err)
}

// applyOrValidate commits rec through Raft, or with validateOnly only runs it against a
// copy of the state, as CreateTopics and CreatePartitions' validate_only ask.
func (v *service) applyOrValidate(ctx context.Context, rec *pb.Record, validateOnly bool) (applyResult, error) {
	if validateOnly {
		return v.s.fsm.dryRun(rec), nil
	}
	res, _, err := v.s.propose(ctx, rec)
	if err != nil {
		return applyResult{}, v.rpcError(err)
	}
	return res, nil
}
