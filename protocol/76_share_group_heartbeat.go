package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// registerShareGroups registers the share-group (KIP-932) coordinator APIs. ShareFetch
// and ShareAcknowledge, the share-partition leader's side, are registered apart.
func (s *Server) registerShareGroups() {
	// v0 and v1 of each are the same on the wire (Kafka 4.1 bumped them when share
	// groups left early access).
	s.Register(kmsg.ShareGroupHeartbeat, 0, 1, s.handleShareGroupHeartbeat)
	s.Register(kmsg.ShareGroupDescribe, 0, 1, s.handleShareGroupDescribe)
	s.Register(kmsg.DescribeShareGroupOffsets, 0, 1, s.handleDescribeShareGroupOffsets)
	s.Register(kmsg.AlterShareGroupOffsets, 0, 0, s.handleAlterShareGroupOffsets)
	s.Register(kmsg.DeleteShareGroupOffsets, 0, 0, s.handleDeleteShareGroupOffsets)
}

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
