package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeProducers lists the producers the leader of each partition tracks (KIP-664,
// for finding hanging transactions): epoch, last sequence and timestamp, the coordinator
// epoch of the last marker, and where an open transaction began. READ on the topic.
func (s *Server) handleDescribeProducers(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	may := s.topicCheck(r, opRead)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, idx := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = idx
			if !may(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			p, err := s.deps.Replicas.Leader(t.Topic, idx, -1)
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, pi := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.ProducerEpoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// describeProducersAPI: every version kmsg knows.
var describeProducersAPI = api{key: kmsg.DescribeProducers, min: 0, max: 0, handle: (*Server).handleDescribeProducers}
