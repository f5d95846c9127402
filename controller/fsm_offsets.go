package controller

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// producerIDBlockSize is how many producer ids a broker gets at a time, as in Kafka.
const producerIDBlockSize = 1000

type producerIDBlock struct {
	first int64
	count int32
}

func (f *fsm) applyAllocateProducerIDs(c *change, r *pb.AllocateProducerIdsRecord) applyResult {
	b := c.broker(r.BrokerId)
	switch {
	case b == nil:
		return applyResult{err: kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", r.BrokerId)}
	case b.Epoch != r.BrokerEpoch:
		return applyResult{err: kafkaErrorf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", r.BrokerId, b.Epoch, r.BrokerEpoch)}
	case r.Count <= 0:
		return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "producer id block of %d ids", r.Count)}
	case f.nextProducerID > math.MaxInt64-int64(r.Count):
		return applyResult{err: kafkaErrorf(kerr.UnknownServerError, "producer ids are exhausted")}
	}
	block := producerIDBlock{first: f.nextProducerID, count: r.Count}
	c.after(func() { f.nextProducerID = block.first + int64(block.count) })
	return applyResult{value: block}
}

// applyOffsetOps applies a batch of offset operations; each gets its own result, so one
// caller's bad request does not fail the others gathered with it.
func (f *fsm) applyOffsetOps(c *change, r *pb.OffsetOpsRecord) applyResult {
	errs := make([]error, len(r.Ops))
	for i, op := range r.Ops {
		if op.Group == "" {
			errs[i] = kafkaErrorf(kerr.InvalidGroupID, "group id is empty")
			continue
		}
		// Offsets written before coordinators were fenced carry no fence.
		if op.Fenced {
			if err := checkCoordinator(c.base, "group", op.Group, op.CoordinatorId, op.CoordinatorEpoch); err != nil {
				errs[i] = err
				continue
			}
		}
		if op.Delete {
			op := op
			c.after(func() { f.deleteOffsets(op) })
			continue
		}
		for _, e := range op.Commits {
			if !c.partitionExists(e.Topic, e.Partition) {
				errs[i] = kafkaErrorf(kerr.UnknownTopicOrPartition, "group %q: %s-%d does not exist", op.Group, e.Topic, e.Partition)
				break
			}
		}
		if errs[i] != nil {
			continue
		}
		op := op
		c.after(func() { f.storeOffsets(op) })
	}
	return applyResult{value: errs}
}

func (f *fsm) storeOffsets(op *pb.OffsetOp) {
	g := f.groups[op.Group]
	if g == nil {
		g = map[topicPartition]offsetValue{}
		f.groups[op.Group] = g
	}
	for _, e := range op.Commits {
		g[topicPartition{e.Topic, e.Partition}] = offsetValue{
			offset: e.Offset, leaderEpoch: e.LeaderEpoch, metadata: e.Metadata,
			commitMs: e.CommitTimeMs, expireMs: e.ExpireTimeMs, logOffset: f.nextLogOffset(),
		}
	}
	f.offsetsChanged()
}

func (f *fsm) deleteOffsets(op *pb.OffsetOp) {
	g := f.groups[op.Group]
	if g == nil {
		return
	}
	defer f.offsetsChanged()
	if op.DeleteAll {
		for _, tp := range slices.SortedFunc(maps.Keys(g), compareTopicPartition) {
			f.forget(op.Group, g, tp)
		}
		delete(f.groups, op.Group)
		return
	}
	for _, tps := range op.DeleteTopics {
		if len(tps.Partitions) == 0 {
			for _, tp := range slices.SortedFunc(maps.Keys(g), compareTopicPartition) {
				if tp.topic == tps.Topic {
					f.forget(op.Group, g, tp)
				}
			}
			continue
		}
		for _, p := range tps.Partitions {
			f.forget(op.Group, g, topicPartition{tps.Topic, p})
		}
	}
	if len(g) == 0 {
		delete(f.groups, op.Group)
	}
}

// dropTopicOffsets forgets every group's offsets for a deleted topic, as Kafka's group
// coordinator does.
func (f *fsm) dropTopicOffsets(topic string) {
	changed := false
	for _, name := range slices.Sorted(maps.Keys(f.groups)) {
		g := f.groups[name]
		for _, tp := range slices.SortedFunc(maps.Keys(g), compareTopicPartition) {
			if tp.topic == topic {
				f.forget(name, g, tp)
				changed = true
			}
		}
		if len(g) == 0 {
			delete(f.groups, name)
		}
	}
	if changed {
		f.offsetsChanged()
	}
}

func offsetFromValue(tp topicPartition, v offsetValue) metadata.CommittedOffset {
	o := metadata.CommittedOffset{Topic: tp.topic, Partition: tp.partition, Offset: v.offset,
		LeaderEpoch: v.leaderEpoch, Metadata: v.metadata}
	if v.commitMs != 0 {
		o.CommitTime = time.UnixMilli(v.commitMs)
	}
	if v.expireMs != 0 {
		o.ExpireTime = time.UnixMilli(v.expireMs)
	}
	return o
}

func compareTopicPartition(a, b topicPartition) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition) - int(b.partition)
}

// fetchOffsets returns a group's committed offsets, sorted; nil topics means all, a topic
// with no partitions means all of that topic's.
func (f *fsm) fetchOffsets(group string, topics map[string][]int32) []metadata.CommittedOffset {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g := f.groups[group]
	var out []metadata.CommittedOffset
	for _, tp := range slices.SortedFunc(maps.Keys(g), compareTopicPartition) {
		if topics != nil {
			parts, ok := topics[tp.topic]
			if !ok || len(parts) > 0 && !slices.Contains(parts, tp.partition) {
				continue
			}
		}
		out = append(out, offsetFromValue(tp, g[tp]))
	}
	return out
}

func (f *fsm) offsetGroups() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Sorted(maps.Keys(f.groups))
}
