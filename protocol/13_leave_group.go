package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// handleLeaveGroup: v0-v2 name one member and carry its error at the top level; v3+
// name several (by member id, or by instance id alone for an admin removal) with an
// error each.
func (s *Server) handleLeaveGroup(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !s.allowed(r, opRead, resGroup, req.Group) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	var leaving []group.LeavingMember
	if r.Version < 3 {
		leaving = []group.LeavingMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			leaving = append(leaving, group.LeavingMember{MemberID: m.MemberID, InstanceID: optString(m.InstanceID), Reason: optString(m.Reason)})
		}
	}
	errs, err := s.deps.Groups.Leave(req.Group, leaving)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return Result{Resp: resp}
	}
	if r.Version < 3 {
		resp.ErrorCode = errorCode(errs[0])
		return Result{Resp: resp}
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, errorCode(errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return Result{Resp: resp}
}

// leaveGroupAPI: every version kmsg knows; v0 for librdkafka.
var leaveGroupAPI = api{key: kmsg.LeaveGroup, min: 0, max: 5, handle: (*Server).handleLeaveGroup, needs: needGroups, errors: errorsOf(leaveGroupError)}

func leaveGroupError(req *kmsg.LeaveGroupRequest, code int16) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = code
	return resp
}
