package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteRecords(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	mayDelete := s.topicCheck(r, opDelete)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, dp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = dp.Partition, -1
			if !mayDelete(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
			} else if p, err := s.deps.Replicas.Leader(t.Topic, dp.Partition, -1); err != nil {
				rp.ErrorCode = errorCode(err)
			} else if low, err := p.DeleteRecordsBefore(dp.Offset); err != nil {
				rp.ErrorCode = errorCode(s.deps.Replicas.ReplicaGone(t.Topic, dp.Partition, err))
			} else {
				rp.LowWatermark = low
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}
