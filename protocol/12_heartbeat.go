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

// heartbeatAPI: every version kmsg knows; v0 for librdkafka.
var heartbeatAPI = api{key: kmsg.Heartbeat, min: 0, max: 4, handle: (*Server).handleHeartbeat, needs: needGroups, errors: errorsOf(heartbeatError)}

func heartbeatError(req *kmsg.HeartbeatRequest, code int16) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
