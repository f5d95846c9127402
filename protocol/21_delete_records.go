package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/replication"
)

// handleDeleteRecords starts every partition's purge at once, then answers when each has
// reached its followers or the request's timeout ends (REQUEST_TIMED_OUT), as Kafka's
// DelayedDeleteRecords does.
func (s *Server) handleDeleteRecords(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	mayDelete := s.topicCheck(r, opDelete)
	var (
		waiting []*kmsg.DeleteRecordsResponseTopicPartition
		purges  []*replication.Purge
	)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, dp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = dp.Partition, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i, t := range req.Topics {
		for j, dp := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if !mayDelete(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
			} else if g, err := s.deps.Replicas.StartDeleteRecords(t.Topic, dp.Partition, dp.Offset); err != nil {
				rp.ErrorCode = errorCode(err)
			} else {
				waiting, purges = append(waiting, rp), append(purges, g)
			}
		}
	}
	if len(waiting) == 0 {
		return Result{Resp: resp}
	}
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	return Result{Wait: func(ctx context.Context) Result {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for i, res := range s.deps.Replicas.AwaitPurges(ctx, purges) {
			if res.Err != nil {
				waiting[i].ErrorCode = errorCode(res.Err)
			} else {
				waiting[i].LowWatermark = res.LowWatermark
			}
		}
		return Result{Resp: resp}
	}}
}

// deleteRecordsAPI: every version kmsg knows.
var deleteRecordsAPI = api{key: kmsg.DeleteRecords, min: 0, max: 2, handle: (*Server).handleDeleteRecords, errors: errorsOf(deleteRecordsError)}

func deleteRecordsError(req *kmsg.DeleteRecordsRequest, code int16) *kmsg.DeleteRecordsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
