package controller

import (
	"context"

	pb "github.com/shalelog/shale/controller/proto"
)

// WriteShareState stores share partitions' states in one Raft record; each state gets
// its own outcome (nil, FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
// UNKNOWN_TOPIC_OR_PARTITION). The error is for the call as a whole.
func (c *BrokerClient) WriteShareState(ctx context.Context, states []*pb.SharePartitionState) ([]error, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.WriteShareState, &pb.WriteShareStateRequest{States: states})
	if err != nil {
		return nil, err
	}
	return perItem("share states", len(states), resp.Errors, fromPBError)
}

// ReadShareState returns a share group's stored partition states, sorted by topic and
// partition; nil partitions means all, a topic with none all of that topic's. A write
// acknowledged before the call is always seen. Deleted states (Deleted set, carrying
// the state epoch a new state must start at) are returned only with includeDeleted.
func (c *BrokerClient) ReadShareState(ctx context.Context, group string, partitions map[string][]int32, includeDeleted bool) ([]*pb.SharePartitionState, error) {
	req := &pb.ReadShareStateRequest{Group: group, AllPartitions: partitions == nil, Partitions: topicPartitionsPB(partitions),
		IncludeDeleted: includeDeleted}
	resp, err := rpc(ctx, c, pb.ControllerClient.ReadShareState, req)
	if err != nil {
		return nil, err
	}
	return resp.States, nil
}

// InitializeShareState sets share partitions' start offsets (Group, Topic, Partition and
// StartOffset of each state), dropping their in-flight records and bumping their state
// epochs, so that the partition leaders reload them (AlterShareGroupOffsets).
func (c *BrokerClient) InitializeShareState(ctx context.Context, states []*pb.SharePartitionState) ([]error, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.InitializeShareState, &pb.InitializeShareStateRequest{States: states})
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
