package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

// Partition reassignment (KIP-455), decided entirely in the FSM so that a controller
// failover resumes exactly where the log left it:
//
//   - AlterPartitionReassignmentsRecord sets a target: replicas become the target followed
//     by the current replicas it drops, adding = target - current, removing = current -
//     target. The brokers open the added replicas as followers, which the leader adds
//     to the ISR (AlterPartition) once they have caught up.
//   - Any change that leaves every target replica in the ISR completes the reassignment
//     in the same record (completeReassignment, called from setPartitionState): replicas
//     = target, ISR = ISR ∩ target, and a leader outside the target hands over to an
//     in-sync target replica.
//   - Cancelling reverts to the replicas before the reassignment (current - adding).

func (f *fsm) applyAlterPartitionReassignments(c *change, r *pb.AlterPartitionReassignmentsRecord) applyResult {
	errs := make([]error, len(r.Reassignments))
	for i, ra := range r.Reassignments {
		errs[i] = f.reassign(c, ra)
	}
	return applyResult{value: errs}
}

func (f *fsm) reassign(c *change, ra *pb.PartitionReassignment) error {
	if _, err := resolveTopic(c, ra.Topic, nil); err != nil {
		return err
	}
	p, ok := c.partition(ra.Topic, ra.Partition)
	if !ok {
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", ra.Topic, ra.Partition)
	}
	if ra.Cancel {
		return f.cancelReassignment(c, ra.Topic, p)
	}
	target := ra.Replicas
	if len(target) == 0 {
		return kafkaErrorf(kerr.InvalidReplicaAssignment, "%s-%d: the target replica list is empty", ra.Topic, ra.Partition)
	}
	for i, b := range target {
		if slices.Contains(target[:i], b) {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "%s-%d: the target lists broker %d twice", ra.Topic, ra.Partition, b)
		}
		if c.broker(b) == nil {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "%s-%d: broker %d is not registered", ra.Topic, ra.Partition, b)
		}
	}
	// The replicas being replaced are those before any reassignment in progress, as
	// Kafka counts them for AllowReplicationFactorChange.
	original := without(p.Replicas, p.AddingReplicas)
	if ra.RefuseReplicationFactorChange && len(target) != len(original) {
		return kafkaErrorf(kerr.InvalidReplicationFactor, "%s-%d: the target has %d replicas, the partition %d",
			ra.Topic, ra.Partition, len(target), len(original))
	}
	// A new target replaces one in progress: replicas it no longer names (added or
	// original) are dropped like any other, as Kafka does. Replicas still being added
	// that it keeps stay "adding" (Kafka would count them as present): they may hold
	// nothing yet, so the throttle and the unclean-election rule must go on covering
	// them, and a cancel must still drop them.
	var adding []int32
	for _, r := range target {
		if !slices.Contains(p.Replicas, r) || slices.Contains(p.AddingReplicas, r) {
			adding = append(adding, r)
		}
	}
	replicas := append(slices.Clone(target), without(p.Replicas, target)...)
	removing := without(p.Replicas, target)
	if len(removing) == 0 {
		removing = nil
	}
	if slices.Equal(replicas, p.Replicas) && slices.Equal(adding, p.AddingReplicas) && slices.Equal(removing, p.RemovingReplicas) {
		return nil // the reassignment in progress again: nothing changes
	}
	np := &pb.PartitionState{
		Index:            p.Index,
		Replicas:         replicas,
		Isr:              slices.Clone(p.Isr),
		Leader:           p.Leader,
		LeaderEpoch:      p.LeaderEpoch,
		PartitionEpoch:   p.PartitionEpoch + 1,
		AddingReplicas:   adding,
		RemovingReplicas: removing,
	}
	completeReassignment(c, np)
	if np.Leader != p.Leader {
		np.LeaderEpoch++
	}
	c.setPartition(ra.Topic, np)
	return nil
}

// cancelReassignment reverts a reassignment in progress: the added replicas leave the
// replica set and the ISR, and a leader among them hands over to an original replica in
// the ISR. A revert that would need an unclean election is refused unless the topic
// allows one, as Kafka does.
func (f *fsm) cancelReassignment(c *change, topic string, p *pb.PartitionState) error {
	if len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0 {
		return kafkaErrorf(kerr.NoReassignmentInProgress, "%s-%d has no reassignment in progress", topic, p.Index)
	}
	np := &pb.PartitionState{
		Index:          p.Index,
		Replicas:       without(p.Replicas, p.AddingReplicas),
		Isr:            without(p.Isr, p.AddingReplicas),
		Leader:         p.Leader,
		LeaderEpoch:    p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch + 1,
	}
	if !slices.Contains(np.Isr, np.Leader) {
		leader, isr := f.chooseLeader(c, topic, np, np.Isr)
		if len(isr) == 0 {
			return kafkaErrorf(kerr.InvalidReplicaAssignment,
				"%s-%d: reverting would need an unclean leader election: no original replica is in the ISR %v", topic, p.Index, p.Isr)
		}
		np.Leader, np.Isr = leader, isr
	}
	if np.Leader != p.Leader {
		np.LeaderEpoch++
	}
	c.setPartition(topic, np)
	return nil
}

// completeReassignment finishes np's reassignment when its ISR holds every target
// replica: the removed replicas leave the replica set and the ISR, and a leader outside
// the target hands over to the first eligible target replica in the ISR (target order).
// When none is eligible the reassignment waits, so that completing never leaves the
// partition leaderless. Callers bump the leader epoch when np.Leader changes.
func completeReassignment(c *change, np *pb.PartitionState) {
	if len(np.AddingReplicas) == 0 && len(np.RemovingReplicas) == 0 {
		return
	}
	target := without(np.Replicas, np.RemovingReplicas)
	isr := without(np.Isr, np.RemovingReplicas)
	for _, r := range target {
		if !slices.Contains(isr, r) {
			return
		}
	}
	leader := np.Leader
	if !slices.Contains(target, leader) || !c.alive(leader) {
		leader = -1
		for _, r := range target {
			if slices.Contains(isr, r) && c.eligible(r) {
				leader = r
				break
			}
		}
		if leader < 0 {
			return
		}
	}
	np.Replicas, np.Isr, np.Leader = target, isr, leader
	np.AddingReplicas, np.RemovingReplicas = nil, nil
}

// without returns the members of a that are not in b, in a's order (never nil-aliased
// to a).
func without(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
