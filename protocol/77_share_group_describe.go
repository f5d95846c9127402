package protocol

import (
	"context"
	"iter"

	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// handleShareGroupDescribe: the group's authorization is describeGroupsAuthorized's,
// over the topics of its members' assignments.
func (s *Server) handleShareGroupDescribe(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	answers := describeGroupsAuthorized(s, r, req.GroupIDs, req.IncludeAuthorizedOperations,
		func(asked []string) []sharegroup.Description { return s.deps.ShareGroups.DescribeGroups(ctx, asked) },
		func(d sharegroup.Description) error { return d.Err }, shareAssignedTopics)
	for i, a := range answers {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID, rg.AuthorizedOperations, rg.ErrorCode, rg.ErrorMessage = req.GroupIDs[i], a.ops, a.code, a.message
		if !a.ok {
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d := a.desc
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = d.State.String(), d.Epoch, d.AssignmentEpoch, d.Assignor
		rg.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
		for _, m := range d.Members {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch = m.MemberID, nullableString(m.RackID), m.MemberEpoch
			rm.ClientID, rm.ClientHost, rm.SubscribedTopicNames = m.ClientID, m.ClientHost, m.Subscribed
			rm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
			for _, tp := range m.Assignment {
				rt := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				rt.TopicID, rt.Topic, rt.Partitions = tp.TopicID, tp.Topic, tp.Partitions
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, rt)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}

func shareAssignedTopics(d sharegroup.Description) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, m := range d.Members {
			for _, tp := range m.Assignment {
				if !yield(tp.Topic) {
					return
				}
			}
		}
	}
}

// shareGroupDescribeAPI: v0 and v1 are the same on the wire (shareGroupHeartbeatAPI).
var shareGroupDescribeAPI = api{key: kmsg.ShareGroupDescribe, min: 0, max: 1, handle: (*Server).handleShareGroupDescribe, needs: needGroups}
