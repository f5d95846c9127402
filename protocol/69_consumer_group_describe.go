package protocol

import (
	"context"
	"iter"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// handleConsumerGroupDescribe: the group's authorization is describeGroupsAuthorized's,
// over the topics of its members' assignments and target assignments.
func (s *Server) handleConsumerGroupDescribe(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	answers := describeGroupsAuthorized(s, r, req.Groups, req.IncludeAuthorizedOperations,
		func(asked []string) []group.ConsumerDescription {
			return s.deps.Groups.DescribeConsumerGroups(ctx, asked)
		},
		func(d group.ConsumerDescription) error { return d.Err }, assignedTopics)
	for i, a := range answers {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.AuthorizedOperations, rg.ErrorCode, rg.ErrorMessage = req.Groups[i], a.ops, a.code, a.message
		if !a.ok {
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d := a.desc
		rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = d.State.String(), d.Epoch, d.AssignmentEpoch, d.Assignor
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

// assignedTopics: each member's assignment, then its target assignment.
func assignedTopics(d group.ConsumerDescription) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, m := range d.Members {
			for _, tps := range [][]group.TopicPartitions{m.Assignment, m.Target} {
				for _, tp := range tps {
					if !yield(tp.Topic) {
						return
					}
				}
			}
		}
	}
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
