package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// handleShareGroupDescribe: DESCRIBE on the group, then DESCRIBE on every topic in its
// assignments; like Kafka, one denied topic hides the whole group (its state and
// members would tell of the topic).
func (s *Server) handleShareGroupDescribe(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	var asked []string
	denied := make([]bool, len(req.GroupIDs))
	for i, g := range req.GroupIDs {
		if denied[i] = !s.allowed(r, opDescribe, resGroup, g); !denied[i] {
			asked = append(asked, g)
		}
	}
	described := s.deps.ShareGroups.DescribeGroups(ctx, asked)
	for i, g := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID, rg.AuthorizedOperations = g, authorizedOpsUnset
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
		if !s.describesAllTopics(r, d) {
			rg.ErrorCode = errTopicDenied.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = d.State.String(), d.Epoch, d.AssignmentEpoch, d.Assignor
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupAllOps
			if s.authorizing() {
				rg.AuthorizedOperations = s.authorizedOps(r, resGroup, g)
			}
		}
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

func (s *Server) describesAllTopics(r *Request, d sharegroup.Description) bool {
	for _, m := range d.Members {
		for _, tp := range m.Assignment {
			if !s.allowed(r, opDescribe, resTopic, tp.Topic) {
				return false
			}
		}
	}
	return true
}

// shareGroupDescribeAPI: v0 and v1 are the same on the wire (shareGroupHeartbeatAPI).
var shareGroupDescribeAPI = api{key: kmsg.ShareGroupDescribe, min: 0, max: 1, handle: (*Server).handleShareGroupDescribe, needs: needGroups}
