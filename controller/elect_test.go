package controller

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// addToISR has the partition's leader add a broker back into its ISR.
func (h *fsmHarness) addToISR(topic string, idx, id int32) {
	h.t.Helper()
	p := h.part(topic, idx)
	r := h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: p.Leader, BrokerEpoch: h.f.brokers[p.Leader].Epoch, Topic: topic, Partition: idx,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewIsr: append(slices.Clone(p.ISR), id)}}})
	if r.err != nil {
		h.t.Fatal(r.err)
	}
}

func (h *fsmHarness) elect(typ pb.ElectionType, parts map[string][]int32) electionResults {
	h.t.Helper()
	rec := &pb.ElectLeadersRecord{Type: typ, AllPartitions: parts == nil, Partitions: topicPartitionsPB(parts)}
	r := h.apply(&pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: rec}})
	if r.err != nil {
		h.t.Fatal(r.err)
	}
	return r.value.(electionResults)
}

// tenPreferringOne builds topic t of 10 partitions, all preferring broker 1, led by
// broker 2 after broker 1 was fenced and came back into every ISR.
func tenPreferringOne(t *testing.T) *fsmHarness {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	var as []*pb.ReplicaList
	for range 10 {
		as = append(as, &pb.ReplicaList{Replicas: []int32{1, 2, 3}})
	}
	h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: as})
	h.fence(1)
	h.unfence(1, h.f.brokers[1].Epoch)
	for idx := range int32(10) {
		if p := h.part("t", idx); p.Leader != 2 {
			t.Fatalf("partition %d: %+v", idx, p)
		}
		h.addToISR("t", idx, 1)
	}
	return h
}

func TestLeaderImbalanceThreshold(t *testing.T) {
	h := tenPreferringOne(t)
	// Leaderless partitions aside, the tick's election leaves preferred leaders alone.
	if h.f.electionNeeded(false) {
		t.Fatal("leaderless election needed with every partition led")
	}
	got := h.f.imbalancedPartitions(10)
	if want := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got["t"], want) || len(got) != 1 {
		t.Fatalf("imbalanced %v, want t:%v", got, want)
	}
	// Move 9 back: 1 of 10 (10%) led elsewhere is not above 10%.
	res := h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, map[string][]int32{"t": {0, 1, 2, 3, 4, 5, 6, 7, 8}})
	for idx, err := range res["t"] {
		if err != nil {
			t.Fatalf("partition %d: %v", idx, err)
		}
		if p := h.part("t", idx); p.Leader != 1 || p.LeaderEpoch != 2 {
			t.Fatalf("partition %d after preferred election: %+v", idx, p)
		}
	}
	if got := h.f.imbalancedPartitions(10); got != nil {
		t.Fatalf("imbalanced at exactly 10%%: %v", got)
	}
	if got := h.f.imbalancedPartitions(9); !slices.Equal(got["t"], []int32{9}) {
		t.Fatalf("imbalanced above 9%%: %v", got)
	}
	if got := h.f.imbalancedPartitions(0); !slices.Equal(got["t"], []int32{9}) {
		t.Fatalf("imbalanced above 0%%: %v", got)
	}
	// A preferred replica out of the ISR is no candidate, whatever the ratio.
	h.fence(1)
	h.unfence(1, h.f.brokers[1].Epoch)
	if got := h.f.imbalancedPartitions(0); got != nil {
		t.Fatalf("candidates with the preferred replica out of every ISR: %v", got)
	}
}

func TestExplicitPreferredElection(t *testing.T) {
	h := tenPreferringOne(t)
	h.fence(3)
	res := h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, map[string][]int32{"t": {0}, "nope": {0}})
	if res["t"][0] != nil {
		t.Fatal(res["t"][0])
	}
	wantKafkaErr(t, res["nope"][0], kerr.UnknownTopicOrPartition)
	res = h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, map[string][]int32{"t": {0, 10}})
	wantKafkaErr(t, res["t"][0], kerr.ElectionNotNeeded)
	wantKafkaErr(t, res["t"][10], kerr.UnknownTopicOrPartition)

	// Partition 1's preferred replica is fenced: not available.
	h.fence(1)
	res = h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, map[string][]int32{"t": {1}})
	wantKafkaErr(t, res["t"][1], kerr.PreferredLeaderNotAvailable)
	// Back, but out of the ISR: still not available.
	h.unfence(1, h.f.brokers[1].Epoch)
	res = h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, map[string][]int32{"t": {1}})
	wantKafkaErr(t, res["t"][1], kerr.PreferredLeaderNotAvailable)

	// All partitions: only those an election was tried for are reported.
	h.addToISR("t", 2, 1)
	h.addToISR("t", 3, 1)
	res = h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, nil)
	if got := slices.Sorted(maps.Keys(res["t"])); len(got) != 10 {
		// Every partition is led by 2 and prefers 1: each is tried.
		t.Fatalf("all-partition results for %v", got)
	}
	for idx, err := range res["t"] {
		if idx == 2 || idx == 3 {
			if err != nil {
				t.Fatalf("partition %d: %v", idx, err)
			}
			continue
		}
		wantKafkaErr(t, err, kerr.PreferredLeaderNotAvailable)
	}
	res = h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, nil)
	if _, ok := res["t"][2]; ok {
		t.Fatalf("partition led by its preferred replica reported: %v", res)
	}
}

func TestExplicitUncleanElection(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	r := h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: []*pb.ReplicaList{
		{Replicas: []int32{1, 2}}, {Replicas: []int32{3, 1}}}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	res := h.elect(pb.ElectionType_ELECTION_TYPE_UNCLEAN, map[string][]int32{"t": {0}})
	wantKafkaErr(t, res["t"][0], kerr.ElectionNotNeeded)

	h.fence(2) // t-0's ISR shrinks to [1]
	h.fence(1) // t-0 leaderless with ISR [1]; t-1's ISR shrinks to [3]
	h.fence(3) // t-1 leaderless with ISR [3]
	// The cluster default forbids unclean elections; an explicit one goes ahead anyway.
	h.unfence(2, h.f.brokers[2].Epoch)
	if p := h.part("t", 0); p.Leader != -1 {
		t.Fatalf("t-0 elected out of its ISR without an explicit unclean election: %+v", p)
	}
	res = h.elect(pb.ElectionType_ELECTION_TYPE_UNCLEAN, map[string][]int32{"t": {0, 1}})
	if res["t"][0] != nil {
		t.Fatal(res["t"][0])
	}
	if p := h.part("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) || p.LeaderEpoch != 2 {
		t.Fatalf("t-0 after unclean election: %+v", p)
	}
	wantKafkaErr(t, res["t"][1], kerr.EligibleLeadersNotAvailable)
}

func TestBrokerClientElectLeaders(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, func(c *Config) { c.DisableAutoLeaderRebalance = true })
	q.leader()
	b1, b2, b3 := q.broker(1, ""), q.broker(2, ""), q.broker(3, "")
	mustCreateTopic(t, b1, "t", 3, 3)
	im := waitImage(t, b1, "topic", func(im *metadata.Image) bool { return im.Topic("t") != nil })
	prefer2 := ledBy(im, "t", 2)
	if len(prefer2) != 1 {
		t.Fatalf("broker 2 leads %v", prefer2)
	}
	b2.Close()
	waitImage(t, b1, "broker 2 fenced", func(im *metadata.Image) bool { return im.Brokers[2].Fenced })
	b2 = q.broker(2, "")
	im = waitImage(t, b1, "broker 2 back", func(im *metadata.Image) bool { return !im.Brokers[2].Fenced })
	leaders := map[int32]*BrokerClient{1: b1, 2: b2, 3: b3}
	ctx := ctxFor(t)
	for _, p := range im.Topic("t").Partitions {
		if slices.Contains(p.ISR, 2) {
			continue
		}
		if _, err := leaders[p.Leader].AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "t", Partition: p.Index,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), 2)}); err != nil {
			t.Fatalf("partition %d: %v", p.Index, err)
		}
	}
	// Rebalancing is off: broker 2 stays without leadership until asked.
	time.Sleep(300 * time.Millisecond)
	if p := b3.Current().Partition("t", prefer2[0]); p.Leader == 2 {
		t.Fatalf("preferred leader came back with auto.leader.rebalance.enable off: %+v", *p)
	}
	res, err := b3.ElectLeaders(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res["t"]) != 1 || res["t"][prefer2[0]] != nil {
		t.Fatalf("all-partition preferred election: %v", res)
	}
	im = waitImage(t, b1, "preferred leader back", func(im *metadata.Image) bool { return im.Partition("t", prefer2[0]).Leader == 2 })
	if p := im.Partition("t", prefer2[0]); p.LeaderEpoch != 2 {
		t.Fatalf("after election: %+v", *p)
	}
	res, err = b1.ElectLeaders(ctx, true, map[string][]int32{"t": {0, 1, 2}, "none": {0}})
	if err != nil {
		t.Fatal(err)
	}
	for idx := range int32(3) {
		wantKafkaErr(t, res["t"][idx], kerr.ElectionNotNeeded)
	}
	wantKafkaErr(t, res["none"][0], kerr.UnknownTopicOrPartition)
	res, err = b1.ElectLeaders(ctx, false, map[string][]int32{"t": {0}})
	if err != nil {
		t.Fatal(err)
	}
	wantKafkaErr(t, res["t"][0], kerr.ElectionNotNeeded)
}
