package controller

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	pb "github.com/shalelog/shale/controller/proto"
)

// Consumer groups (KIP-848) keep their whole state here, one ConsumerGroupState per
// group, written by the group's coordinator and fenced like its offset commits by the
// coordinator epoch of the group's offsets partition. Each write carries the complete
// state, ordered by (coordinator epoch, version): a write that an apply finds older
// than the stored state was overtaken by a later one from the same coordinator, which
// already holds its changes, and is dropped without error.

func (f *fsm) applyConsumerGroup(c *change, r *pb.ConsumerGroupRecord) applyResult {
	st := r.GetState()
	if st.GetGroup() == "" {
		return applyResult{err: kafkaErrorf(kerr.InvalidGroupID, "consumer group state without a group id")}
	}
	if err := checkCoordinator(c.base, "group", st.Group, r.CoordinatorId, r.CoordinatorEpoch); err != nil {
		return applyResult{err: err}
	}
	old := f.consumerGroups[st.Group]
	if old != nil && (old.CoordinatorEpoch > st.CoordinatorEpoch || (old.CoordinatorEpoch == st.CoordinatorEpoch && old.Version >= st.Version)) {
		return applyResult{} // superseded
	}
	if r.Remove {
		c.after(func() { delete(f.consumerGroups, st.Group) })
		return applyResult{}
	}
	next := proto.Clone(st).(*pb.ConsumerGroupState)
	c.after(func() {
		if f.consumerGroups == nil {
			f.consumerGroups = map[string]*pb.ConsumerGroupState{}
		}
		f.consumerGroups[st.Group] = next
	})
	return applyResult{}
}

// loadConsumerGroup returns a copy of group's stored state, nil when it has none.
func (f *fsm) loadConsumerGroup(group string) *pb.ConsumerGroupState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if st := f.consumerGroups[group]; st != nil {
		return proto.Clone(st).(*pb.ConsumerGroupState)
	}
	return nil
}

// listConsumerGroups is the ids of the groups with stored state, sorted.
func (f *fsm) listConsumerGroups() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Sorted(maps.Keys(f.consumerGroups))
}

func (f *fsm) consumerGroupSnapshotLocked() []*pb.ConsumerGroupState {
	out := make([]*pb.ConsumerGroupState, 0, len(f.consumerGroups))
	for _, id := range slices.Sorted(maps.Keys(f.consumerGroups)) {
		out = append(out, f.consumerGroups[id])
	}
	return out
}
