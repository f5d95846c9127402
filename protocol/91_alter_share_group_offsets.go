package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// handleAlterShareGroupOffsets sets share-partition start offsets of a share group
// without members: READ on the group (Kafka's choice, as for OffsetCommit) and on each
// topic.
func (s *Server) handleAlterShareGroupOffsets(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if !s.allowed(r, opRead, resGroup, req.GroupID) {
		resp.ErrorCode = errGroupDenied.Code
		return Result{Resp: resp}
	}
	im := s.image()
	var offsets []sharegroup.PartitionOffset
	var slots []*kmsg.AlterShareGroupOffsetsResponseTopicPartition // the partitions being set
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		allowed := s.allowed(r, opRead, resTopic, t.Topic)
		it := im.Topic(t.Topic)
		if it != nil && allowed {
			rt.TopicID = it.ID
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowed:
				rp.ErrorCode = errTopicDenied.Code
			case it == nil || p.Partition < 0 || int(p.Partition) >= len(it.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.StartOffset < 0:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				offsets = append(offsets, sharegroup.PartitionOffset{Topic: t.Topic, Partition: p.Partition, StartOffset: p.StartOffset})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == 0 {
				slots = append(slots, rp)
			}
		}
	}
	if len(offsets) == 0 {
		return Result{Resp: resp}
	}
	if err := s.deps.ShareGroups.AlterGroupOffsets(ctx, req.GroupID, offsets); err != nil {
		// Kafka puts group-level failures (not empty, not a share group, not the
		// coordinator) on the response and on each partition it would have set.
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		for _, rp := range slots {
			rp.ErrorCode, rp.ErrorMessage = resp.ErrorCode, resp.ErrorMessage
		}
	}
	return Result{Resp: resp}
}

// alterShareGroupOffsetsAPI: every version kmsg knows.
var alterShareGroupOffsetsAPI = api{key: kmsg.AlterShareGroupOffsets, min: 0, max: 0, handle: (*Server).handleAlterShareGroupOffsets, needs: needGroups}
