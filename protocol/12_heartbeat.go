package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

func (s *Server) handleHeartbeat(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !s.allowed(r, opRead, resGroup, req.Group) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	err := s.deps.Groups.Heartbeat(group.HeartbeatRequest{
		Group:      req.Group,
		MemberID:   req.MemberID,
		InstanceID: optString(req.InstanceID),
		Generation: req.Generation,
	})
	resp.ErrorCode = errorCode(err)
	return Result{Resp: resp}
}
