package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// handleShareGroupHeartbeat: READ on the group, as for every group membership API, and
// DESCRIBE on each subscribed topic, so that a member cannot learn of a topic's
// partitions by subscribing to it.
func (s *Server) handleShareGroupHeartbeat(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if !s.allowed(r, opRead, resGroup, req.GroupID) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	for _, t := range req.SubscribedTopicNames {
		if !s.allowed(r, opDescribe, resTopic, t) {
			resp.ErrorCode = errTopicDenied.Code
			return Result{Resp: resp}
		}
	}
	out := s.deps.ShareGroups.Heartbeat(ctx, sharegroup.HeartbeatRequest{
		Group:       req.GroupID,
		MemberID:    req.MemberID,
		MemberEpoch: req.MemberEpoch,
		RackID:      req.RackID,
		Subscribed:  req.SubscribedTopicNames,
		ClientID:    r.ClientID,
		ClientHost:  clientHost(r.Remote),
	})
	resp.HeartbeatIntervalMillis = int32(out.HeartbeatInterval.Milliseconds())
	if out.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(out.Err), errorMessage(out.Err)
		return Result{Resp: resp}
	}
	resp.MemberID = &out.MemberID
	resp.MemberEpoch = out.MemberEpoch
	if out.Assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, tp := range *out.Assignment {
			rt := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			rt.TopicID, rt.Partitions = tp.TopicID, tp.Partitions
			a.TopicPartitions = append(a.TopicPartitions, rt)
		}
		resp.Assignment = &a
	}
	return Result{Resp: resp}
}

// shareGroupHeartbeatAPI: KIP-932. v0 and v1 of the share-group APIs are the same on the
// wire (Kafka 4.1 bumped them when share groups left early access). The share-group
// coordinator lives in the group coordinator.
var shareGroupHeartbeatAPI = api{key: kmsg.ShareGroupHeartbeat, min: 0, max: 1, handle: (*Server).handleShareGroupHeartbeat, needs: needGroups}
