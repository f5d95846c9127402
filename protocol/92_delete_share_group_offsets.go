package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteShareGroupOffsets deletes the share-partition state of whole topics from a
// share group without members: DELETE on the group, READ on each topic.
func (s *Server) handleDeleteShareGroupOffsets(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if !s.allowed(r, opDelete, resGroup, req.GroupID) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	im := s.image()
	partitions := map[string][]int32{}
	var slots []int
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		it := im.Topic(t.Topic)
		switch {
		case !s.allowed(r, opRead, resTopic, t.Topic):
			rt.ErrorCode = errTopicDenied.Code
		case it == nil:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			rt.TopicID = it.ID
			for p := range it.Partitions {
				partitions[t.Topic] = append(partitions[t.Topic], int32(p))
			}
			slots = append(slots, len(resp.Topics))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(slots) == 0 {
		return Result{Resp: resp}
	}
	if err := s.deps.ShareGroups.DeleteGroupOffsets(ctx, req.GroupID, partitions); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		for _, i := range slots {
			resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = resp.ErrorCode, resp.ErrorMessage
		}
	}
	return Result{Resp: resp}
}

// deleteShareGroupOffsetsAPI: every version kmsg knows.
var deleteShareGroupOffsetsAPI = api{key: kmsg.DeleteShareGroupOffsets, min: 0, max: 0, handle: (*Server).handleDeleteShareGroupOffsets, needs: needGroups}
