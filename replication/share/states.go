package share

import (
	"context"
	"errors"
	"fmt"
	"slices"

	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/metadata"
)

// AdminStore is the Store with the admin operations of the share group coordinator
// (controller.BrokerClient).
type AdminStore interface {
	Store
	InitializeShareState(ctx context.Context, states []*metadata.SharePartitionState) ([]error, error)
	DeleteShareState(ctx context.Context, group string, partitions map[string][]int32) error
	ListShareStateGroups(ctx context.Context) ([]string, error)
}

// States is the share group coordinator's view of share-partition state
// (coordinator/share.States): what the controller holds, with the live counts of the share
// partitions this broker leads (elsewhere, acquired records show as available: locks
// are not persisted).
type States struct {
	m     *Manager
	store AdminStore
}

var _ sharegroup.States = (*States)(nil)

// NewStates returns the coordinator's view over store; m may be nil.
func NewStates(m *Manager, store AdminStore) *States { return &States{m: m, store: store} }

// ReadShareGroupState summarizes every share partition of group that has state.
func (s *States) ReadShareGroupState(ctx context.Context, g string) ([]sharegroup.PartitionState, error) {
	sts, err := s.store.ReadShareState(ctx, g, nil, false)
	if err != nil {
		return nil, err
	}
	var live map[Key]Summary
	if s.m != nil {
		live = s.m.Describe(g)
	}
	out := make([]sharegroup.PartitionState, 0, len(sts))
	for _, st := range sts {
		ps := sharegroup.PartitionState{Topic: st.Topic, Partition: st.Partition, StartOffset: st.StartOffset,
			StateEpoch: st.StateEpoch, LeaderEpoch: st.LeaderEpoch}
		if l, ok := live[Key{g, st.Topic, st.Partition}]; ok {
			ps.StartOffset = l.StartOffset
			ps.InFlight = int64(l.Available + l.Acquired)
			ps.Acquired, ps.Acknowledged, ps.Archived = int64(l.Acquired), int64(l.Acknowledged), int64(l.Archived)
		} else {
			for _, b := range st.Batches {
				n := b.LastOffset - b.FirstOffset + 1
				switch State(b.DeliveryState) {
				case Acknowledged:
					ps.Acknowledged += n
				case Archived:
					ps.Archived += n
				default:
					ps.InFlight += n
				}
			}
		}
		out = append(out, ps)
	}
	return out, nil
}

// AlterShareStartOffsets resets share partitions to new start offsets; the partition
// leaders see it when a member next opens a share session, or when their next write is
// fenced by the new state epoch.
func (s *States) AlterShareStartOffsets(ctx context.Context, g string, offsets []sharegroup.PartitionOffset) error {
	states := make([]*metadata.SharePartitionState, len(offsets))
	for i, o := range offsets {
		states[i] = &metadata.SharePartitionState{Group: g, Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
	}
	errs, err := s.store.InitializeShareState(ctx, states)
	s.refresh(g, offsets)
	if err != nil {
		return err
	}
	for i, e := range errs {
		if e != nil {
			errs[i] = fmt.Errorf("%s-%d: %w", offsets[i].Topic, offsets[i].Partition, e)
		}
	}
	return errors.Join(errs...)
}

// DeleteShareGroupState deletes the state of group's share partitions (nil: all).
func (s *States) DeleteShareGroupState(ctx context.Context, g string, partitions map[string][]int32) error {
	err := s.store.DeleteShareState(ctx, g, partitions)
	if s.m != nil {
		var keys []Key
		for k := range s.m.Describe(g) {
			// nil is every partition; a topic listed with none, all of that topic's.
			if ps, ok := partitions[k.Topic]; partitions == nil || ok && (len(ps) == 0 || slices.Contains(ps, k.Partition)) {
				keys = append(keys, k)
			}
		}
		s.m.Refresh(keys)
	}
	return err
}

// refresh drops this broker's cached copies of the partitions an admin just reset, so
// that describing the group (and the next member) sees the new state rather than the
// cache's; the group has no members, so the cache holds no locks.
func (s *States) refresh(g string, offsets []sharegroup.PartitionOffset) {
	if s.m == nil {
		return
	}
	keys := make([]Key, len(offsets))
	for i, o := range offsets {
		keys[i] = Key{g, o.Topic, o.Partition}
	}
	s.m.Refresh(keys)
}

// ListShareStateGroups lists the groups that have share-partition state.
func (s *States) ListShareStateGroups(ctx context.Context) ([]string, error) {
	return s.store.ListShareStateGroups(ctx)
}
