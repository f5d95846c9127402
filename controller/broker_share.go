package controller

import (
	"context"

	pb "github.com/shalelog/shale/controller/proto"
	"github.com/shalelog/shale/metadata"
)

// WriteShareState stores share partitions' states in one Raft record; each state gets
// its own outcome (nil, FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
// UNKNOWN_TOPIC_OR_PARTITION). The error is for the call as a whole.
func (c *BrokerClient) WriteShareState(ctx context.Context, states []*metadata.SharePartitionState) ([]error, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.WriteShareState, &pb.WriteShareStateRequest{States: shareStatesPB(states)})
	if err != nil {
		return nil, err
	}
	return perItem("share states", len(states), resp.Errors, fromPBError)
}

// ReadShareState returns a share group's stored partition states, sorted by topic and
// partition; nil partitions means all, a topic with none all of that topic's. A write
// acknowledged before the call is always seen. Deleted states (Deleted set, carrying
// the state epoch a new state must start at) are returned only with includeDeleted.
func (c *BrokerClient) ReadShareState(ctx context.Context, group string, partitions map[string][]int32, includeDeleted bool) ([]*metadata.SharePartitionState, error) {
	req := &pb.ReadShareStateRequest{Group: group, AllPartitions: partitions == nil, Partitions: topicPartitionsPB(partitions),
		IncludeDeleted: includeDeleted}
	resp, err := rpc(ctx, c, pb.ControllerClient.ReadShareState, req)
	if err != nil {
		return nil, err
	}
	out := make([]*metadata.SharePartitionState, len(resp.States))
	for i, st := range resp.States {
		out[i] = shareStateFromPB(st)
	}
	return out, nil
}

// InitializeShareState sets share partitions' start offsets (Group, Topic, Partition and
// StartOffset of each state), dropping their in-flight records and bumping their state
// epochs, so that the partition leaders reload them (AlterShareGroupOffsets).
func (c *BrokerClient) InitializeShareState(ctx context.Context, states []*metadata.SharePartitionState) ([]error, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.InitializeShareState, &pb.InitializeShareStateRequest{States: shareStatesPB(states)})
	if err != nil {
		return nil, err
	}
	return perItem("share states", len(states), resp.Errors, fromPBError)
}

// DeleteShareState removes a share group's state; nil partitions means all of it.
func (c *BrokerClient) DeleteShareState(ctx context.Context, group string, partitions map[string][]int32) error {
	req := &pb.DeleteShareStateRequest{Group: group, AllPartitions: partitions == nil, Partitions: topicPartitionsPB(partitions)}
	_, err := rpc(ctx, c, pb.ControllerClient.DeleteShareState, req)
	return err
}

// ListShareStateGroups lists the groups that have share-partition state.
func (c *BrokerClient) ListShareStateGroups(ctx context.Context) ([]string, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.ListShareStateGroups, &pb.ListShareStateGroupsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Groups, nil
}

// shareStatesPB is states in the controller's wire and record form.
func shareStatesPB(states []*metadata.SharePartitionState) []*pb.SharePartitionState {
	out := make([]*pb.SharePartitionState, len(states))
	for i, st := range states {
		p := &pb.SharePartitionState{Group: st.Group, Topic: st.Topic, Partition: st.Partition, StartOffset: st.StartOffset,
			StateEpoch: st.StateEpoch, LeaderEpoch: st.LeaderEpoch, Deleted: st.Deleted}
		if len(st.Batches) > 0 {
			p.Batches = make([]*pb.ShareStateBatch, len(st.Batches))
			for j, b := range st.Batches {
				p.Batches[j] = &pb.ShareStateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
					DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount}
			}
		}
		out[i] = p
	}
	return out
}

func shareStateFromPB(p *pb.SharePartitionState) *metadata.SharePartitionState {
	st := &metadata.SharePartitionState{Group: p.Group, Topic: p.Topic, Partition: p.Partition, StartOffset: p.StartOffset,
		StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, Deleted: p.Deleted}
	if len(p.Batches) > 0 {
		st.Batches = make([]metadata.ShareStateBatch, len(p.Batches))
		for j, b := range p.Batches {
			st.Batches[j] = metadata.ShareStateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
				DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount}
		}
	}
	return st
}
