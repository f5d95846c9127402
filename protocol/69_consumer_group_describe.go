package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// handleConsumerGroupDescribe: DESCRIBE on the group, then DESCRIBE on every topic in
// its members' assignments; as in Kafka, one denied topic hides the whole group.
func (s *Server) handleConsumerGroupDescribe(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	var asked []string
	denied := make([]bool, len(req.Groups))
	for i, g := range req.Groups {
		if denied[i] = !s.allowed(r, opDescribe, resGroup, g); !denied[i] {
			asked = append(asked, g)
		}
	}
	described := s.deps.Groups.DescribeConsumerGroups(ctx, asked)
	for i, g := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.AuthorizedOperations = g, authorizedOpsUnset
		if denied[i] {
			rg.ErrorCode = errGroupDenied.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d := described[0]
		described = described[1:]
		if d.Err != nil {
			rg.ErrorCode, rg.ErrorMessage = errorCode(d.Err), errorMessage(d.Err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if !s.describesAssignedTopics(r, d) {
			rg.ErrorCode = errTopicDenied.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = d.State.String(), d.Epoch, d.AssignmentEpoch, d.Assignor
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupAllOps
			if s.authorizing() {
				rg.AuthorizedOperations = s.authorizedOps(r, resGroup, g)
			}
		}
		rg.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
		for _, m := range d.Members {
			rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.RackID, rm.MemberEpoch = m.MemberID, nullableString(m.InstanceID), nullableString(m.RackID), m.MemberEpoch
			rm.ClientID, rm.ClientHost, rm.SubscribedTopics = m.ClientID, m.ClientHost, m.Subscribed
			if rm.SubscribedTopics == nil {
				rm.SubscribedTopics = []string{}
			}
			rm.SubscribedTopicRegex = nullableString(m.Regex)
			rm.Assignment.TopicPartitions = describedAssignment(m.Assignment)
			rm.TargetAssignment.TopicPartitions = describedAssignment(m.Target)
			rm.MemberType = 1 // a consumer-protocol member (v1)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}

func describedAssignment(tps []group.TopicPartitions) []kmsg.AssignmentTopicPartition {
	out := []kmsg.AssignmentTopicPartition{}
	for _, tp := range tps {
		rt := kmsg.NewAssignmentTopicPartition()
		rt.TopicID, rt.Topic, rt.Partitions = tp.TopicID, tp.Topic, tp.Partitions
		out = append(out, rt)
	}
	return out
}

func (s *Server) describesAssignedTopics(r *Request, d group.ConsumerDescription) bool {
	for _, m := range d.Members {
		for _, tps := range [][]group.TopicPartitions{m.Assignment, m.Target} {
			for _, tp := range tps {
				if !s.allowed(r, opDescribe, resTopic, tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}

// consumerGroupDescribeAPI: KIP-848; v1 adds each member's type (classic or consumer
// protocol; every member here is a consumer-protocol one).
var consumerGroupDescribeAPI = api{key: kmsg.ConsumerGroupDescribe, min: 0, max: 1, handle: (*Server).handleConsumerGroupDescribe, needs: needGroups, errors: errorsOf(consumerGroupDescribeError)}

func consumerGroupDescribeError(req *kmsg.ConsumerGroupDescribeRequest, code int16) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
