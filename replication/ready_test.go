package replication

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
)

// handStore is a metadata.Store whose images, lease and registration the test sets by
// hand; the Manager uses nothing else of it here.
type handStore struct {
	metadata.Store
	mu     sync.Mutex
	im     *metadata.Image
	lease  bool
	fenced bool
	epoch  int64
}

func (s *handStore) Current() *metadata.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.im
}

func (s *handStore) Watch(ctx context.Context) <-chan *metadata.Image {
	ch := make(chan *metadata.Image)
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

func (s *handStore) LeaseValid() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

func (s *handStore) Fenced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced
}

func (s *handStore) BrokerEpoch() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// TestInSync: broker 3 follows t-0 (leader 1) and t-1 (no leader) and leads t-2. It is
// ready only once registered under its current epoch and back in t-0's ISR.
func TestInSync(t *testing.T) {
	// The leader's address refuses connections, so the follower fetcher only backs off.
	// Claimed and never bound: a port the kernel handed out and took back could be bound
	// again by another test, and the fetcher would reach it.
	port := testutil.FreePort(t)

	image := func(offset uint64, selfEpoch int64, fenced bool, isr0 []int32) *metadata.Image {
		brokers := map[int32]metadata.Broker{
			1: {ID: 1, Host: "127.0.0.1", Port: int32(port), Epoch: 10},
			2: {ID: 2, Host: "127.0.0.1", Port: int32(port), Epoch: 11},
			3: {ID: 3, Host: "127.0.0.1", Port: int32(port), Epoch: selfEpoch, Fenced: fenced},
		}
		return &metadata.Image{Offset: offset, ControllerID: 1, Brokers: brokers, Topics: map[string]*metadata.Topic{
			"t": {Name: "t", ID: [16]byte{1}, Partitions: []metadata.Partition{
				{Topic: "t", Index: 0, Replicas: []int32{1, 2, 3}, ISR: isr0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1},
				{Topic: "t", Index: 1, Replicas: []int32{2, 3}, ISR: []int32{2}, Leader: -1, LeaderEpoch: 2, PartitionEpoch: 2},
				{Topic: "t", Index: 2, Replicas: []int32{3, 1}, ISR: []int32{3}, Leader: 3, LeaderEpoch: 1, PartitionEpoch: 1},
			}},
			"other": {Name: "other", ID: [16]byte{2}, Partitions: []metadata.Partition{
				{Topic: "other", Index: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1},
			}},
		}}
	}
	store := &handStore{im: image(1, 5, false, []int32{1, 2, 3}), epoch: -1}
	m, err := NewManager(Config{NodeID: 3, LogDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})

	check := func(wantOK bool, wantReason string) {
		t.Helper()
		ok, reason := m.InSync()
		if ok != wantOK || !strings.Contains(reason, wantReason) {
			t.Fatalf("InSync() = %v, %q; want %v, %q", ok, reason, wantOK, wantReason)
		}
	}
	// Restarted: not registered yet, though the image it loaded shows it in the ISR.
	check(false, "not registered")

	// Registered as epoch 7, but the applied image is from its previous life (epoch 5).
	store.mu.Lock()
	store.lease, store.epoch = true, 7
	store.mu.Unlock()
	check(false, "registration")

	// The registration is applied: unfenced, and the controller took it out of t-0's ISR.
	m.apply(image(2, 7, false, []int32{1, 2}), false)
	check(false, "not in the ISR of 1 partitions (t-0)")

	// Fenced again (lease lapsed in the image before its own clock noticed).
	m.apply(image(3, 7, true, []int32{1, 2}), false)
	check(false, "registration")

	// Caught up and added back: ready. t-1 has no leader and t-2 is led here; neither
	// holds the probe down, nor does a topic it has no replica of.
	m.apply(image(4, 7, false, []int32{1, 2, 3}), false)
	check(true, "")

	// The lease lapses by its own clock.
	store.mu.Lock()
	store.lease = false
	store.mu.Unlock()
	check(false, "not registered")
}
