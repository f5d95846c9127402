package share

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/shalelog/shale/controller/proto"
	"github.com/shalelog/shale/internal/group"
)

// Delivery states of persisted share-state batches (Kafka's RecordState ids).
const (
	shareAvailable    = 0
	shareAcknowledged = 2
	shareArchived     = 4
)

// AdminStore is what the group coordinator reads and changes of share-partition state
// in the controller quorum (controller.BrokerClient).
type AdminStore interface {
	ReadShareState(ctx context.Context, group string, partitions map[string][]int32) ([]*pb.SharePartitionState, error)
	InitializeShareState(ctx context.Context, states []*pb.SharePartitionState) ([]error, error)
	DeleteShareState(ctx context.Context, group string, partitions map[string][]int32) error
}

// GroupStates is the group coordinator's view of share-partition state (its
// group.ShareStates): what the share-partition leaders committed through the controller
// quorum, and, for the partitions this broker leads, their live state (acquired records
// exist only there).
type GroupStates struct {
	Store   AdminStore
	Manager *Manager
}

func (s GroupStates) ReadShareGroupState(ctx context.Context, g string) ([]group.SharePartitionState, error) {
	stored, err := s.Store.ReadShareState(ctx, g, nil)
	if err != nil {
		return nil, fmt.Errorf("read share state of group %s: %w", g, err)
	}
	live := s.Manager.Describe(g)
	out := make([]group.SharePartitionState, 0, len(stored))
	for _, st := range stored {
		ps := group.SharePartitionState{Topic: st.Topic, Partition: st.Partition, StartOffset: st.StartOffset,
			StateEpoch: st.StateEpoch, LeaderEpoch: st.LeaderEpoch}
		for _, b := range st.Batches {
			n := b.LastOffset - b.FirstOffset + 1
			switch b.DeliveryState {
			case shareAvailable:
				ps.InFlight += n
			case shareAcknowledged:
				ps.Acknowledged += n
			case shareArchived:
				ps.Archived += n
			}
		}
		if sum, ok := live[Key{Group: g, Topic: st.Topic, Partition: st.Partition}]; ok {
			ps.StartOffset = sum.StartOffset
			ps.InFlight = int64(sum.Available + sum.Acquired)
			ps.Acquired = int64(sum.Acquired)
			ps.Acknowledged, ps.Archived = int64(sum.Acknowledged), int64(sum.Archived)
		}
		out = append(out, ps)
	}
	return out, nil
}

func (s GroupStates) AlterShareStartOffsets(ctx context.Context, g string, offsets []group.SharePartitionOffset) error {
	states := make([]*pb.SharePartitionState, len(offsets))
	for i, o := range offsets {
		states[i] = &pb.SharePartitionState{Group: g, Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
	}
	errs, err := s.Store.InitializeShareState(ctx, states)
	if err != nil {
		return fmt.Errorf("initialize share state of group %s: %w", g, err)
	}
	return errors.Join(errs...)
}

func (s GroupStates) DeleteShareGroupState(ctx context.Context, g string, partitions map[string][]int32) error {
	if err := s.Store.DeleteShareState(ctx, g, partitions); err != nil {
		return fmt.Errorf("delete share state of group %s: %w", g, err)
	}
	return nil
}

// ListShareStateGroups lists no groups: the controller has no listing of the groups
// with share state, so a share group whose members are all gone is listed only while
// its coordinator remembers it (it is still described and deleted through its state).
func (s GroupStates) ListShareStateGroups(context.Context) ([]string, error) { return nil, nil }

// ReleaseMember releases what a member that left its share group (or whose session
// expired) holds on the partitions this broker leads, before their locks time out.
func (s GroupStates) ReleaseMember(g, member string, assignment []group.TopicPartitions) {
	var keys []Key
	for _, tp := range assignment {
		for _, p := range tp.Partitions {
			keys = append(keys, Key{Group: g, Topic: tp.Topic, Partition: p})
		}
	}
	if len(keys) > 0 {
		s.Manager.ReleaseMember(keys, member)
	}
}

var _ group.ShareStates = GroupStates{}
