package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// handleConsumerGroupHeartbeat: READ on the group, as for every group membership API,
// and DESCRIBE on each topic subscribed to by name (a member subscribing by regular
// expression is assigned only what matches, as in Kafka's check of the resolved topics,
// which Shale leaves to the assignment: the topics it is assigned are ones the image
// has).
func (s *Server) handleConsumerGroupHeartbeat(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !s.allowed(r, opRead, resGroup, req.Group) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	for _, t := range req.SubscribedTopicNames {
		if !s.allowed(r, opDescribe, resTopic, t) {
			resp.ErrorCode = errTopicDenied.Code
			return Result{Resp: resp}
		}
	}
	hr := group.ConsumerHeartbeatRequest{
		Group:            req.Group,
		MemberID:         req.MemberID,
		MemberEpoch:      req.MemberEpoch,
		InstanceID:       req.InstanceID,
		RackID:           req.RackID,
		RebalanceTimeout: -1,
		Names:            req.SubscribedTopicNames,
		Assignor:         req.ServerAssignor,
		ClientID:         r.ClientID,
		ClientHost:       clientHost(r.Remote),
	}
	if r.Version >= 1 {
		hr.Regex = req.SubscribedTopicRegex
	} else if req.MemberID == "" && req.MemberEpoch == 0 {
		// v0: the coordinator names new members.
		hr.MemberID = group.NewConsumerMemberID()
	}
	if req.RebalanceTimeoutMillis >= 0 {
		hr.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Topics != nil {
		hr.Owned = make([]group.TopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			hr.Owned = append(hr.Owned, group.TopicPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	out := s.deps.Groups.ConsumerHeartbeat(ctx, hr)
	resp.HeartbeatIntervalMillis = int32(out.HeartbeatInterval.Milliseconds())
	if out.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(out.Err), errorMessage(out.Err)
		return Result{Resp: resp}
	}
	resp.MemberID = &out.MemberID
	resp.MemberEpoch = out.MemberEpoch
	if out.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, tp := range *out.Assignment {
			rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			rt.TopicID, rt.Partitions = tp.TopicID, tp.Partitions
			a.Topics = append(a.Topics, rt)
		}
		resp.Assignment = &a
	}
	return Result{Resp: resp}
}

// consumerGroupHeartbeatAPI: KIP-848. v0 is Kafka 3.7's (the coordinator names new
// members), v1 Kafka 4.0's (members name themselves; regular expressions). franz-go
// switches a group with ServerSideBalancer to the consumer protocol when it sees v1.
var consumerGroupHeartbeatAPI = api{key: kmsg.ConsumerGroupHeartbeat, min: 0, max: 1, handle: (*Server).handleConsumerGroupHeartbeat, needs: needGroups, errors: errorsOf(consumerGroupHeartbeatError)}

func consumerGroupHeartbeatError(req *kmsg.ConsumerGroupHeartbeatRequest, code int16) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
