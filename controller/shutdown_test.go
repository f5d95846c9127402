package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func TestControlledShutdownFSM(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	h.createTopic(&pb.NewTopic{Name: "t", Id: topicID(1), Assignments: []*pb.ReplicaList{
		{Replicas: []int32{1, 2, 3}}, {Replicas: []int32{2, 1, 3}}}})
	h.createTopic(&pb.NewTopic{Name: "solo", Id: topicID(2), Assignments: []*pb.ReplicaList{{Replicas: []int32{1}}}})
	if !h.f.leadsMovable(1) {
		t.Fatal("broker 1 leads t-0 with a full ISR, yet nothing is movable")
	}
	shut := func(id int32) applyResult {
		return h.apply(&pb.Record{Record: &pb.Record_ControlledShutdown{ControlledShutdown: &pb.ControlledShutdownRecord{
			BrokerId: id, BrokerEpoch: h.f.brokers[id].Epoch}}})
	}
	if r := shut(1); r.err != nil {
		t.Fatal(r.err)
	}
	if p := h.part("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) || p.LeaderEpoch != 1 {
		t.Fatalf("t-0 after controlled shutdown of its leader: %+v", p)
	}
	if p := h.part("t", 1); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) || p.LeaderEpoch != 0 {
		t.Fatalf("t-1 after controlled shutdown of a follower: %+v", p)
	}
	// The last ISR member keeps leading: no one else could.
	if p := h.part("solo", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) || p.LeaderEpoch != 0 {
		t.Fatalf("solo: %+v", p)
	}
	if h.f.leadsMovable(1) {
		t.Fatal("broker 1 still leads something movable")
	}
	if h.f.image().Brokers[1].Fenced || !h.f.brokers[1].InControlledShutdown {
		t.Fatalf("broker 1: %+v", h.f.brokers[1])
	}
	// It may not rejoin an ISR or take leadership back while shutting down.
	p := h.part("t", 0)
	r := h.apply(&pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: 2, BrokerEpoch: h.f.brokers[2].Epoch, Topic: "t", Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewIsr: []int32{2, 3, 1}}}})
	wantKafkaErr(t, r.err, kerr.IneligibleReplica)
	res := h.elect(pb.ElectionType_ELECTION_TYPE_PREFERRED, map[string][]int32{"t": {0}})
	wantKafkaErr(t, res["t"][0], kerr.PreferredLeaderNotAvailable)
	if h.f.electionNeeded(true) {
		t.Fatal("an election would give a broker in controlled shutdown leadership")
	}
	// Fencing another broker does not take solo's leader away.
	h.fence(3)
	if p := h.part("solo", 0); p.Leader != 1 {
		t.Fatalf("solo after fencing broker 3: %+v", p)
	}
	// Stopped: fenced, the flag cleared, solo leaderless.
	h.fence(1)
	if b := h.f.brokers[1]; !b.Fenced || b.InControlledShutdown {
		t.Fatalf("broker 1 after fencing: %+v", b)
	}
	if p := h.part("solo", 0); p.Leader != -1 {
		t.Fatalf("solo after its broker stopped: %+v", p)
	}
	// A fenced broker's shutdown changes nothing; a stale epoch is refused.
	if r := shut(1); r.err != nil {
		t.Fatal(r.err)
	}
	r = h.apply(&pb.Record{Record: &pb.Record_ControlledShutdown{ControlledShutdown: &pb.ControlledShutdownRecord{BrokerId: 2, BrokerEpoch: 999}}})
	wantKafkaErr(t, r.err, kerr.StaleBrokerEpoch)
}

func TestControlledShutdown(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, func(c *Config) { c.DisableAutoLeaderRebalance = true })
	q.leader()
	b1, b2, b3 := q.broker(1, ""), q.broker(2, ""), q.broker(3, "")
	mustCreateTopic(t, b1, "t", 3, 3)
	before := waitImage(t, b2, "topic", func(im *metadata.Image) bool { return im.Topic("t") != nil })
	led := ledBy(before, "t", 1)
	if len(led) != 1 {
		t.Fatalf("broker 1 leads %v", led)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := b1.ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("controlled shutdown took %v (session timeout %v)", took, testSessionTimeout)
	if took > testSessionTimeout/2 {
		t.Fatalf("controlled shutdown took %v", took)
	}
	// Its own cache already shows the move when ControlledShutdown returns.
	im := b1.Current()
	for _, p := range im.Topic("t").Partitions {
		old := before.Partition("t", p.Index)
		if p.Leader == 1 || slices.Contains(p.ISR, 1) {
			t.Fatalf("partition %d after controlled shutdown: %+v", p.Index, p)
		}
		if p.Index == led[0] && (p.LeaderEpoch <= old.LeaderEpoch || !slices.Contains(old.ISR, p.Leader)) {
			t.Fatalf("partition %d moved from %+v to %+v", p.Index, *old, p)
		}
	}
	if im.Brokers[1].Fenced || !b1.LeaseValid() {
		t.Fatal("broker fenced before it stopped")
	}
	// It keeps its lease through heartbeats until it stops; then it is fenced at once.
	time.Sleep(2 * testSessionTimeout)
	if b2.Current().Brokers[1].Fenced {
		t.Fatal("broker in controlled shutdown fenced while heartbeating")
	}
	b1.Close()
	waitImage(t, b3, "broker 1 fenced", func(im *metadata.Image) bool { return im.Brokers[1].Fenced })
	if time.Since(start) > 2*testSessionTimeout+testSessionTimeout/2 {
		t.Fatalf("fenced only after its session expired")
	}
}
