package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/partition"
)

// handleOffsetForLeaderEpoch tells a follower or a KIP-320 consumer where an epoch of
// this partition's log ended, so it can truncate whatever it has beyond that.
func (s *Server) handleOffsetForLeaderEpoch(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	im := s.image()
	leaseOK := s.deps.Meta.LeaseValid()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, ep := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = ep.Partition, -1, -1
			var p *partition.Partition
			if im.Partition(t.Topic, ep.Partition) == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if p = s.deps.Partitions.Get(t.Topic, ep.Partition); p == nil || p.Role() != partition.RoleLeader || !leaseOK {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			} else if code := checkLeaderEpoch(ep.CurrentLeaderEpoch, p.LeaderEpoch()); code != 0 {
				rp.ErrorCode = code
			} else {
				rp.LeaderEpoch, rp.EndOffset = p.EndOffsetForEpoch(ep.LeaderEpoch)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}
