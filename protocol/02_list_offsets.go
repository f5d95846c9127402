package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

func (s *Server) handleListOffsets(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	mayDescribe := s.topicCheck(r, opDescribe)
	if req.ReplicaID >= 0 && s.authorizing() {
		// A follower (Shale's fetcher resets an out-of-range replica with ListOffsets)
		// is a broker: CLUSTER_ACTION, as for its Fetch, rather than DESCRIBE.
		ok := s.allowedCluster(r, opClusterAction)
		mayDescribe = func(string) bool { return ok }
	}
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, lp := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = lp.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			if !mayDescribe(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if t.Topic == metadata.OffsetsTopic {
				s.listOffsetsTopic(lp, &rp) // consumer_offsets.go
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			o, err := s.deps.Replicas.ListOffset(replication.ListOffsetsPartition{Topic: t.Topic, Index: lp.Partition,
				CurrentLeaderEpoch: lp.CurrentLeaderEpoch, Timestamp: lp.Timestamp, Follower: req.ReplicaID >= 0, ReadCommitted: req.IsolationLevel == 1})
			rp.ErrorCode, rp.Offset, rp.Timestamp, rp.LeaderEpoch = errorCode(err), o.Offset, o.Timestamp, o.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

func listOffsetsError(req *kmsg.ListOffsetsRequest, code int16) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.Timestamp, rp.Offset, rp.LeaderEpoch = p.Partition, code, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listOffsetsAPI: from v1 (v0's list of offsets per partition is not served; librdkafka
// needs at most v1 as minimum) to v9: v7 is KIP-734's max timestamp, v8 and v9 KIP-1005's
// earliest-local (-4) and latest-tiered (-5) timestamps of tiered storage (replication
// answers them for every topic: the local log start, and -1 without a remote log). v10+
// (KIP-1075's timeout) are not served.
var listOffsetsAPI = api{key: kmsg.ListOffsets, min: 1, max: 9, handle: (*Server).handleListOffsets, errors: errorsOf(listOffsetsError)}
