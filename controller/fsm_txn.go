package controller

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Transaction state lives here instead of a __transaction_state topic: every transition
// a transaction coordinator makes is one TxnStateRecord, fenced like group offsets by
// the coordinator epoch of the transactional id's offsets partition (transactional ids
// hash to coordinators as group ids do). TxnOffsetCommit's offsets stay pending in the
// transaction until the record that completes the commit, which makes them the groups'
// committed offsets in the same apply: a transaction's offsets are never half visible.

func (f *fsm) applyTxnState(c *change, r *pb.TxnStateRecord) applyResult {
	st := r.GetState()
	if st.GetTransactionalId() == "" {
		return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "transaction state without a transactional id")}
	}
	id := st.TransactionalId
	if err := checkCoordinator(c.base, "transactional id", id, r.CoordinatorId, r.CoordinatorEpoch); err != nil {
		return applyResult{err: err}
	}
	if r.Remove {
		c.after(func() { delete(f.txns, id) })
		return applyResult{}
	}
	old := f.txns[id]
	next := proto.Clone(st).(*pb.TxnState)
	next.PendingOffsets = nil
	sameProducer := old != nil && old.ProducerId == st.ProducerId && old.ProducerEpoch == st.ProducerEpoch
	if old != nil && !sameProducer && st.TxnVersion >= 2 {
		// KIP-890 part 2: ending a transaction bumps the producer's epoch in the same
		// record (ONGOING to PREPARE_COMMIT at epoch+1), and completing one that
		// exhausted the epochs moves the producer to the next producer id; the pending
		// offsets are still this transaction's.
		sameProducer = (st.Status == pb.TxnStatus_TXN_STATUS_PREPARE_COMMIT && old.Status == pb.TxnStatus_TXN_STATUS_ONGOING &&
			old.ProducerId == st.ProducerId && st.LastProducerEpoch == old.ProducerEpoch) ||
			(st.Status == pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT && old.Status == pb.TxnStatus_TXN_STATUS_PREPARE_COMMIT &&
				old.NextProducerId != nil && *old.NextProducerId == st.ProducerId)
	}
	var commit []*pb.OffsetOp
	switch st.Status {
	case pb.TxnStatus_TXN_STATUS_ONGOING, pb.TxnStatus_TXN_STATUS_PREPARE_COMMIT:
		if sameProducer {
			next.PendingOffsets = old.PendingOffsets
		}
	case pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT:
		if sameProducer {
			for _, g := range old.PendingOffsets {
				op := &pb.OffsetOp{Group: g.Group}
				for _, e := range g.Offsets {
					// A topic deleted during the transaction loses its offsets, as
					// Kafka's group coordinator drops a deleted topic's offsets.
					if !c.partitionExists(e.Topic, e.Partition) {
						continue
					}
					e := proto.Clone(e).(*pb.OffsetEntry)
					if e.CommitTimeMs == 0 {
						e.CommitTimeMs = st.LastUpdateMs
					}
					op.Commits = append(op.Commits, e)
				}
				if len(op.Commits) > 0 {
					commit = append(commit, op)
				}
			}
		}
	}
	c.after(func() {
		f.txns[id] = next
		for _, op := range commit {
			f.storeOffsets(op)
		}
	})
	return applyResult{}
}

func (f *fsm) applyTxnOffsetCommit(c *change, r *pb.TxnOffsetCommitRecord) applyResult {
	if r.Group == "" {
		return applyResult{err: kafkaErrorf(kerr.InvalidGroupID, "group id is empty")}
	}
	if err := checkCoordinator(c.base, "group", r.Group, r.CoordinatorId, r.CoordinatorEpoch); err != nil {
		return applyResult{err: err}
	}
	t := f.txns[r.TransactionalId]
	switch {
	case t == nil || t.ProducerId != r.ProducerId:
		return applyResult{err: kafkaErrorf(kerr.InvalidProducerIDMapping, "transactional id %q has no producer id %d", r.TransactionalId, r.ProducerId)}
	case int32(r.ProducerEpoch) < t.ProducerEpoch:
		return applyResult{err: kafkaErrorf(kerr.ProducerFenced, "transactional id %q: producer epoch %d is fenced by %d", r.TransactionalId, r.ProducerEpoch, t.ProducerEpoch)}
	case r.ProducerEpoch != t.ProducerEpoch:
		return applyResult{err: kafkaErrorf(kerr.InvalidProducerEpoch, "transactional id %q: producer epoch %d, not %d", r.TransactionalId, r.ProducerEpoch, t.ProducerEpoch)}
	case t.Status != pb.TxnStatus_TXN_STATUS_ONGOING || !(slices.Contains(t.Groups, r.Group) || hasOffsetsPartition(c.base, t, r.Group)):
		return applyResult{err: kafkaErrorf(kerr.InvalidTxnState, "transactional id %q: group %q is not in an ongoing transaction (AddOffsetsToTxn first)", r.TransactionalId, r.Group)}
	}
	for _, e := range r.Offsets {
		if !c.partitionExists(e.Topic, e.Partition) {
			return applyResult{err: kafkaErrorf(kerr.UnknownTopicOrPartition, "group %q: %s-%d does not exist", r.Group, e.Topic, e.Partition)}
		}
	}
	next := proto.Clone(t).(*pb.TxnState)
	next.PendingOffsets = mergePendingOffsets(next.PendingOffsets, r.Group, r.Offsets)
	c.after(func() { f.txns[r.TransactionalId] = next })
	return applyResult{}
}

// hasOffsetsPartition reports whether t holds group's __consumer_offsets partition:
// a transactions v2 TxnOffsetCommit (v5+) adds the group that way from the group's
// coordinator, as Kafka's does, where AddOffsetsToTxn adds it by name.
func hasOffsetsPartition(im *metadata.Image, t *pb.TxnState, group string) bool {
	p := metadata.OffsetsPartition(group, len(im.Coordinators))
	for _, tp := range t.Partitions {
		if tp.Topic == metadata.OffsetsTopic && slices.Contains(tp.Partitions, p) {
			return true
		}
	}
	return false
}

// mergePendingOffsets adds offsets to a group's pending ones, a later offset for the same
// partition replacing the earlier, sorted so that every controller stores them alike.
func mergePendingOffsets(pending []*pb.GroupOffsets, group string, offsets []*pb.OffsetEntry) []*pb.GroupOffsets {
	i := slices.IndexFunc(pending, func(g *pb.GroupOffsets) bool { return g.Group == group })
	if i < 0 {
		pending = append(pending, &pb.GroupOffsets{Group: group})
		slices.SortFunc(pending, func(a, b *pb.GroupOffsets) int { return strings.Compare(a.Group, b.Group) })
		i = slices.IndexFunc(pending, func(g *pb.GroupOffsets) bool { return g.Group == group })
	}
	byTP := map[topicPartition]*pb.OffsetEntry{}
	for _, e := range pending[i].Offsets {
		byTP[topicPartition{e.Topic, e.Partition}] = e
	}
	for _, e := range offsets {
		byTP[topicPartition{e.Topic, e.Partition}] = e
	}
	g := &pb.GroupOffsets{Group: group}
	for _, tp := range slices.SortedFunc(maps.Keys(byTP), compareTopicPartition) {
		g.Offsets = append(g.Offsets, byTP[tp])
	}
	pending[i] = g
	return pending
}

// loadTxns returns copies of the transaction states whose ids hash to one of partitions
// (every one when all), sorted by id.
func (f *fsm) loadTxns(partitions []int32, all bool) []*pb.TxnState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := len(f.img.Coordinators)
	var out []*pb.TxnState
	for _, id := range slices.Sorted(maps.Keys(f.txns)) {
		if !all && !slices.Contains(partitions, metadata.OffsetsPartition(id, n)) {
			continue
		}
		out = append(out, proto.Clone(f.txns[id]).(*pb.TxnState))
	}
	return out
}

// txnSnapshotLocked returns the stored states sorted by id; they are replaced, never
// modified, so they need no copy. Callers hold f.mu.
func (f *fsm) txnSnapshotLocked() []*pb.TxnState {
	out := make([]*pb.TxnState, 0, len(f.txns))
	for _, id := range slices.Sorted(maps.Keys(f.txns)) {
		out = append(out, f.txns[id])
	}
	return out
}

// pendingTxnOffsets returns the partitions of group with offsets pending in a
// transaction, by topic.
func (f *fsm) pendingTxnOffsets(group string) map[string][]int32 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string][]int32{}
	for _, t := range f.txns {
		for _, g := range t.PendingOffsets {
			if g.Group != group {
				continue
			}
			for _, e := range g.Offsets {
				if !slices.Contains(out[e.Topic], e.Partition) {
					out[e.Topic] = append(out[e.Topic], e.Partition)
				}
			}
		}
	}
	return out
}
