package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// handleSyncGroup: followers wait (in Result.Wait, like JoinGroup) for the leader's
// assignment.
func (s *Server) handleSyncGroup(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.SyncGroupRequest)
	if !s.allowed(r, opRead, resGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = errGroupDenied.Code, []byte{}
		return Result{Resp: resp}
	}
	sr := group.SyncRequest{
		Group:      req.Group,
		MemberID:   req.MemberID,
		InstanceID: optString(req.InstanceID),
		Generation: req.Generation,
	}
	if r.Version >= 5 {
		sr.ProtocolType, sr.Protocol = req.ProtocolType, req.Protocol
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	call := s.deps.Groups.Sync(sr)
	build := func(res group.SyncResult) Result {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errorCode(res.Err)
		if res.Err == nil {
			resp.ProtocolType, resp.Protocol = &res.ProtocolType, &res.Protocol
			resp.MemberAssignment = res.Assignment
		}
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		return Result{Resp: resp}
	}
	select {
	case <-call.Done():
		return build(call.Wait(ctx))
	default:
	}
	return Result{Wait: func(ctx context.Context) Result { return build(call.Wait(ctx)) }}
}

// syncGroupAPI: every version kmsg knows; v0 for librdkafka.
var syncGroupAPI = api{key: kmsg.SyncGroup, min: 0, max: 5, handle: (*Server).handleSyncGroup, needs: needGroups, errors: errorsOf(syncGroupError)}

func syncGroupError(req *kmsg.SyncGroupRequest, code int16) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode, resp.MemberAssignment = code, []byte{}
	return resp
}
