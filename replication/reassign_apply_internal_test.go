package replication

import (
	"io"
	"log/slog"
	"testing"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// applyStore is the little of a metadata.Store that applying images needs.
type applyStore struct {
	metadata.Store
	im *metadata.Image
}

func (s *applyStore) Current() *metadata.Image { return s.im }
func (s *applyStore) BrokerEpoch() int64       { return -1 }

// Fenced: these tests are about the applied images, not fencing (see
// TestFencedBrokerDoesNotLead).
func (s *applyStore) Fenced() bool { return false }

// The broker side of a reassignment: a replica the controller adds opens as a follower
// (never a leader, so the ISR grows only through the leader's AlterPartition once it has
// caught up); a replica the controller removes is removed; and an image older than the
// one applied, which still lists the replica, neither brings it back nor moves anything.
func TestReassignedReplicaOpensAsFollowerAndRemovalIsInOrder(t *testing.T) {
	image := func(offset uint64, p metadata.Partition) *metadata.Image {
		p.Topic, p.Index = "t", 0
		return &metadata.Image{Offset: offset,
			Brokers: map[int32]metadata.Broker{
				1: {ID: 1, Host: "127.0.0.1", Port: 1},
				2: {ID: 2, Host: "127.0.0.1", Port: 1},
				3: {ID: 3, Host: "127.0.0.1", Port: 1},
			},
			Topics: map[string]*metadata.Topic{"t": {Name: "t", ID: [16]byte{9}, Partitions: []metadata.Partition{p}, Configs: map[string]string{}}},
		}
	}
	before := image(10, metadata.Partition{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 5})
	st := &applyStore{im: before}
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.parts.Get("t", 0) != nil {
		t.Fatal("a replica opened before it was assigned here")
	}

	adding := image(11, metadata.Partition{Replicas: []int32{1, 3, 2}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 6,
		AddingReplicas: []int32{1}, RemovingReplicas: []int32{2}})
	m.apply(adding, false)
	p := m.parts.Get("t", 0)
	if p == nil || p.Role() != partition.RoleFollower || p.LeaderEpoch() != 3 {
		t.Fatalf("added replica: %v", p)
	}

	// Cancelled: the replica goes; the stale image that added it cannot bring it back.
	reverted := image(12, metadata.Partition{Replicas: []int32{3, 2}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 7})
	m.apply(reverted, false)
	if m.parts.Get("t", 0) != nil {
		t.Fatal("a replica no longer assigned here is still open")
	}
	m.apply(adding, false)
	if m.parts.Get("t", 0) != nil || m.Image().Offset != 12 {
		t.Fatalf("a stale image reopened the replica (applied offset %d)", m.Image().Offset)
	}
}
