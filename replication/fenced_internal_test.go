package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// TestFencedBrokerDoesNotLead: a broker that leads a partition in the metadata it has
// applied, but that the controller answers is fenced, has had the partition moved
// elsewhere in metadata that has not reached it yet (it was cut off from the
// controllers, or its metadata stream lags). It must refuse produce, fetch and
// DeleteRecords as a leader, and a purge it started must not complete, until it is
// unfenced. The simulation found such a broker serving records that DeleteRecords on the
// new leader had purged (seed 1346 of tests/sim). A lapsed lease alone (no answer at
// all) does not stop it: with the quorum down, brokers serve on, as Kafka's do.
func TestFencedBrokerDoesNotLead(t *testing.T) {
	im := &metadata.Image{Offset: 5, ControllerID: 1, Brokers: map[int32]metadata.Broker{
		1: {ID: 1, Host: "127.0.0.1", Port: 1, Epoch: 3},
	}, Topics: map[string]*metadata.Topic{
		"t": {Name: "t", ID: [16]byte{7}, Partitions: []metadata.Partition{
			{Topic: "t", Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1},
		}},
	}}
	store := &handStore{im: im, lease: true, epoch: 3}
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	m.apply(im, false)

	produce := func() error {
		pp := &ProducePartition{Topic: "t", Index: 0, Records: recordBatch(t, 0, 3, 1)}
		m.Append(context.Background(), -1, []*ProducePartition{pp})
		return pp.Err
	}
	fetchFrom := int64(0)
	fetch := func() error {
		res := m.Fetch(Reader{ReplicaID: -1}, FetchPartition{Topic: "t", TopicID: [16]byte{7}, Index: 0,
			CurrentLeaderEpoch: -1, FetchOffset: fetchFrom, LastFetchedEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20, MinOne: true})
		if res.View != nil {
			res.View.Release()
		}
		return res.Err
	}
	set := func(lease, fenced bool) {
		store.mu.Lock()
		store.lease, store.fenced = lease, fenced
		store.mu.Unlock()
	}

	if err := produce(); err != nil {
		t.Fatalf("produce with the lease: %v", err)
	}
	if err := fetch(); err != nil {
		t.Fatalf("fetch with the lease: %v", err)
	}
	purge, err := m.StartDeleteRecords("t", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	fetchFrom = 2

	// No answer from the controllers for longer than the session: lead on.
	set(false, false)
	if err := fetch(); err != nil {
		t.Fatalf("fetch with the lease lapsed: %v", err)
	}

	set(false, true)
	isNotLeader := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("%s while fenced: %v, want NOT_LEADER_OR_FOLLOWER", what, err)
		}
	}
	isNotLeader("produce", produce())
	isNotLeader("fetch", fetch())
	_, err = m.StartDeleteRecords("t", 0, 3)
	isNotLeader("DeleteRecords", err)
	if low, done, err := purge.Poll(); done || err != nil {
		t.Fatalf("purge while fenced: low watermark %d, done %v, %v; want not done", low, done, err)
	}

	set(true, false)
	if low, done, err := purge.Poll(); !done || err != nil || low != 2 {
		t.Fatalf("purge once unfenced: low watermark %d, done %v, %v; want 2, done", low, done, err)
	}
	if err := fetch(); err != nil {
		t.Fatalf("fetch once unfenced: %v", err)
	}
}
