package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

var (
	oldTopicID = [16]byte{0xa}
	newTopicID = [16]byte{0xb}
)

// recordBatch builds a valid RecordBatch v2 of n records at base, in leader epoch epoch.
func recordBatch(t *testing.T, base int64, n int, epoch int32) []byte {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{OffsetDelta: int32(i), Value: []byte("old topic's record")}
	}
	b, err := records.Build(shalelog.Header{BaseOffset: base, PartitionLeaderEpoch: epoch, Magic: 2,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, shalelog.CodecNone, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// topicImage is an image holding topic t, partition 0, under topic id id, with brokers
// 1 to 3 registered at epoch 7.
func topicImage(offset uint64, id [16]byte, p metadata.Partition) *metadata.Image {
	p.Topic, p.Index = "t", 0
	brokers := map[int32]metadata.Broker{}
	for id := int32(1); id <= 3; id++ {
		brokers[id] = metadata.Broker{ID: id, Host: "127.0.0.1", Port: 1, Epoch: 7}
	}
	return &metadata.Image{Offset: offset, Brokers: brokers,
		Topics: map[string]*metadata.Topic{"t": {Name: "t", ID: id, Partitions: []metadata.Partition{p}, Configs: map[string]string{}}}}
}

func testManager(t *testing.T, dir string, st metadata.Store) *Manager {
	t.Helper()
	m, err := NewManager(Config{NodeID: 1, LogDir: dir, ReplicaFetchBackoff: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// setAsideDirs lists the replica directories of t-0 set aside for deletion.
func setAsideDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "t-0.") && strings.HasSuffix(e.Name(), "-delete") {
			out = append(out, e.Name())
		}
	}
	return out
}

// assertFreshReplica checks that t-0 is an empty replica of the new topic, and that the
// old topic's directory was set aside as a deleted topic's is.
func assertFreshReplica(t *testing.T, m *Manager, dir string, old *partition.Partition) *partition.Partition {
	t.Helper()
	p := m.Replica("t", 0)
	switch {
	case p == nil:
		t.Fatal("no replica of the recreated topic")
	case p == old:
		t.Fatalf("the recreated topic is served from the old topic's replica (topic id %x, log %d-%d)",
			p.TopicID(), p.LogStartOffset(), p.LogEndOffset())
	case p.TopicID() != newTopicID:
		t.Fatalf("replica holds topic id %x, want %x", p.TopicID(), newTopicID)
	case p.LogStartOffset() != 0 || p.LogEndOffset() != 0 || p.HighWatermark() != 0:
		t.Fatalf("recreated topic's replica is not empty: log %d-%d, high watermark %d",
			p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark())
	}
	if old.Role() != partition.RoleNone {
		t.Fatalf("the old topic's replica still acts as %v", old.Role())
	}
	if got := setAsideDirs(t, dir); len(got) != 1 {
		t.Fatalf("old topic's directory set aside as %v, want one t-0.*-delete", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "t-0", "partition.metadata"))
	if err != nil || !strings.Contains(string(b), "0b000000000000000000000000000000") {
		t.Fatalf("t-0/partition.metadata does not name the new topic id: %q %v", b, err)
	}
	return p
}

// A topic deleted and recreated under the same name reaches a broker as one image with
// the same name and a new topic id (images are coalesced; a broker that reconnects gets
// one full image), with epochs older than the old replica's. The old replica must go as
// a deleted topic's does, its waiters answered with an error, and the new topic start
// empty, never served from the old topic's log.
func TestRecreatedTopicDoesNotServeTheOldLog(t *testing.T) {
	dir := t.TempDir()
	st := &applyStore{im: topicImage(10, oldTopicID, metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})}
	m := testManager(t, dir, st)
	old := m.Replica("t", 0)
	if old == nil || old.Role() != partition.RoleLeader {
		t.Fatalf("old topic's replica: %v", old)
	}
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 5, 0)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	// Follower 2 has it all: the old topic's records are committed and readable.
	follower := Reader{ReplicaID: 2, BrokerEpoch: 7}
	if res := m.Fetch(follower, FetchPartition{Topic: "t", FetchOffset: 5, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, MaxBytes: 1 << 20}); res.Err != nil {
		t.Fatal(res.Err)
	} else if res.View != nil {
		res.View.Release()
	}
	if hw := old.HighWatermark(); hw != 5 {
		t.Fatalf("old topic's high watermark %d, want 5", hw)
	}
	// An acks=all produce waits for follower 2, and a long poll for new data.
	waiting := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 1, 0)}}
	m.Append(context.Background(), -1, waiting)
	if waiting[0].Err != nil {
		t.Fatal(waiting[0].Err)
	}
	awaited := make(chan struct{})
	go func() {
		defer close(awaited)
		m.AwaitReplication(context.Background(), waiting, 3*time.Second)
	}()
	poll := old.Waiter()

	m.apply(topicImage(11, newTopicID, metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0}), false)

	select {
	case <-poll:
	case <-time.After(time.Second):
		t.Error("a long poll parked on the old topic's replica was not woken")
	}
	<-awaited
	if !errors.Is(waiting[0].Err, kerr.NotLeaderForPartition) {
		t.Errorf("acks=all produce to the old topic answered %v, want NOT_LEADER_OR_FOLLOWER", waiting[0].Err)
	}
	p := assertFreshReplica(t, m, dir, old)
	if p.Role() != partition.RoleLeader || p.LeaderEpoch() != 0 {
		t.Fatalf("new topic's replica: role %v, leader epoch %d", p.Role(), p.LeaderEpoch())
	}
	res := m.Fetch(Reader{ReplicaID: -1}, FetchPartition{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, MaxBytes: 1 << 20, MinOne: true})
	if res.View != nil {
		defer res.View.Release()
	}
	if res.Err != nil || (res.View != nil && res.View.Size != 0) || res.HighWatermark != 0 {
		t.Fatalf("consumer fetch of the recreated topic: err %v, high watermark %d, view %+v", res.Err, res.HighWatermark, res.View)
	}
	// The new topic takes writes from offset 0.
	parts = []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 2, 0)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil || parts[0].Result.BaseOffset != 0 {
		t.Fatalf("produce to the recreated topic: %+v %v", parts[0].Result, parts[0].Err)
	}
}

// The follower side, with the new topic's epochs equal to the old one's: the replica
// must not keep the old topic's records as if they were replicated from the new leader.
func TestRecreatedTopicFollowerStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	state := metadata.Partition{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 0, PartitionEpoch: 0}
	st := &applyStore{im: topicImage(10, oldTopicID, state)}
	m := testManager(t, dir, st)
	old := m.Replica("t", 0)
	if old == nil || old.Role() != partition.RoleFollower {
		t.Fatalf("old topic's replica: %v", old)
	}
	if _, err := old.AppendAsFollower(recordBatch(t, 0, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	old.SetFollowerHighWatermark(5)

	m.apply(topicImage(11, newTopicID, state), false)

	p := assertFreshReplica(t, m, dir, old)
	if p.Role() != partition.RoleFollower || p.LeaderEpoch() != 0 {
		t.Fatalf("new topic's replica: role %v, leader epoch %d", p.Role(), p.LeaderEpoch())
	}
}

// The leader refuses a fetch naming another topic id than its replica's (Fetch v13+
// names topics by id), so that neither a follower nor a consumer of a recreated topic
// reads the old topic's log while the leader has not applied the change yet, or the
// other way round.
func TestFetchWithAnotherTopicIDIsRefused(t *testing.T) {
	st := &applyStore{im: topicImage(10, oldTopicID, metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})}
	m := testManager(t, t.TempDir(), st)
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 5, 0)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	for _, who := range []Reader{{ReplicaID: 2, BrokerEpoch: 7}, {ReplicaID: -1}} {
		// A follower's last fetched epoch unknown here must not get it a divergence
		// answer (it would truncate against another topic's log): the id comes first.
		for _, lastEpoch := range []int32{-1, 3} {
			res := m.Fetch(who, FetchPartition{Topic: "t", TopicID: newTopicID, FetchOffset: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: lastEpoch, MaxBytes: 1 << 20, MinOne: true})
			if res.View != nil {
				res.View.Release()
				t.Errorf("replica %d read the old topic's log under the new topic id", who.ReplicaID)
			}
			if !errors.Is(res.Err, kerr.UnknownTopicID) || res.DivergingEpoch >= 0 {
				t.Errorf("replica %d: fetch under another topic id answered %v (diverging epoch %d), want UNKNOWN_TOPIC_ID",
					who.ReplicaID, res.Err, res.DivergingEpoch)
			}
		}
		// The same fetch under the replica's own topic id, or none (Fetch v12 and
		// older), is served.
		for _, id := range [][16]byte{oldTopicID, {}} {
			res := m.Fetch(who, FetchPartition{Topic: "t", TopicID: id, FetchOffset: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, MaxBytes: 1 << 20, MinOne: true})
			if res.View != nil {
				res.View.Release()
			}
			if res.Err != nil {
				t.Errorf("replica %d, topic id %x: %v", who.ReplicaID, id, res.Err)
			}
		}
	}
}
