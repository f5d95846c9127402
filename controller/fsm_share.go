package controller

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

// Share-partition state (KIP-932) lives in the FSM beside the committed offsets: Kafka
// keeps it in __share_group_state behind a share coordinator; Shale commits it through
// the quorum as it does offsets, so that a new partition leader reads back exactly what
// the old one had acknowledged. Only the partition leader writes a partition's state
// (fenced by its leader epoch); admins replace or delete it (bumping the state epoch).

type shareKey struct {
	group     string
	topic     string
	partition int32
}

func compareShareKey(a, b shareKey) int {
	return cmp.Or(strings.Compare(a.group, b.group), strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
}

func shareKeyOf(s *pb.SharePartitionState) shareKey {
	return shareKey{s.Group, s.Topic, s.Partition}
}

// applyShareStateOps applies a batch of share-state operations, each with its own
// result. Stored states are replaced, never modified, so snapshots share them.
func (f *fsm) applyShareStateOps(c *change, r *pb.ShareStateOpsRecord) applyResult {
	errs := make([]error, len(r.Ops))
	// Later ops of the batch see earlier ones' effects.
	pending := map[shareKey]*pb.SharePartitionState{}
	current := func(k shareKey) *pb.SharePartitionState {
		if s, ok := pending[k]; ok {
			return s
		}
		return f.share[k]
	}
	for i, op := range r.Ops {
		switch {
		case op.Write != nil:
			w := op.Write
			k := shareKeyOf(w)
			if err := checkShareTarget(c, w); err != nil {
				errs[i] = err
				continue
			}
			// Only the partition's current leader writes: a deposed leader that has not
			// heard of its successor yet must not overwrite what the successor loaded.
			if ps, _ := c.partition(w.Topic, w.Partition); ps.LeaderEpoch != w.LeaderEpoch {
				errs[i] = kafkaErrorf(kerr.FencedLeaderEpoch, "share group %q %s-%d: leader epoch %d, the partition's is %d",
					w.Group, w.Topic, w.Partition, w.LeaderEpoch, ps.LeaderEpoch)
				continue
			}
			if old := current(k); old != nil {
				if w.LeaderEpoch < old.LeaderEpoch {
					errs[i] = kafkaErrorf(kerr.FencedLeaderEpoch, "share group %q %s-%d: leader epoch %d is older than the state's %d",
						w.Group, w.Topic, w.Partition, w.LeaderEpoch, old.LeaderEpoch)
					continue
				}
				if w.StateEpoch != old.StateEpoch {
					errs[i] = kafkaErrorf(kerr.FencedStateEpoch, "share group %q %s-%d: state epoch %d, not the stored %d",
						w.Group, w.Topic, w.Partition, w.StateEpoch, old.StateEpoch)
					continue
				}
			}
			w.Deleted = false
			pending[k] = w
		case op.Initialize != nil:
			in := op.Initialize
			k := shareKeyOf(in)
			if err := checkShareTarget(c, in); err != nil {
				errs[i] = err
				continue
			}
			next := &pb.SharePartitionState{Group: in.Group, Topic: in.Topic, Partition: in.Partition,
				StartOffset: in.StartOffset, StateEpoch: in.StateEpoch}
			if old := current(k); old != nil {
				next.StateEpoch = old.StateEpoch + 1
				next.LeaderEpoch = old.LeaderEpoch
			}
			pending[k] = next
		case op.DeleteGroup != "":
			filter := topicFilter(len(op.DeletePartitions) == 0, op.DeletePartitions)
			keys := slices.Collect(maps.Keys(f.share))
			for k := range pending {
				if _, ok := f.share[k]; !ok {
					keys = append(keys, k)
				}
			}
			for _, k := range keys {
				old := current(k)
				if k.group != op.DeleteGroup || !matchesFilter(filter, k.topic, k.partition) || old.Deleted {
					continue
				}
				// A tombstone at the next state epoch fences writes based on the deleted state.
				pending[k] = &pb.SharePartitionState{Group: k.group, Topic: k.topic, Partition: k.partition,
					StateEpoch: old.StateEpoch + 1, LeaderEpoch: old.LeaderEpoch, Deleted: true}
			}
		default:
			errs[i] = kafkaErrorf(kerr.InvalidRequest, "empty share state operation")
		}
	}
	if len(pending) > 0 {
		c.after(func() {
			if f.share == nil {
				f.share = map[shareKey]*pb.SharePartitionState{}
			}
			for k, s := range pending {
				f.share[k] = s
			}
		})
	}
	return applyResult{value: errs}
}

func checkShareTarget(c *change, s *pb.SharePartitionState) error {
	switch {
	case s.Group == "":
		return kafkaErrorf(kerr.InvalidGroupID, "group id is empty")
	case !c.partitionExists(s.Topic, s.Partition):
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "share group %q: %s-%d does not exist", s.Group, s.Topic, s.Partition)
	case s.StartOffset < 0:
		return kafkaErrorf(kerr.InvalidRequest, "share group %q %s-%d: start offset %d", s.Group, s.Topic, s.Partition, s.StartOffset)
	}
	prev := s.StartOffset - 1
	for _, b := range s.Batches {
		if b.FirstOffset <= prev || b.LastOffset < b.FirstOffset {
			return kafkaErrorf(kerr.InvalidRequest, "share group %q %s-%d: state batches out of order at %d", s.Group, s.Topic, s.Partition, b.FirstOffset)
		}
		prev = b.LastOffset
	}
	return nil
}

// matchesFilter: nil means everything; a topic with no partitions all of that topic's.
func matchesFilter(filter map[string][]int32, topic string, partition int32) bool {
	if filter == nil {
		return true
	}
	parts, ok := filter[topic]
	return ok && (len(parts) == 0 || slices.Contains(parts, partition))
}

// dropTopicShareState forgets every share group's state of a deleted topic, so that a
// topic recreated under the same name starts afresh.
func (f *fsm) dropTopicShareState(topic string) {
	for k := range f.share {
		if k.topic == topic {
			delete(f.share, k)
		}
	}
}

// readShareState returns a group's stored states, sorted; nil filter means all.
// Deleted states (tombstones) are left out unless includeDeleted.
func (f *fsm) readShareState(group string, filter map[string][]int32, includeDeleted bool) []*pb.SharePartitionState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*pb.SharePartitionState
	for _, k := range slices.SortedFunc(maps.Keys(f.share), compareShareKey) {
		if k.group == group && matchesFilter(filter, k.topic, k.partition) && (includeDeleted || !f.share[k].Deleted) {
			out = append(out, f.share[k])
		}
	}
	return out
}

// shareGroups lists the groups that have share state, sorted.
func (f *fsm) shareGroups() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(f.share), compareShareKey) {
		if !f.share[k].Deleted && (len(out) == 0 || out[len(out)-1] != k.group) {
			out = append(out, k.group)
		}
	}
	return out
}

// shareSnapshotLocked lists every state for a snapshot; callers hold f.mu.
func (f *fsm) shareSnapshotLocked() []*pb.SharePartitionState {
	out := make([]*pb.SharePartitionState, 0, len(f.share))
	for _, k := range slices.SortedFunc(maps.Keys(f.share), compareShareKey) {
		out = append(out, f.share[k])
	}
	return out
}
