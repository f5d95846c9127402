package client

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// QuorumReplica is one replica of the metadata log in a DescribeQuorum answer.
// LogEndOffset is -1 and the timestamps (ms) -1 when the leader does not know them.
type QuorumReplica struct {
	ID                    int32
	Addr                  string // voters only, from the v2 listeners
	LogEndOffset          int64
	LastFetchTimestamp    int64
	LastCaughtUpTimestamp int64
}

// Quorum is the controller quorum as DescribeQuorum describes it.
type Quorum struct {
	LeaderID      int32
	LeaderEpoch   int32
	HighWatermark int64
	Voters        []QuorumReplica
	Observers     []QuorumReplica
}

// DescribeQuorum runs Kafka's DescribeQuorum for the metadata log (__cluster_metadata-0).
func (c *Client) DescribeQuorum(ctx context.Context) (Quorum, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return Quorum{}, fmt.Errorf("describe quorum: %w", err)
	}
	if err := codeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return Quorum{}, fmt.Errorf("describe quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return Quorum{}, fmt.Errorf("describe quorum: the answer describes %d topics, not the metadata log", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := codeError(p.ErrorCode, p.ErrorMessage); err != nil {
		return Quorum{}, fmt.Errorf("describe quorum: %w", err)
	}
	addrs := map[int32]string{}
	for _, n := range resp.Nodes {
		if len(n.Listeners) > 0 {
			l := n.Listeners[0]
			addrs[n.NodeID] = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		}
	}
	// Nodes lists the voters' listeners; an observer with a voter's id is the broker of
	// a combined node, not the controller.
	conv := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, voters bool) []QuorumReplica {
		out := make([]QuorumReplica, len(rs))
		for i, r := range rs {
			out[i] = QuorumReplica{ID: r.ReplicaID, LogEndOffset: r.LogEndOffset,
				LastFetchTimestamp: r.LastFetchTimestamp, LastCaughtUpTimestamp: r.LastCaughtUpTimestamp}
			if voters {
				out[i].Addr = addrs[r.ReplicaID]
			}
		}
		return out
	}
	return Quorum{LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark,
		Voters: conv(p.CurrentVoters, true), Observers: conv(p.Observers, false)}, nil
}

// AddController adds controller id, whose CONTROLLER listener is at addr (host:port), to
// the quorum (KIP-853's AddRaftVoter). The answer comes once it is a voter.
func (c *Client) AddController(ctx context.Context, id int32, addr string) error {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("add controller %d: %w", id, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return fmt.Errorf("add controller %d: port %q: %w", id, portText, err)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID = id
	req.TimeoutMillis = timeoutMillis(ctx)
	req.AckWhenCommitted = true
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(port)
	req.Listeners = append(req.Listeners, l)
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return fmt.Errorf("add controller %d: %w", id, err)
	}
	if err := codeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return fmt.Errorf("add controller %d: %w", id, err)
	}
	return nil
}

// RemoveController removes controller id from the quorum (KIP-853's RemoveRaftVoter).
func (c *Client) RemoveController(ctx context.Context, id int32) error {
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = id
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return fmt.Errorf("remove controller %d: %w", id, err)
	}
	if err := codeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return fmt.Errorf("remove controller %d: %w", id, err)
	}
	return nil
}

// unregisterForceTag is the UnregisterBroker tagged field Shale reads as --force (see
// protocol.UnregisterForceTag).
const unregisterForceTag = 10_064

// UnregisterBroker removes a broker's registration (Kafka's UnregisterBroker). Shale
// refuses it while the broker still holds replicas, unless force.
func (c *Client) UnregisterBroker(ctx context.Context, id int32, force bool) error {
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	if force {
		req.UnknownTags.Set(unregisterForceTag, []byte{1})
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return fmt.Errorf("unregister broker %d: %w", id, err)
	}
	if err := codeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return fmt.Errorf("unregister broker %d: %w", id, err)
	}
	return nil
}

// timeoutMillis is what is left of ctx's deadline, for a request's timeout field.
func timeoutMillis(ctx context.Context) int32 {
	if d, ok := ctx.Deadline(); ok {
		return int32(min(max(time.Until(d).Milliseconds(), 1), math.MaxInt32))
	}
	return 60_000
}
