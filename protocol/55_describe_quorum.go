package protocol

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// clusterMetadataTopic is the name Kafka gives the metadata log's one partition: DescribeQuorum
// names it, and Shale's controller quorum stands in for it.
const clusterMetadataTopic = "__cluster_metadata"

// quorumTimeout bounds a quorum call whose request carries no timeout.
const quorumTimeout = 30 * time.Second

// handleDescribeQuorum is Kafka's DescribeQuorum of __cluster_metadata-0: the active
// controller, its Raft term as the leader epoch, the commit index as the high
// watermark, each voter's log end and fetch times, and the brokers as observers (their
// log end is how far their metadata cache is). v2 adds the voters' listeners.
func (s *Server) handleDescribeQuorum(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	fail := func(code int16, msg *string) Result {
		resp.ErrorCode = code
		if req.Version >= 2 {
			resp.ErrorMessage = msg
		}
		return Result{Resp: resp}
	}
	if !s.allowedCluster(r, opDescribe) {
		return fail(errClusterDenied.Code, nil)
	}
	// Kafka answers a request for anything but its one metadata partition with
	// UNKNOWN_TOPIC_OR_PARTITION for what was asked.
	valid := len(req.Topics) == 1 && req.Topics[0].Topic == clusterMetadataTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
	if !valid {
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeQuorumResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeQuorumResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderID = p.Partition, kerr.UnknownTopicOrPartition.Code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return Result{Resp: resp}
	}
	ctx, cancel := context.WithTimeout(ctx, quorumTimeout)
	defer cancel()
	st, err := s.deps.Meta.(metadata.QuorumAdmin).DescribeQuorum(ctx)
	if err != nil {
		return fail(errorCode(err), errorMessage(err))
	}
	replica := func(q metadata.QuorumReplica) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		rs.ReplicaID, rs.LogEndOffset = q.ID, q.LogEndOffset
		if !q.LastFetch.IsZero() {
			rs.LastFetchTimestamp = q.LastFetch.UnixMilli()
		}
		if !q.LastCaughtUp.IsZero() {
			rs.LastCaughtUpTimestamp = q.LastCaughtUp.UnixMilli()
		}
		return rs
	}
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = st.LeaderID, int32(st.LeaderEpoch), st.HighWatermark
	for _, v := range st.Voters {
		rp.CurrentVoters = append(rp.CurrentVoters, replica(v))
		if req.Version < 2 {
			continue
		}
		node := kmsg.NewDescribeQuorumResponseNode()
		node.NodeID = v.ID
		if host, port, err := net.SplitHostPort(v.Addr); err == nil {
			if p, err := strconv.ParseUint(port, 10, 16); err == nil {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(p)
				node.Listeners = append(node.Listeners, l)
			}
		}
		resp.Nodes = append(resp.Nodes, node)
	}
	for _, o := range st.Observers {
		rp.Observers = append(rp.Observers, replica(o))
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = clusterMetadataTopic
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return Result{Resp: resp}
}

// describeQuorumAPI: every version kmsg knows (v2 the voters' listeners), where the
// metadata store can forward to the controller quorum, as for UnregisterBroker,
// AddRaftVoter and RemoveRaftVoter.
var describeQuorumAPI = api{key: kmsg.DescribeQuorum, min: 0, max: 2, handle: (*Server).handleDescribeQuorum, needs: needQuorumAdmin}
