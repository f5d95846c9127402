package controller

import (
	"bytes"
	"errors"
	"fmt"
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

// fsmHarness feeds records to an FSM as Raft would, and mirrors every delta into a
// broker-side image to check that the two stay identical.
type fsmHarness struct {
	t      testing.TB
	f      *fsm
	index  uint64
	mirror *metadata.Image
	log    [][]byte
}

func newHarness(t testing.TB) *fsmHarness {
	t.Helper()
	return &fsmHarness{t: t, f: newFSM(slog.New(slog.DiscardHandler)), mirror: emptyImage()}
}

func (h *fsmHarness) apply(rec *pb.Record) applyResult {
	h.t.Helper()
	data, err := proto.Marshal(rec)
	if err != nil {
		h.t.Fatal(err)
	}
	h.log = append(h.log, data)
	h.index++
	res, _ := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: data}).(applyResult)
	h.syncMirror()
	return res
}

func (h *fsmHarness) syncMirror() {
	h.t.Helper()
	ds, ok := h.f.deltas.since(h.mirror.Offset, h.f.img.Offset)
	if !ok {
		h.t.Fatalf("delta log lost the chain from %d", h.mirror.Offset)
	}
	for _, d := range ds {
		im, err := applyDelta(h.mirror, d)
		if err != nil {
			h.t.Fatal(err)
		}
		h.mirror = im
	}
	if !reflect.DeepEqual(h.mirror, h.f.img) {
		h.t.Fatalf("image rebuilt from deltas differs from the FSM's:\n%+v\n%+v", h.mirror, h.f.img)
	}
}

func (h *fsmHarness) register(id int32, rack string) int64 {
	h.t.Helper()
	res := h.apply(&pb.Record{Record: &pb.Record_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		BrokerId: id, Incarnation: fmt.Sprintf("inc-%d-%d", id, h.index), Rack: rack,
		Listeners: []*pb.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}},
	}}})
	if res.err != nil {
		h.t.Fatal(res.err)
	}
	epoch := res.value.(registerResult).epoch
	h.unfence(id, epoch)
	return epoch
}

func (h *fsmHarness) unfence(id int32, epoch int64) {
	h.t.Helper()
	if res := h.apply(&pb.Record{Record: &pb.Record_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{BrokerId: id, BrokerEpoch: epoch}}}); res.err != nil {
		h.t.Fatal(res.err)
	}
}

func (h *fsmHarness) fence(id int32) {
	h.t.Helper()
	b := h.f.brokers[id]
	h.apply(&pb.Record{Record: &pb.Record_FenceBrokers{FenceBrokers: &pb.FenceBrokersRecord{BrokerIds: []int32{id}, BrokerEpochs: []int64{b.Epoch}}}})
}

func topicID(n byte) []byte { return bytes.Repeat([]byte{n}, 16) }

func (h *fsmHarness) createTopic(nt *pb.NewTopic) createTopicResult {
	h.t.Helper()
	if nt.Id == nil {
		nt.Id = topicID(byte(h.index + 1))
	}
	res := h.apply(&pb.Record{Record: &pb.Record_CreateTopics{CreateTopics: &pb.CreateTopicsRecord{Topics: []*pb.NewTopic{nt}}}})
	return res.value.([]createTopicResult)[0]
}

func (h *fsmHarness) mustCreate(name string, partitions, rf int32) *metadata.Topic {
	h.t.Helper()
	r := h.createTopic(&pb.NewTopic{Name: name, NumPartitions: partitions, ReplicationFactor: rf, Seed: 7})
	if r.err != nil {
		h.t.Fatal(r.err)
	}
	return r.topic
}

func (h *fsmHarness) part(topic string, idx int32) metadata.Partition {
	h.t.Helper()
	p := h.f.img.Partition(topic, idx)
	if p == nil {
		h.t.Fatalf("no partition %s-%d", topic, idx)
	}
	return *p
}

func wantKafkaErr(t *testing.T, err error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %s", err, want.Message)
	}
}

func TestRegistrationFencingAndEpochs(t *testing.T) {
	h := newHarness(t)
	res := h.apply(&pb.Record{Record: &pb.Record_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{BrokerId: 1, Incarnation: "a"}}})
	epoch := res.value.(registerResult).epoch
	if epoch != int64(h.index) || !h.f.img.Brokers[1].Fenced {
		t.Fatalf("new registration: epoch %d fenced %v", epoch, h.f.img.Brokers[1].Fenced)
	}
	// A retry of the same incarnation keeps the epoch and writes nothing.
	before := h.f.img.Offset
	res = h.apply(&pb.Record{Record: &pb.Record_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{BrokerId: 1, Incarnation: "a"}}})
	if res.value.(registerResult).epoch != epoch || h.f.img.Offset != before {
		t.Fatal("retried registration changed state")
	}
	r := h.apply(&pb.Record{Record: &pb.Record_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{BrokerId: 1, BrokerEpoch: epoch + 5}}})
	wantKafkaErr(t, r.err, kerr.StaleBrokerEpoch)
	h.unfence(1, epoch)
	if h.f.img.Brokers[1].Fenced {
		t.Fatal("still fenced")
	}
	// A stale fence (for an older registration) does nothing.
	h.apply(&pb.Record{Record: &pb.Record_FenceBrokers{FenceBrokers: &pb.FenceBrokersRecord{BrokerIds: []int32{1}, BrokerEpochs: []int64{epoch - 1}}}})
	if h.f.img.Brokers[1].Fenced {
		t.Fatal("stale fence applied")
	}
	h.fence(1)
	if !h.f.img.Brokers[1].Fenced {
		t.Fatal("not fenced")
	}
}

func TestPlacementSpreadsReplicasAndLeaders(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	top := h.mustCreate("orders", 6, 3)
	leaders := map[int32]int{}
	for _, p := range top.Partitions {
		if len(p.Replicas) != 3 || len(slices.Compact(slices.Sorted(slices.Values(p.Replicas)))) != 3 {
			t.Fatalf("bad replicas %v", p.Replicas)
		}
		if p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) || p.LeaderEpoch != 0 {
			t.Fatalf("bad initial state %+v", p)
		}
		leaders[p.Leader]++
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 2 {
			t.Fatalf("leaders unbalanced: %v", leaders)
		}
	}
	// A second topic keeps the cluster-wide balance.
	h.mustCreate("payments", 3, 1)
	l, r := leaderCounts(h.f.img)
	for id := int32(1); id <= 3; id++ {
		if l[id] != 3 || r[id] != 7 {
			t.Fatalf("after two topics: leaders %v replicas %v", l, r)
		}
	}
}

func TestPlacementRackAware(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 6; id++ {
		h.register(id, fmt.Sprintf("rack-%d", id%3))
	}
	top := h.mustCreate("t", 12, 3)
	for _, p := range top.Partitions {
		racks := map[string]bool{}
		for _, r := range p.Replicas {
			racks[h.f.img.Brokers[r].Rack] = true
		}
		if len(racks) != 3 {
			t.Fatalf("partition %d replicas %v span %d racks", p.Index, p.Replicas, len(racks))
		}
	}
	l, _ := leaderCounts(h.f.img)
	for id := int32(1); id <= 6; id++ {
		if l[id] != 2 {
			t.Fatalf("leaders unbalanced: %v", l)
		}
	}
}

func TestCreateTopicValidation(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	h.mustCreate("a.b", 1, 1)
	cases := []struct {
		nt   *pb.NewTopic
		want *kerr.Error
	}{
		{&pb.NewTopic{Name: "a.b", NumPartitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists},
		{&pb.NewTopic{Name: "a_b", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{&pb.NewTopic{Name: "bad name", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{&pb.NewTopic{Name: "..", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{&pb.NewTopic{Name: string(bytes.Repeat([]byte("x"), 250)), NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{&pb.NewTopic{Name: "p0", NumPartitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{&pb.NewTopic{Name: "huge", NumPartitions: maxNewPartitions + 1, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{&pb.NewTopic{Name: "rf0", NumPartitions: 1, ReplicationFactor: 0}, kerr.InvalidReplicationFactor},
		{&pb.NewTopic{Name: "rf3", NumPartitions: 1, ReplicationFactor: 3}, kerr.InvalidReplicationFactor},
		{&pb.NewTopic{Name: "m1", Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 1}}}}, kerr.InvalidReplicaAssignment},
		{&pb.NewTopic{Name: "m2", Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 9}}}}, kerr.InvalidReplicaAssignment},
		{&pb.NewTopic{Name: "m3", Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2}}, {Replicas: []int32{1}}}}, kerr.InvalidReplicaAssignment},
		{&pb.NewTopic{Name: "m4", Assignments: []*pb.ReplicaList{{}}}, kerr.InvalidReplicaAssignment},
		{&pb.NewTopic{Name: "badid", Id: []byte{1}, NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidRequest},
	}
	for _, c := range cases {
		wantKafkaErr(t, h.createTopic(c.nt).err, c.want)
	}
	// A fenced broker does not count as available.
	h.fence(2)
	wantKafkaErr(t, h.createTopic(&pb.NewTopic{Name: "rf2", NumPartitions: 1, ReplicationFactor: 2}).err, kerr.InvalidReplicationFactor)
	top := h.mustCreate("rf1", 4, 1)
	for _, p := range top.Partitions {
		if p.Leader != 1 {
			t.Fatalf("placed on fenced broker: %+v", p)
		}
	}
	// Explicit assignments: eligible replicas form the ISR.
	r := h.createTopic(&pb.NewTopic{Name: "manual", Assignments: []*pb.ReplicaList{{Replicas: []int32{2, 1}}}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if p := r.topic.Partitions[0]; p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("manual partition %+v", p)
	}
}

func TestFailoverElections(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2, 3}}}})
	h.createTopic(&pb.NewTopic{Name: "solo", Id: topicID(2), Assignments: []*pb.ReplicaList{{Replicas: []int32{1}}}})

	h.fence(1)
	p := h.part("t", 0)
	if p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 {
		t.Fatalf("after fencing the leader: %+v", p)
	}
	// The last ISR member stays in the ISR, leaderless.
	s := h.part("solo", 0)
	if s.Leader != -1 || !slices.Equal(s.ISR, []int32{1}) || s.LeaderEpoch != 1 {
		t.Fatalf("solo after fencing: %+v", s)
	}
	// Fencing a follower shrinks the ISR without a leader change.
	h.fence(3)
	p = h.part("t", 0)
	if p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) || p.LeaderEpoch != 1 || p.PartitionEpoch != 2 {
		t.Fatalf("after fencing a follower: %+v", p)
	}
	// The only replica comes back: it leads again with a bumped epoch.
	h.unfence(1, h.f.brokers[1].Epoch)
	s = h.part("solo", 0)
	if s.Leader != 1 || s.LeaderEpoch != 2 {
		t.Fatalf("solo after unfencing: %+v", s)
	}
	// Broker 1 is back but out of the ISR: no preferred election yet.
	if h.f.electionNeeded(true) {
		t.Fatal("election needed while the preferred replica is out of the ISR")
	}
	// The leader adds it back; the preferred leader then returns.
	r := h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: 2, BrokerEpoch: h.f.brokers[2].Epoch, Topic: "t", Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewIsr: []int32{2, 1}}}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !h.f.electionNeeded(true) {
		t.Fatal("no election needed with the preferred replica back in the ISR")
	}
	h.apply(&pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: &pb.ElectLeadersRecord{}}})
	p = h.part("t", 0)
	if p.Leader != 1 || p.LeaderEpoch != 2 || p.PartitionEpoch != 4 {
		t.Fatalf("after preferred election: %+v", p)
	}
	if h.f.electionNeeded(true) {
		t.Fatal("election still needed")
	}
}

func TestUncleanElection(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 2; id++ {
		h.register(id, "")
	}
	for i, name := range []string{"clean", "dirty"} {
		h.createTopic(&pb.NewTopic{Name: name, Id: topicID(byte(i + 1)), Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2}}}})
	}
	h.apply(&pb.Record{Record: &pb.Record_SetTopicConfigs{SetTopicConfigs: &pb.SetTopicConfigsRecord{
		Topic: "dirty", Configs: map[string]string{"unclean.leader.election.enable": "true"}}}})
	h.fence(2) // ISR shrinks to [1]
	h.fence(1) // last member: leaderless
	for _, name := range []string{"clean", "dirty"} {
		if p := h.part(name, 0); p.Leader != -1 || !slices.Equal(p.ISR, []int32{1}) {
			t.Fatalf("%s: %+v", name, p)
		}
	}
	h.unfence(2, h.f.brokers[2].Epoch)
	if p := h.part("clean", 0); p.Leader != -1 {
		t.Fatalf("clean topic elected out of the ISR: %+v", p)
	}
	if p := h.part("dirty", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("dirty topic: %+v", p)
	}
	// The cluster default from the leader-change record applies to topics without a config.
	h.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 1, UncleanLeaderElection: true}}})
	h.apply(&pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: &pb.ElectLeadersRecord{}}})
	if p := h.part("clean", 0); p.Leader != 2 {
		t.Fatalf("clean topic with unclean default: %+v", p)
	}
}

func TestReregistrationFencesOldIncarnation(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2}}}})
	old := h.f.brokers[1].Epoch
	epoch := h.register(1, "") // a new process with the same id
	if epoch == old {
		t.Fatal("epoch not renewed")
	}
	if p := h.part("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after re-registration: %+v", p)
	}
}

func TestAlterPartitionCompareAndSet(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2, 3}}}})
	alter := func(broker int32, le, pe int32, isr ...int32) applyResult {
		return h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
			BrokerId: broker, BrokerEpoch: h.f.brokers[broker].Epoch, Topic: "t", Partition: 0,
			LeaderEpoch: le, PartitionEpoch: pe, NewIsr: isr}}})
	}
	r := alter(1, 0, 0, 1, 2)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.value.(alterPartitionResult).partition; got.PartitionEpoch != 1 || !slices.Equal(got.ISR, []int32{1, 2}) {
		t.Fatalf("result %+v", got)
	}
	wantKafkaErr(t, alter(1, 0, 0, 1).err, kerr.InvalidUpdateVersion)
	wantKafkaErr(t, alter(1, 3, 1, 1).err, kerr.FencedLeaderEpoch)
	wantKafkaErr(t, alter(2, 0, 1, 2).err, kerr.NotLeaderForPartition)
	wantKafkaErr(t, alter(1, 0, 1, 2).err, kerr.InvalidRequest)
	wantKafkaErr(t, alter(1, 0, 1, 1, 1).err, kerr.InvalidRequest)
	h.fence(3)
	wantKafkaErr(t, alter(1, 0, 1, 1, 2, 3).err, kerr.IneligibleReplica)
	// The ISR it has still moves the partition epoch: the leader's fence against its own
	// earlier, delayed sends of a refused change, which now find a stale epoch.
	r = alter(1, 0, 1, 1, 2)
	if got := r.value.(alterPartitionResult).partition; r.err != nil || got.PartitionEpoch != 2 || !slices.Equal(got.ISR, []int32{1, 2}) {
		t.Fatalf("fence: %+v %v", got, r.err)
	}
	h.unfence(3, h.f.brokers[3].Epoch)
	wantKafkaErr(t, alter(1, 0, 1, 1, 2, 3).err, kerr.InvalidUpdateVersion)
	r = h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: 1, BrokerEpoch: 999, Topic: "t", Partition: 0, NewIsr: []int32{1}}}})
	wantKafkaErr(t, r.err, kerr.StaleBrokerEpoch)
	r = h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: 1, BrokerEpoch: h.f.brokers[1].Epoch, Topic: "t", Partition: 5, NewIsr: []int32{1}}}})
	wantKafkaErr(t, r.err, kerr.UnknownTopicOrPartition)
}

func TestCreatePartitionsDeleteAndConfigs(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	top := h.mustCreate("t", 2, 2)
	grow := func(spec *pb.NewPartitions) error {
		res := h.apply(&pb.Record{Record: &pb.Record_CreatePartitions{CreatePartitions: &pb.CreatePartitionsRecord{Specs: []*pb.NewPartitions{spec}}}})
		return res.value.([]error)[0]
	}
	wantKafkaErr(t, grow(&pb.NewPartitions{Topic: "t", Count: 2}), kerr.InvalidPartitions)
	wantKafkaErr(t, grow(&pb.NewPartitions{Topic: "t", Count: 1}), kerr.InvalidPartitions)
	wantKafkaErr(t, grow(&pb.NewPartitions{Topic: "nope", Count: 3}), kerr.UnknownTopicOrPartition)
	wantKafkaErr(t, grow(&pb.NewPartitions{Topic: "t", Count: 3, Assignments: []*pb.ReplicaList{{Replicas: []int32{1}}}}), kerr.InvalidReplicaAssignment)
	wantKafkaErr(t, grow(&pb.NewPartitions{Topic: "t", Count: 4, Assignments: []*pb.ReplicaList{{Replicas: []int32{1, 2}}}}), kerr.InvalidReplicaAssignment)
	if err := grow(&pb.NewPartitions{Topic: "t", TopicId: top.ID[:], Count: 5}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.f.img.Topics["t"].Partitions); n != 5 {
		t.Fatalf("%d partitions", n)
	}
	if err := grow(&pb.NewPartitions{Topic: "t", Count: 6, Assignments: []*pb.ReplicaList{{Replicas: []int32{3, 1}}}}); err != nil {
		t.Fatal(err)
	}
	if p := h.part("t", 5); !slices.Equal(p.Replicas, []int32{3, 1}) || p.Leader != 3 {
		t.Fatalf("%+v", p)
	}

	res := h.apply(&pb.Record{Record: &pb.Record_SetTopicConfigs{SetTopicConfigs: &pb.SetTopicConfigsRecord{
		Topic: "t", TopicId: top.ID[:], Configs: map[string]string{"retention.ms": "1000"}}}})
	if res.err != nil || h.f.img.Topics["t"].Configs["retention.ms"] != "1000" {
		t.Fatalf("set configs: %v %v", res.err, h.f.img.Topics["t"].Configs)
	}

	// Offsets of a deleted topic go with it.
	h.apply(&pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: &pb.OffsetOpsRecord{Ops: []*pb.OffsetOp{
		{Group: "g", Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 10}}}}}}})
	res = h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{
		{Name: "t", Id: top.ID[:]}, {Name: "t"}, {Name: "other"}}}}})
	errs := res.value.([]error)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	wantKafkaErr(t, errs[1], kerr.UnknownTopicOrPartition)
	wantKafkaErr(t, errs[2], kerr.UnknownTopicOrPartition)
	if h.f.img.Topics["t"] != nil || len(h.f.fetchOffsets("g", nil)) != 0 || len(h.f.offsetGroups()) != 0 {
		t.Fatal("topic or its offsets survived deletion")
	}
	// Recreated under a new id: a record naming the old id does not touch it.
	h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(9), NumPartitions: 1, ReplicationFactor: 1})
	res = h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{{Name: "t", Id: top.ID[:]}}}}})
	wantKafkaErr(t, res.value.([]error)[0], kerr.UnknownTopicOrPartition)
}

func TestProducerIDsAndOffsets(t *testing.T) {
	h := newHarness(t)
	e1 := h.register(1, "")
	h.register(2, "")
	h.mustCreate("t", 3, 1)
	seen := map[int64]bool{}
	for i := 0; i < 4; i++ {
		id := int32(1 + i%2)
		res := h.apply(&pb.Record{Record: &pb.Record_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIdsRecord{
			BrokerId: id, BrokerEpoch: h.f.brokers[id].Epoch, Count: producerIDBlockSize}}})
		if res.err != nil {
			t.Fatal(res.err)
		}
		b := res.value.(producerIDBlock)
		if seen[b.first] || b.first != int64(i*producerIDBlockSize) {
			t.Fatalf("block %+v", b)
		}
		seen[b.first] = true
	}
	res := h.apply(&pb.Record{Record: &pb.Record_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIdsRecord{
		BrokerId: 1, BrokerEpoch: e1 - 1, Count: producerIDBlockSize}}})
	wantKafkaErr(t, res.err, kerr.StaleBrokerEpoch)

	res = h.apply(&pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: &pb.OffsetOpsRecord{Ops: []*pb.OffsetOp{
		{Group: "g1", Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 5, Metadata: "m", CommitTimeMs: 1000}, {Topic: "t", Partition: 1, Offset: 7}}},
		{Group: "g2", Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 9, Offset: 1}}},
		{Group: "", Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 1}}},
		{Group: "g1", Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 6}}},
	}}}})
	errs := res.value.([]error)
	if errs[0] != nil || errs[3] != nil {
		t.Fatal(errs)
	}
	wantKafkaErr(t, errs[1], kerr.UnknownTopicOrPartition)
	wantKafkaErr(t, errs[2], kerr.InvalidGroupID)
	got := h.f.fetchOffsets("g1", nil)
	if len(got) != 2 || got[0].Offset != 6 || got[1].Offset != 7 || got[0].Metadata != "" {
		t.Fatalf("offsets %+v", got)
	}
	if got := h.f.fetchOffsets("g1", map[string][]int32{"t": {1}}); len(got) != 1 || got[0].Partition != 1 {
		t.Fatalf("filtered %+v", got)
	}
	if g := h.f.offsetGroups(); !slices.Equal(g, []string{"g1"}) {
		t.Fatalf("groups %v", g)
	}
	h.apply(&pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: &pb.OffsetOpsRecord{Ops: []*pb.OffsetOp{
		{Group: "g1", Delete: true, DeleteTopics: []*pb.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}}}})
	if got := h.f.fetchOffsets("g1", nil); len(got) != 1 || got[0].Partition != 1 {
		t.Fatalf("after delete %+v", got)
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func snapshotBytes(t testing.TB, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// checkInImageSnapshotAndChunks checks that part of h's image is want, and stays so in
// an FSM restored from h's snapshot and in the image a broker assembles from h's image
// chunks; what names the part in failures.
func checkInImageSnapshotAndChunks(t *testing.T, h *fsmHarness, what string, part func(*metadata.Image) any, want any) {
	t.Helper()
	if got := part(h.f.img); !reflect.DeepEqual(got, want) {
		t.Fatalf("image %s %v, want %v", what, got, want)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if got := part(g.img); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %s %v, want %v", what, got, want)
	}
	var a imageAssembler
	var im *metadata.Image
	for _, c := range imageChunks(h.f.img, nil, 2) {
		var err error
		if im, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if im == nil || !reflect.DeepEqual(part(im), want) {
		t.Fatalf("assembled %s %v, want %v", what, im, want)
	}
}

// buildBusyFSM runs a mixed workload through a harness.
func buildBusyFSM(t testing.TB) *fsmHarness {
	h := newHarness(t)
	for id := int32(1); id <= 4; id++ {
		h.register(id, fmt.Sprintf("r%d", id%2))
	}
	h.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 2, ClusterId: "cluster-x"}}})
	for i := 0; i < 5; i++ {
		h.mustCreate(fmt.Sprintf("topic-%d", i), int32(i+1), 3)
	}
	h.fence(2)
	h.apply(&pb.Record{Record: &pb.Record_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIdsRecord{
		BrokerId: 1, BrokerEpoch: h.f.brokers[1].Epoch, Count: producerIDBlockSize}}})
	h.apply(&pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: &pb.OffsetOpsRecord{Ops: []*pb.OffsetOp{
		{Group: "g", Commits: []*pb.OffsetEntry{{Topic: "topic-4", Partition: 3, Offset: 42, LeaderEpoch: 1, Metadata: "x", CommitTimeMs: 5}}}}}}})
	return h
}

func TestSnapshotRestore(t *testing.T) {
	h := buildBusyFSM(t)
	data := snapshotBytes(t, h.f)

	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img, h.f.img) {
		t.Fatalf("restored image differs:\n%+v\n%+v", g.img, h.f.img)
	}
	if !reflect.DeepEqual(g.groups, h.f.groups) || g.nextProducerID != h.f.nextProducerID || g.unclean != h.f.unclean {
		t.Fatal("restored side state differs")
	}
	if !bytes.Equal(snapshotBytes(t, g), data) {
		t.Fatal("snapshot of the restored state differs")
	}
	// The restored FSM carries on with the log exactly like the original.
	next := &pb.Record{Record: &pb.Record_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{BrokerId: 2, BrokerEpoch: h.f.brokers[2].Epoch}}}
	raw, _ := proto.Marshal(next)
	h.apply(next)
	g.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: raw})
	if !reflect.DeepEqual(g.img, h.f.img) {
		t.Fatal("restored FSM diverged after the next record")
	}
	// A broker at the snapshot's offset cannot chain deltas from before it.
	if _, ok := g.deltas.since(1, g.img.Offset); ok {
		t.Fatal("restored delta log claims history before the snapshot")
	}

	if err := g.Restore(io.NopCloser(bytes.NewReader(data[:len(data)/2]))); err == nil {
		t.Fatal("truncated snapshot restored")
	}
}

func TestFSMDeterministic(t *testing.T) {
	h := buildBusyFSM(t)
	g := newFSM(slog.New(slog.DiscardHandler))
	for i, data := range h.log {
		g.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
	}
	if !bytes.Equal(snapshotBytes(t, g), snapshotBytes(t, h.f)) {
		t.Fatal("replaying the same log gave a different state")
	}
}

func TestUndecodableRecordIsSkipped(t *testing.T) {
	f := newFSM(slog.New(slog.DiscardHandler))
	res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff, 0xff}}).(applyResult)
	if res.err == nil || f.img.Offset != 0 {
		t.Fatal("garbage record applied")
	}
}

// The controller refuses a topic name with the broker's own validator, so both give a
// client the same reason.
func TestTopicNameRulesAreTheBrokers(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	for _, name := range []string{"bad name", "..", "", string(bytes.Repeat([]byte("x"), 250))} {
		want := metadata.ValidateTopicName(name)
		if got := h.createTopic(&pb.NewTopic{Name: name, NumPartitions: 1, ReplicationFactor: 1}).err; got == nil || want == nil || got.Error() != want.Error() {
			t.Errorf("topic %.20q: controller says %v, broker says %v", name, got, want)
		}
	}
}
