package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// stepClock is a Clock the test moves by hand.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rackImage holds t-0 on brokers 1 to 4 (racks a, b, b, c), all registered at epoch 7.
func rackImage(offset uint64, p metadata.Partition, fenced ...int32) *metadata.Image {
	p.Topic, p.Index = "t", 0
	racks := map[int32]string{1: "a", 2: "b", 3: "b", 4: "c"}
	brokers := map[int32]metadata.Broker{}
	for id, rack := range racks {
		b := metadata.Broker{ID: id, Host: "127.0.0.1", Port: 1, Rack: rack, Epoch: 7}
		for _, f := range fenced {
			b.Fenced = b.Fenced || f == id
		}
		brokers[id] = b
	}
	return &metadata.Image{Offset: offset, Brokers: brokers,
		Topics: map[string]*metadata.Topic{"t": {Name: "t", ID: [16]byte{7}, Partitions: []metadata.Partition{p}, Configs: map[string]string{}}}}
}

func rackManager(t *testing.T, node int32, sel ReplicaSelector, clock Clock, st metadata.Store) *Manager {
	t.Helper()
	m, err := NewManager(Config{NodeID: node, LogDir: t.TempDir(), ReplicaFetchBackoff: 50 * time.Millisecond,
		ReplicaSelector: sel, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

func consumerFetch(m *Manager, client *ClientMetadata, offset int64, epoch int32) FetchResult {
	res := m.Fetch(Reader{ReplicaID: -1, Client: client}, FetchPartition{Topic: "t", Index: 0, CurrentLeaderEpoch: epoch,
		FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionEpoch: -1, MaxBytes: 1 << 20, MinOne: true})
	if res.View != nil {
		res.View.Release()
	}
	return res
}

// TestRackAwarePreferredReadReplica: the leader (broker 1, rack a) points a consumer in
// rack b at the most caught-up in-sync replica of rack b that holds its fetch offset, as
// Kafka's RackAwareReplicaSelector does, with no records in that answer; it keeps the
// consumer when the leader is in the consumer's rack, when no eligible replica is, when
// the consumer names no rack or sent no client metadata (Fetch before v11), and when no
// selector is configured. A replica out of the ISR, fenced, or whose log does not hold
// the offset is never chosen.
func TestRackAwarePreferredReadReplica(t *testing.T) {
	clock := &stepClock{now: time.Unix(1000, 0)}
	state := metadata.Partition{Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3, 4}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9}
	st := &applyStore{im: rackImage(10, state)}
	m := rackManager(t, 1, RackAwareReplicaSelector{}, clock, st)
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 10, 4)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	follow := func(id int32, offset int64) {
		t.Helper()
		res := m.Fetch(Reader{ReplicaID: id, BrokerEpoch: 7}, FetchPartition{Topic: "t", Index: 0, CurrentLeaderEpoch: 4,
			FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: 0, PartitionEpoch: 9, MaxBytes: 1 << 20})
		if res.View != nil {
			res.View.Release()
		}
		if res.Err != nil {
			t.Fatalf("follower %d fetch: %v", id, res.Err)
		}
	}
	follow(2, 6)
	follow(3, 10)
	follow(4, 10)
	rackB := &ClientMetadata{RackID: "b"}
	want := func(what string, client *ClientMetadata, offset int64, replica int32) {
		t.Helper()
		res := consumerFetch(m, client, offset, 4)
		if res.Err != nil {
			t.Fatalf("%s: %v", what, res.Err)
		}
		if res.PreferredReadReplica != replica {
			t.Fatalf("%s: preferred read replica %d, want %d", what, res.PreferredReadReplica, replica)
		}
		if replica >= 0 && (res.View != nil || res.HighWatermark < 0 || res.Waiter != nil) {
			t.Fatalf("%s: a redirect carries records %v, high watermark %d, waiter %v; want none, the leader's, none", what, res.View, res.HighWatermark, res.Waiter)
		}
	}
	want("rack b", rackB, 0, 3) // 3 has the higher log end offset
	want("rack c", &ClientMetadata{RackID: "c"}, 0, 4)
	want("rack a, the leader's", &ClientMetadata{RackID: "a"}, 0, -1)
	want("no such rack", &ClientMetadata{RackID: "z"}, 0, -1)
	want("no rack", &ClientMetadata{}, 0, -1)
	want("no client metadata", nil, 0, -1)

	// Equal log ends: the one caught up most recently, then the higher id.
	follow(2, 10)
	clock.add(time.Second)
	follow(2, 10)
	want("rack b, tie on log end", rackB, 0, 2)
	follow(3, 10)
	want("rack b, tie on log end and catch-up time", rackB, 0, 3)

	// A replica whose log does not hold the fetch offset is not eligible.
	follow(2, 6)
	want("offset 8, only 3 holds it", rackB, 8, 3)
	follow(3, 7)
	want("offset 8, no rack-b replica holds it", rackB, 8, -1)
	follow(3, 10)

	// Out of the ISR, or fenced: no longer chosen.
	state.ISR, state.PartitionEpoch = []int32{1, 2, 4}, 10
	m.apply(rackImage(11, state), false)
	follow(2, 10)
	want("3 out of the ISR", rackB, 0, 2)
	m.apply(rackImage(12, state, 2), false)
	want("2 fenced, 3 out of the ISR", rackB, 0, -1)
	if res := consumerFetch(m, rackB, 0, 4); res.Err != nil || res.PreferredReadReplica >= 0 {
		t.Fatalf("leader reading for a consumer it keeps: %v, preferred %d", res.Err, res.PreferredReadReplica)
	}

	// Without replica.selector.class, Kafka's default, consumers stay on the leader.
	m2 := rackManager(t, 1, nil, clock, &applyStore{im: rackImage(10, metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})})
	if res := consumerFetch(m2, rackB, 0, 4); res.Err != nil || res.PreferredReadReplica >= 0 {
		t.Fatalf("no selector: %v, preferred %d", res.Err, res.PreferredReadReplica)
	}
}

// TestFollowerServesConsumers: a follower (broker 1 of leader 2) serves a consumer that
// sent its client metadata (Fetch v11+) up to its own high watermark, never beyond; an
// offset between its high watermark and log end answers empty, one past its log end or
// below its log start OFFSET_OUT_OF_RANGE, a stale or future leader epoch
// FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, as Kafka's follower does. A consumer
// without client metadata, a replica's fetch, and any fetch while the controller has
// fenced this broker are refused with NOT_LEADER_OR_FOLLOWER.
func TestFollowerServesConsumers(t *testing.T) {
	state := metadata.Partition{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 9}
	st := &handStore{im: rackImage(10, state), lease: true, epoch: 7}
	m := rackManager(t, 1, RackAwareReplicaSelector{}, nil, st)
	m.apply(st.im, false)
	p := m.Replica("t", 0)
	if p == nil || p.Role() != partition.RoleFollower {
		t.Fatalf("replica: %v", p)
	}
	for _, base := range []int64{0, 5} {
		if _, err := p.AppendAsFollower(recordBatch(t, base, 5, 4), 4); err != nil {
			t.Fatal(err)
		}
	}
	p.SetFollowerHighWatermark(5)
	client := &ClientMetadata{RackID: "a"}

	read := func(offset int64, epoch int32) (FetchResult, int64) {
		t.Helper()
		res := m.Fetch(Reader{ReplicaID: -1, Client: client}, FetchPartition{Topic: "t", Index: 0, CurrentLeaderEpoch: epoch,
			FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionEpoch: -1, MaxBytes: 1 << 20, MinOne: true})
		next := int64(-1)
		if res.View != nil {
			next = res.View.NextOffset
			if res.View.Size == 0 {
				next = offset
			}
			res.View.Release()
			res.View = nil
		}
		return res, next
	}
	if res, next := read(0, 4); res.Err != nil || next != 5 || res.HighWatermark != 5 || res.PreferredReadReplica >= 0 {
		t.Fatalf("read from 0: %v, next offset %d, high watermark %d, preferred %d; want records up to 5", res.Err, next, res.HighWatermark, res.PreferredReadReplica)
	}
	for _, off := range []int64{5, 7, 10} {
		if res, next := read(off, -1); res.Err != nil || next != off {
			t.Fatalf("read from %d (high watermark 5, log end 10): %v, next offset %d; want empty", off, res.Err, next)
		}
	}
	if res, _ := read(11, -1); !errors.Is(res.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("read past the log end: %v, want OFFSET_OUT_OF_RANGE", res.Err)
	}
	if res, _ := read(0, 3); !errors.Is(res.Err, kerr.FencedLeaderEpoch) {
		t.Fatalf("read at an older epoch: %v, want FENCED_LEADER_EPOCH", res.Err)
	}
	if res, _ := read(0, 5); !errors.Is(res.Err, kerr.UnknownLeaderEpoch) {
		t.Fatalf("read at a newer epoch: %v, want UNKNOWN_LEADER_EPOCH", res.Err)
	}

	// The high watermark the leader sends moves what the follower serves.
	p.SetFollowerHighWatermark(10)
	if res, next := read(5, 4); res.Err != nil || next != 10 {
		t.Fatalf("read from 5 after the high watermark moved to 10: %v, next offset %d", res.Err, next)
	}

	// Below the log start, once the leader's DeleteRecords reached the follower.
	if err := p.FollowLogStart(5); err != nil {
		t.Fatal(err)
	}
	if res, _ := read(0, 4); !errors.Is(res.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("read below the log start: %v, want OFFSET_OUT_OF_RANGE", res.Err)
	}

	if res := consumerFetch(m, nil, 5, 4); !errors.Is(res.Err, kerr.NotLeaderForPartition) {
		t.Fatalf("consumer fetch without client metadata: %v, want NOT_LEADER_OR_FOLLOWER", res.Err)
	}
	res := m.Fetch(Reader{ReplicaID: 3, BrokerEpoch: 7}, FetchPartition{Topic: "t", Index: 0, CurrentLeaderEpoch: 4, FetchOffset: 5,
		LastFetchedEpoch: -1, LogStartOffset: -1, PartitionEpoch: -1, MaxBytes: 1 << 20})
	if res.View != nil {
		res.View.Release()
	}
	if !errors.Is(res.Err, kerr.NotLeaderForPartition) {
		t.Fatalf("a replica's fetch from a follower: %v, want NOT_LEADER_OR_FOLLOWER", res.Err)
	}
	st.mu.Lock()
	st.fenced = true
	st.mu.Unlock()
	if res, _ := read(5, 4); !errors.Is(res.Err, kerr.NotLeaderForPartition) {
		t.Fatalf("read while fenced: %v, want NOT_LEADER_OR_FOLLOWER", res.Err)
	}
}

// TestFollowerReadCommittedStopsAtItsLSO: a read_committed consumer is served by a
// follower up to the last stable offset as that follower knows it: an open transaction
// it replicated holds it, its marker releases it.
func TestFollowerReadCommittedStopsAtItsLSO(t *testing.T) {
	state := metadata.Partition{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 9}
	st := &handStore{im: rackImage(10, state), lease: true, epoch: 7}
	m := rackManager(t, 1, nil, nil, st)
	m.apply(st.im, false)
	p := m.Replica("t", 0)
	if _, err := p.AppendAsFollower(recordBatch(t, 0, 3, 4), 4); err != nil {
		t.Fatal(err)
	}
	txn, err := records.Build(shalelog.Header{BaseOffset: 3, PartitionLeaderEpoch: 4, Magic: 2, ProducerID: 42, ProducerEpoch: 0,
		BaseSequence: 0, Attributes: shalelog.AttrTransactional}, shalelog.CodecNone, []records.Record{{Value: []byte("in a transaction")}, {OffsetDelta: 1, Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsFollower(txn, 4); err != nil {
		t.Fatal(err)
	}
	p.SetFollowerHighWatermark(5)
	read := func() (lso, next int64) {
		t.Helper()
		res := m.Fetch(Reader{ReplicaID: -1, Client: &ClientMetadata{}}, FetchPartition{Topic: "t", Index: 0, CurrentLeaderEpoch: 4,
			FetchOffset: 0, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionEpoch: -1, MaxBytes: 1 << 20, MinOne: true, ReadCommitted: true})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		next = -1
		if res.View != nil {
			next = res.View.NextOffset
			res.View.Release()
		}
		return res.LastStableOffset, next
	}
	if lso, next := read(); lso != 3 || next != 3 {
		t.Fatalf("open transaction at 3: last stable offset %d, read up to %d; want 3, 3", lso, next)
	}
	marker, err := records.BuildMarker(42, 0, records.Marker{Commit: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	shalelog.SetBaseOffset(marker, 5)
	shalelog.SetPartitionLeaderEpoch(marker, 4)
	if _, err := p.AppendAsFollower(marker, 4); err != nil {
		t.Fatal(err)
	}
	p.SetFollowerHighWatermark(6)
	if lso, next := read(); lso != 6 || next != 6 {
		t.Fatalf("transaction committed: last stable offset %d, read up to %d; want 6, 6", lso, next)
	}
}

// TestParseReplicaSelector: replica.selector.class as the server hands it over.
func TestParseReplicaSelector(t *testing.T) {
	for name, want := range map[string]ReplicaSelector{
		"":                            nil,
		RackAwareReplicaSelectorClass: RackAwareReplicaSelector{},
		"RackAwareReplicaSelector":    RackAwareReplicaSelector{},
		LeaderReplicaSelectorClass:    LeaderReplicaSelector{},
	} {
		got, err := ParseReplicaSelector(name)
		if err != nil || got != want {
			t.Errorf("%q: %T, %v; want %T", name, got, err, want)
		}
	}
	if _, err := ParseReplicaSelector("com.example.Selector"); err == nil {
		t.Error("unknown selector accepted")
	}
}
