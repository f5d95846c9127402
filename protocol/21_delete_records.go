package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/partition"
)

func (s *Server) handleDeleteRecords(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	im := s.image()
	leaseOK := s.deps.Meta.LeaseValid()
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, dp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = dp.Partition, -1
			var p *partition.Partition
			if im.Partition(t.Topic, dp.Partition) == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if p = s.deps.Partitions.Get(t.Topic, dp.Partition); p == nil || p.Role() != partition.RoleLeader || !leaseOK {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			} else if low, err := p.DeleteRecordsBefore(dp.Offset); err != nil {
				rp.ErrorCode = errorCode(err)
			} else {
				rp.LowWatermark = low
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}
