package controller

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// reassignHarness is an FSM with brokers 1..n and topic "t" of one partition on 1, 2, 3,
// led by 1.
func reassignHarness(t *testing.T, n int32) *fsmHarness {
	t.Helper()
	h := newHarness(t)
	for id := int32(1); id <= n; id++ {
		h.register(id, "")
	}
	if r := h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2, 3}}}}); r.err != nil {
		t.Fatal(r.err)
	}
	return h
}

func (h *fsmHarness) reassign(ras ...*pb.PartitionReassignment) []error {
	h.t.Helper()
	res := h.apply(&pb.Record{Record: &pb.Record_AlterPartitionReassignments{
		AlterPartitionReassignments: &pb.AlterPartitionReassignmentsRecord{Reassignments: ras}}})
	if res.err != nil {
		h.t.Fatal(res.err)
	}
	return res.value.([]error)
}

func (h *fsmHarness) mustReassign(topic string, idx int32, target ...int32) {
	h.t.Helper()
	if err := h.reassign(&pb.PartitionReassignment{Topic: topic, Partition: idx, Replicas: target})[0]; err != nil {
		h.t.Fatal(err)
	}
}

// alterISR proposes an ISR change as the partition's current leader.
func (h *fsmHarness) alterISR(topic string, idx int32, isr ...int32) error {
	h.t.Helper()
	p := h.part(topic, idx)
	return h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: p.Leader, BrokerEpoch: h.f.brokers[p.Leader].Epoch, Topic: topic, Partition: idx,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewIsr: isr}}}).err
}

type partitionWant struct {
	replicas, isr, adding, removing []int32
	leader, leaderEpoch             int32
}

func checkPartition(t *testing.T, p metadata.Partition, w partitionWant) {
	t.Helper()
	if !slices.Equal(p.Replicas, w.replicas) || !slices.Equal(p.ISR, w.isr) || !slices.Equal(p.AddingReplicas, w.adding) ||
		!slices.Equal(p.RemovingReplicas, w.removing) || p.Leader != w.leader || p.LeaderEpoch != w.leaderEpoch {
		t.Fatalf("partition: replicas %v isr %v adding %v removing %v leader %d leader epoch %d; want %+v",
			p.Replicas, p.ISR, p.AddingReplicas, p.RemovingReplicas, p.Leader, p.LeaderEpoch, w)
	}
}

// Moving a partition off its leader: the target is added, the reassignment completes
// when the new replica joins the ISR, and leadership moves to an in-sync target replica.
func TestReassignmentCompletesAndMovesLeader(t *testing.T) {
	h := reassignHarness(t, 4)
	before := h.part("t", 0)
	h.mustReassign("t", 0, 4, 2, 3)
	p := h.part("t", 0)
	checkPartition(t, p, partitionWant{replicas: []int32{4, 2, 3, 1}, isr: []int32{1, 2, 3}, adding: []int32{4}, removing: []int32{1},
		leader: 1, leaderEpoch: before.LeaderEpoch})
	if p.PartitionEpoch != before.PartitionEpoch+1 || !p.Reassigning() {
		t.Fatalf("partition epoch %d after %d, reassigning %v", p.PartitionEpoch, before.PartitionEpoch, p.Reassigning())
	}
	// An ISR change that does not yet cover the target keeps the reassignment going.
	if err := h.alterISR("t", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 2, 3, 1}, isr: []int32{1, 2}, adding: []int32{4}, removing: []int32{1},
		leader: 1, leaderEpoch: before.LeaderEpoch})
	if err := h.alterISR("t", 0, 1, 2, 4); err != nil {
		t.Fatal(err)
	}
	if err := h.alterISR("t", 0, 1, 2, 4, 3); err != nil {
		t.Fatal(err)
	}
	p = h.part("t", 0)
	checkPartition(t, p, partitionWant{replicas: []int32{4, 2, 3}, isr: []int32{2, 4, 3}, leader: 4, leaderEpoch: before.LeaderEpoch + 1})
	if p.Reassigning() || p.PartitionEpoch != before.PartitionEpoch+4 {
		t.Fatalf("partition epoch %d, reassigning %v", p.PartitionEpoch, p.Reassigning())
	}
}

// A leader that stays in the target keeps leading: no leader epoch bump.
func TestReassignmentKeepsLeaderInTarget(t *testing.T) {
	h := reassignHarness(t, 4)
	h.mustReassign("t", 0, 1, 2, 4)
	if err := h.alterISR("t", 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{1, 2, 4}, isr: []int32{1, 2, 4}, leader: 1, leaderEpoch: 0})
}

// A target the ISR already covers (a reorder, a smaller replica set) completes at once.
func TestReassignmentWithinISRCompletesAtOnce(t *testing.T) {
	h := reassignHarness(t, 3)
	h.mustReassign("t", 0, 3, 2)
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{3, 2}, isr: []int32{2, 3}, leader: 3, leaderEpoch: 1})
	h.mustReassign("t", 0, 2, 3)
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{2, 3}, isr: []int32{2, 3}, leader: 3, leaderEpoch: 1})
}

// The leader never moves to a replica outside the ISR: with no eligible target replica
// in the ISR the reassignment waits.
func TestReassignmentWaitsForAnEligibleLeader(t *testing.T) {
	h := reassignHarness(t, 4)
	h.mustReassign("t", 0, 4)
	if err := h.alterISR("t", 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	// Completed: 4 was in sync and eligible.
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4}, isr: []int32{4}, leader: 4, leaderEpoch: 1})

	h = reassignHarness(t, 4)
	h.mustReassign("t", 0, 4, 2)
	if err := h.alterISR("t", 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 2}, isr: []int32{2, 4}, leader: 4, leaderEpoch: 1})

	// The only target replica is in controlled shutdown.
	h = reassignHarness(t, 4)
	h.mustReassign("t", 0, 4)
	h.apply(&pb.Record{Record: &pb.Record_ControlledShutdown{ControlledShutdown: &pb.ControlledShutdownRecord{
		BrokerId: 4, BrokerEpoch: h.f.brokers[4].Epoch}}})
	// 4 may not join the ISR while shutting down, so nothing completes; and even a
	// reassignment whose ISR covered it would not hand leadership to it.
	if err := h.alterISR("t", 0, 1, 2, 3, 4); err == nil {
		t.Fatal("a broker in controlled shutdown joined the ISR")
	}
	np := &pb.PartitionState{Replicas: []int32{4, 1}, Isr: []int32{1, 4}, Leader: 1, AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}}
	completeReassignment(newChange(h.f, h.f.img.Offset+1), np)
	if np.Leader != 1 || len(np.AddingReplicas) == 0 {
		t.Fatalf("completed onto a broker in controlled shutdown: %+v", np)
	}
}

// Cancelling reverts to the replicas before the reassignment; a leader among the added
// replicas hands back to an original one.
func TestReassignmentCancel(t *testing.T) {
	h := reassignHarness(t, 5)
	wantKafkaErr(t, h.reassign(&pb.PartitionReassignment{Topic: "t", Partition: 0, Cancel: true})[0], kerr.NoReassignmentInProgress)
	h.mustReassign("t", 0, 4, 5, 2)
	if err := h.alterISR("t", 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	// The preferred replica (the target's first) is in sync and takes leadership.
	res := h.apply(&pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: &pb.ElectLeadersRecord{
		Type: pb.ElectionType_ELECTION_TYPE_PREFERRED, Partitions: []*pb.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}})
	if err := res.value.(electionResults)["t"][0]; err != nil {
		t.Fatal(err)
	}
	before := h.part("t", 0)
	checkPartition(t, before, partitionWant{replicas: []int32{4, 5, 2, 1, 3}, isr: []int32{1, 2, 3, 4}, adding: []int32{4, 5},
		removing: []int32{1, 3}, leader: 4, leaderEpoch: 1})
	if err := h.reassign(&pb.PartitionReassignment{Topic: "t", Partition: 0, Cancel: true})[0]; err != nil {
		t.Fatal(err)
	}
	// Kafka's revert keeps the replicas' current order: the target's survivors first.
	p := h.part("t", 0)
	checkPartition(t, p, partitionWant{replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}, leader: 2, leaderEpoch: 2})
	if p.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("partition epoch %d after %d", p.PartitionEpoch, before.PartitionEpoch)
	}
}

// A revert whose original replicas have all left the ISR needs an unclean election.
func TestReassignmentCancelRefusedWhenUnclean(t *testing.T) {
	h := reassignHarness(t, 4)
	h.mustReassign("t", 0, 4, 3)
	if err := h.alterISR("t", 0, 1, 4); err != nil {
		t.Fatal(err)
	}
	h.fence(1) // 4 leads, alone in the ISR, as 3 has not caught up
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 3, 1, 2}, isr: []int32{4}, adding: []int32{4}, removing: []int32{1, 2},
		leader: 4, leaderEpoch: 1})
	wantKafkaErr(t, h.reassign(&pb.PartitionReassignment{Topic: "t", Partition: 0, Cancel: true})[0], kerr.InvalidReplicaAssignment)
}

func TestReassignmentValidation(t *testing.T) {
	h := reassignHarness(t, 4)
	errs := h.reassign(
		&pb.PartitionReassignment{Topic: "t", Partition: 0},
		&pb.PartitionReassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 1}},
		&pb.PartitionReassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 9}},
		&pb.PartitionReassignment{Topic: "nope", Partition: 0, Replicas: []int32{1}},
		&pb.PartitionReassignment{Topic: "t", Partition: 1, Replicas: []int32{1}},
		&pb.PartitionReassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, RefuseReplicationFactorChange: true},
	)
	for i, want := range []*kerr.Error{kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment,
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition, kerr.InvalidReplicationFactor} {
		wantKafkaErr(t, errs[i], want)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 1})
	// An accepted entry beside a refused one.
	errs = h.reassign(&pb.PartitionReassignment{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 4}, RefuseReplicationFactorChange: true},
		&pb.PartitionReassignment{Topic: "t", Partition: 0, Replicas: nil})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	wantKafkaErr(t, errs[1], kerr.InvalidReplicaAssignment)
}

// A new target replaces the one in progress; replicas it no longer names are dropped.
func TestReassignmentReplaced(t *testing.T) {
	h := reassignHarness(t, 5)
	h.mustReassign("t", 0, 4, 2, 3)
	h.mustReassign("t", 0, 5, 2, 3)
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{5, 2, 3, 4, 1}, isr: []int32{1, 2, 3}, adding: []int32{5},
		removing: []int32{4, 1}, leader: 1})
	if err := h.alterISR("t", 0, 1, 2, 3, 5); err != nil {
		t.Fatal(err)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{5, 2, 3}, isr: []int32{2, 3, 5}, leader: 5, leaderEpoch: 1})
}

// Fencing mid-reassignment elects from the ISR, and an unclean election never picks a
// replica being added.
func TestReassignmentAcrossFencing(t *testing.T) {
	h := reassignHarness(t, 4)
	h.mustReassign("t", 0, 4, 2, 3)
	h.fence(1)
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 2, 3, 1}, isr: []int32{2, 3}, adding: []int32{4}, removing: []int32{1},
		leader: 2, leaderEpoch: 1})
	if err := h.alterISR("t", 0, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 2, 3}, isr: []int32{2, 3, 4}, leader: 2, leaderEpoch: 1})

	h = reassignHarness(t, 4)
	h.mustReassign("t", 0, 4, 2, 3)
	h.fence(2)
	h.fence(3)
	h.fence(1) // the last ISR member: leaderless, ISR [1]
	res := h.apply(&pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: &pb.ElectLeadersRecord{
		Type: pb.ElectionType_ELECTION_TYPE_UNCLEAN, Partitions: []*pb.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}})
	wantKafkaErr(t, res.value.(electionResults)["t"][0], kerr.EligibleLeadersNotAvailable)
	if p := h.part("t", 0); p.Leader != -1 {
		t.Fatalf("unclean election picked %d, a replica being added", p.Leader)
	}
}

// Every controller replaying the log, or restoring a snapshot taken mid-reassignment,
// reaches the same state and completes the reassignment the same way.
func TestReassignmentReplayAndSnapshot(t *testing.T) {
	h := reassignHarness(t, 4)
	h.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 1, ClusterId: "c"}}})
	h.mustCreate("u", 3, 3)
	h.mustReassign("t", 0, 4, 2, 3)
	// u-1 moves one replica onto the broker that lacks one.
	u1 := h.part("u", 1)
	missing := without([]int32{1, 2, 3, 4}, u1.Replicas)[0]
	h.mustReassign("u", 1, missing, u1.Replicas[0])
	data := snapshotBytes(t, h.f)

	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img, h.f.img) {
		t.Fatalf("restored image differs:\n%+v\n%+v", g.img, h.f.img)
	}
	replay := newFSM(slog.New(slog.DiscardHandler))
	for i, raw := range h.log {
		replay.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: raw})
	}
	if !bytes.Equal(snapshotBytes(t, replay), data) {
		t.Fatal("replaying the log gave a different state")
	}
	// The next record completes the reassignment on all three alike.
	p := h.part("t", 0)
	next := &pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: 1, BrokerEpoch: h.f.brokers[1].Epoch, Topic: "t", Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewIsr: []int32{1, 2, 3, 4}}}}
	raw, _ := proto.Marshal(next)
	h.apply(next)
	g.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: raw})
	replay.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: raw})
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 2, 3}, isr: []int32{2, 3, 4}, leader: 4, leaderEpoch: 1})
	if !reflect.DeepEqual(g.img, h.f.img) || !reflect.DeepEqual(replay.img, h.f.img) {
		t.Fatal("restored or replayed FSM diverged after the next record")
	}
	if !h.f.img.Partition("u", 1).Reassigning() {
		t.Fatal("u-1's reassignment was lost")
	}
}

// Sending the same target again changes nothing; a new target keeps a replica still
// being added as adding, so a cancel still drops it.
func TestReassignmentResubmitted(t *testing.T) {
	h := reassignHarness(t, 5)
	h.mustReassign("t", 0, 4, 2, 3)
	before := h.part("t", 0)
	h.mustReassign("t", 0, 4, 2, 3)
	if p := h.part("t", 0); !reflect.DeepEqual(p, before) {
		t.Fatalf("resubmitted target changed the partition: %+v -> %+v", before, p)
	}
	h.mustReassign("t", 0, 4, 5, 3)
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{4, 5, 3, 2, 1}, isr: []int32{1, 2, 3}, adding: []int32{4, 5},
		removing: []int32{2, 1}, leader: 1})
	if err := h.reassign(&pb.PartitionReassignment{Topic: "t", Partition: 0, Cancel: true})[0]; err != nil {
		t.Fatal(err)
	}
	checkPartition(t, h.part("t", 0), partitionWant{replicas: []int32{3, 2, 1}, isr: []int32{1, 2, 3}, leader: 1})
}

// New partitions of a topic that is being reassigned take the replication factor the
// reassignment heads for.
func TestCreatePartitionsDuringReassignment(t *testing.T) {
	h := reassignHarness(t, 4)
	h.mustReassign("t", 0, 4, 2)
	res := h.apply(&pb.Record{Record: &pb.Record_CreatePartitions{CreatePartitions: &pb.CreatePartitionsRecord{
		Specs: []*pb.NewPartitions{{Topic: "t", Count: 2, Seed: 1}}}}})
	if errs := res.value.([]error); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if p := h.part("t", 1); len(p.Replicas) != 2 {
		t.Fatalf("new partition has replicas %v, want 2 of them", p.Replicas)
	}
}
