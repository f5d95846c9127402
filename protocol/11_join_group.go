package protocol

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// handleJoinGroup registers the join at once, in request order, and waits for the
// rebalance in Result.Wait, so the connection's other requests are not held up and a
// closed connection (ctx) withdraws the join.
func (s *Server) handleJoinGroup(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.JoinGroupRequest)
	if !s.allowed(r, opRead, resGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = errGroupDenied.Code, -1
		return Result{Resp: resp}
	}
	jr := group.JoinRequest{
		Group:                  req.Group,
		MemberID:               req.MemberID,
		InstanceID:             optString(req.InstanceID),
		ClientID:               r.ClientID,
		ClientHost:             clientHost(r.Remote),
		SessionTimeout:         time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:       time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ProtocolType:           req.ProtocolType,
		RequireKnownMemberID:   r.Version >= 4,
		SupportsSkipAssignment: r.Version >= 9,
		Reason:                 optString(req.Reason),
	}
	if r.Version == 0 {
		// v0 has no rebalance timeout: Kafka uses the session timeout.
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	call := s.deps.Groups.JoinContext(ctx, jr)
	build := func(res group.JoinResult) Result {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = errorCode(res.Err)
		resp.Generation = res.Generation
		resp.MemberID = res.MemberID
		if res.Err == nil {
			resp.ProtocolType = &res.ProtocolType
			resp.Protocol = &res.Protocol
			resp.LeaderID = res.Leader
			resp.SkipAssignment = res.SkipAssignment
			for _, m := range res.Members {
				rm := kmsg.NewJoinGroupResponseMember()
				rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, nullableString(m.InstanceID), m.Metadata
				resp.Members = append(resp.Members, rm)
			}
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

// clientHost is the member's host as Kafka reports it in DescribeGroups: "/" + address.
func clientHost(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		host = addr.String()
	}
	return "/" + host
}

// joinGroupAPI: every version kmsg knows; v0 for librdkafka.
var joinGroupAPI = api{key: kmsg.JoinGroup, min: 0, max: 9, handle: (*Server).handleJoinGroup, needs: needGroups, errors: errorsOf(joinGroupError)}

func joinGroupError(req *kmsg.JoinGroupRequest, code int16) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
	return resp
}
