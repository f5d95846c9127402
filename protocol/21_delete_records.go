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
	type started struct {
		rp    *kmsg.DeleteRecordsResponseTopicPartition
		purge *replication.Purge
	}
	var waiting []started
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
				waiting = append(waiting, started{rp, g})
			}
		}
	}
	if len(waiting) == 0 {
		return Result{Resp: resp}
	}
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	return Result{Wait: func(ctx context.Context) Result {
		// One deadline for all: waiting for each in turn takes as long as the slowest.
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for _, w := range waiting {
			if low, err := w.purge.Await(ctx); err != nil {
				w.rp.ErrorCode = errorCode(err)
			} else {
				w.rp.LowWatermark = low
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
