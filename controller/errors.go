package controller

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/shalelog/shale/controller/proto"
)

// errNotLeader is returned by operations that only the active controller serves.
var errNotLeader = errors.New("this controller is not the active controller")

// toPBError turns an error into the wire form: its Kafka code when it wraps a *kerr.Error,
// UNKNOWN_SERVER_ERROR otherwise; nil for nil.
func toPBError(err error) *pb.Error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &pb.Error{Code: int32(ke.Code), Message: err.Error()}
	}
	return &pb.Error{Code: int32(kerr.UnknownServerError.Code), Message: err.Error()}
}

// fromPBError turns the wire form back into an error wrapping the *kerr.Error.
func fromPBError(e *pb.Error) error {
	if e == nil || e.Code == 0 {
		return nil
	}
	ke := kerr.ErrorForCode(int16(e.Code))
	if e.Message == "" {
		return ke
	}
	return &remoteError{kafka: ke, msg: e.Message}
}

// remoteError keeps the controller's message while unwrapping to the Kafka error.
type remoteError struct {
	kafka error
	msg   string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kafka }

// notLeaderStatus is what a controller that is not the leader answers every call with.
func notLeaderStatus(leaderID int32, leaderAddr string) error {
	st := status.New(codes.Unavailable, "not the active controller")
	if d, err := st.WithDetails(&pb.NotLeader{LeaderId: leaderID, LeaderAddr: leaderAddr}); err == nil {
		st = d
	}
	return st.Err()
}

// notLeaderHint extracts the leader named by a notLeaderStatus.
func notLeaderHint(err error) (addr string, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.Unavailable {
		return "", false
	}
	for _, d := range st.Details() {
		if nl, isNL := d.(*pb.NotLeader); isNL {
			return nl.LeaderAddr, true
		}
	}
	return "", false
}

// kafkaErrorf wraps a Kafka error with a message.
func kafkaErrorf(ke *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", ke, fmt.Sprintf(format, args...))
}
