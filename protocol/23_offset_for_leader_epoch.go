package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetForLeaderEpoch tells a follower or a KIP-320 consumer where an epoch of
// this partition's log ended, so it can truncate whatever it has beyond that.
func (s *Server) handleOffsetForLeaderEpoch(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Followers (v3+ carry their replica id) need CLUSTER_ACTION, consumers DESCRIBE.
	may := s.topicCheck(r, opDescribe)
	if r.Version >= 3 && req.ReplicaID >= 0 && s.authorizing() {
		ok := s.allowedCluster(r, opClusterAction)
		may = func(string) bool { return ok }
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, ep := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = ep.Partition, -1, -1
			if !may(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			epoch, end, err := s.deps.Replicas.EndOffsetForEpoch(t.Topic, ep.Partition, ep.CurrentLeaderEpoch, ep.LeaderEpoch)
			if err != nil {
				rp.ErrorCode = errorCode(err)
			} else {
				rp.LeaderEpoch, rp.EndOffset = epoch, end
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// offsetForLeaderEpochAPI: every version kmsg knows; v2+ turns on clients' KIP-320
// truncation checks.
var offsetForLeaderEpochAPI = api{key: kmsg.OffsetForLeaderEpoch, min: 0, max: 4, handle: (*Server).handleOffsetForLeaderEpoch, errors: errorsOf(offsetForLeaderEpochError)}

func offsetForLeaderEpochError(req *kmsg.OffsetForLeaderEpochRequest, code int16) *kmsg.OffsetForLeaderEpochResponse {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
