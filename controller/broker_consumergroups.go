package controller

import (
	"context"
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.ConsumerGroupStore = (*BrokerClient)(nil)

// WriteConsumerGroup stores a consumer group's state; see metadata.ConsumerGroupStore.
func (c *BrokerClient) WriteConsumerGroup(ctx context.Context, fence metadata.GroupFence, st metadata.ConsumerGroupState, remove bool) error {
	req := &pb.WriteConsumerGroupRequest{Record: &pb.ConsumerGroupRecord{CoordinatorId: fence.Broker, CoordinatorEpoch: fence.Epoch,
		State: consumerGroupToPB(st), Remove: remove}}
	_, err := rpc(ctx, c, pb.ControllerClient.WriteConsumerGroup, req)
	return err
}

// LoadConsumerGroup returns a consumer group's stored state; see
// metadata.ConsumerGroupStore.
func (c *BrokerClient) LoadConsumerGroup(ctx context.Context, group string) (*metadata.ConsumerGroupState, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.LoadConsumerGroup, &pb.LoadConsumerGroupRequest{Group: group})
	if err != nil || resp.State == nil {
		return nil, err
	}
	st := consumerGroupFromPB(resp.State)
	return &st, nil
}

// ListConsumerGroups lists the groups with stored consumer-group state; see
// metadata.ConsumerGroupStore.
func (c *BrokerClient) ListConsumerGroups(ctx context.Context) ([]string, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.ListConsumerGroups, &pb.ListConsumerGroupsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Groups, nil
}

func consumerGroupToPB(st metadata.ConsumerGroupState) *pb.ConsumerGroupState {
	out := &pb.ConsumerGroupState{Group: st.Group, CoordinatorEpoch: st.CoordinatorEpoch, Version: st.Version,
		GroupEpoch: st.GroupEpoch, Assignor: st.Assignor}
	for _, t := range st.Topics {
		out.Topics = append(out.Topics, &pb.ConsumerGroupTopic{Name: t.Name, TopicId: t.ID[:], Partitions: t.Partitions})
	}
	for _, m := range st.Members {
		out.Members = append(out.Members, &pb.ConsumerGroupMember{
			MemberId: m.MemberID, InstanceId: m.InstanceID, RackId: m.RackID, ClientId: m.ClientID, ClientHost: m.ClientHost,
			MemberEpoch: m.MemberEpoch, PreviousMemberEpoch: m.PreviousMemberEpoch, State: int32(m.State),
			RebalanceTimeoutMs: m.RebalanceTimeoutMs, SubscribedTopicNames: m.Names, SubscribedTopicRegex: m.Regex,
			ServerAssignor: m.Assignor, Assigned: partitionsToPB(m.Assigned), Revoking: partitionsToPB(m.Revoking),
			Target: partitionsToPB(m.Target), Classic: classicMemberToPB(m.Classic),
		})
	}
	return out
}

func consumerGroupFromPB(p *pb.ConsumerGroupState) metadata.ConsumerGroupState {
	st := metadata.ConsumerGroupState{Group: p.Group, CoordinatorEpoch: p.CoordinatorEpoch, Version: p.Version,
		GroupEpoch: p.GroupEpoch, Assignor: p.Assignor}
	for _, t := range p.Topics {
		st.Topics = append(st.Topics, metadata.ConsumerGroupTopic{Name: t.Name, ID: [16]byte(padID(t.TopicId)), Partitions: t.Partitions})
	}
	for _, m := range p.Members {
		st.Members = append(st.Members, metadata.ConsumerGroupMember{
			MemberID: m.MemberId, InstanceID: m.InstanceId, RackID: m.RackId, ClientID: m.ClientId, ClientHost: m.ClientHost,
			MemberEpoch: m.MemberEpoch, PreviousMemberEpoch: m.PreviousMemberEpoch, State: int8(m.State),
			RebalanceTimeoutMs: m.RebalanceTimeoutMs, Names: m.SubscribedTopicNames, Regex: m.SubscribedTopicRegex,
			Assignor: m.ServerAssignor, Assigned: partitionsFromPB(m.Assigned), Revoking: partitionsFromPB(m.Revoking),
			Target: partitionsFromPB(m.Target), Classic: classicMemberFromPB(m.Classic),
		})
	}
	return st
}

func partitionsToPB(a map[[16]byte][]int32) []*pb.ConsumerGroupPartitions {
	var out []*pb.ConsumerGroupPartitions
	for _, id := range slices.SortedFunc(maps.Keys(a), func(x, y [16]byte) int { return slices.Compare(x[:], y[:]) }) {
		id := id
		out = append(out, &pb.ConsumerGroupPartitions{TopicId: id[:], Partitions: a[id]})
	}
	return out
}

func partitionsFromPB(ps []*pb.ConsumerGroupPartitions) map[[16]byte][]int32 {
	out := make(map[[16]byte][]int32, len(ps))
	for _, p := range ps {
		out[[16]byte(padID(p.TopicId))] = p.Partitions
	}
	return out
}

// padID is a stored topic id as 16 bytes (a malformed one is zero-padded rather than
// panicking the broker).
func padID(b []byte) []byte {
	if len(b) == 16 {
		return b
	}
	out := make([]byte, 16)
	copy(out, b)
	return out
}

func classicMemberToPB(c *metadata.ConsumerGroupClassicMember) *pb.ConsumerGroupClassicMember {
	if c == nil {
		return nil
	}
	out := &pb.ConsumerGroupClassicMember{SessionTimeoutMs: c.SessionTimeoutMs}
	for _, p := range c.Protocols {
		out.Protocols = append(out.Protocols, &pb.ConsumerGroupClassicProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	return out
}

func classicMemberFromPB(c *pb.ConsumerGroupClassicMember) *metadata.ConsumerGroupClassicMember {
	if c == nil {
		return nil
	}
	out := &metadata.ConsumerGroupClassicMember{SessionTimeoutMs: c.SessionTimeoutMs}
	for _, p := range c.Protocols {
		out.Protocols = append(out.Protocols, metadata.ConsumerGroupClassicProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	return out
}
