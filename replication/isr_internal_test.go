package replication

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// alterStore is a controller that compares and sets the partition's state as the FSM
// does, and whose answer to a change it commits can be lost: commitErr is returned
// instead of the new state, as when the call times out after the quorum committed it.
// refuseErr, when set, refuses every change that adds broker 3 without committing it.
type alterStore struct {
	applyStore
	mu        sync.Mutex
	committed metadata.Partition
	commitErr error
	refuseErr error
	calls     []metadata.AlterPartitionRequest
	called    chan struct{}
}

func (s *alterStore) AlterPartition(ctx context.Context, r metadata.AlterPartitionRequest) (metadata.Partition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, r)
	defer func() {
		select {
		case s.called <- struct{}{}:
		default:
		}
	}()
	switch {
	case s.refuseErr != nil && slices.Contains(r.NewISR, 3):
		return metadata.Partition{}, s.refuseErr
	case r.LeaderEpoch != s.committed.LeaderEpoch:
		return metadata.Partition{}, fmt.Errorf("%w: leader epoch is %d", kerr.FencedLeaderEpoch, s.committed.LeaderEpoch)
	case r.PartitionEpoch != s.committed.PartitionEpoch:
		return metadata.Partition{}, fmt.Errorf("%w: partition epoch is %d", kerr.InvalidUpdateVersion, s.committed.PartitionEpoch)
	}
	s.committed.ISR = slices.Clone(r.NewISR)
	s.committed.PartitionEpoch++
	if s.commitErr != nil {
		return metadata.Partition{}, s.commitErr
	}
	return s.committed, nil
}

func (s *alterStore) state() metadata.Partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

func (s *alterStore) requests() []metadata.AlterPartitionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// isrFixture: broker 1 leads t-0 with replicas 1, 2, 3 and ISR {1, 2}, holding 10
// records that follower 2 has fetched; follower 3 then catches up to 10, which makes the
// leader propose adding it.
func isrFixture(t *testing.T, st *alterStore) *Manager {
	t.Helper()
	st.committed = metadata.Partition{Topic: "t", Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1}
	st.im = topicImage(10, oldTopicID, st.committed)
	st.called = make(chan struct{}, 16)
	m := testManager(t, t.TempDir(), st)
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 10, 0)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	followerFetch(t, m, 2, 10)
	if hw := m.Replica("t", 0).HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d, want 10", hw)
	}
	followerFetch(t, m, 3, 10)
	select {
	case <-st.called:
	case <-time.After(5 * time.Second):
		t.Fatal("follower 3 caught up and no AlterPartition adding it was sent")
	}
	if r := st.requests()[0]; !slices.Equal(r.NewISR, []int32{1, 2, 3}) || r.LeaderEpoch != 1 || r.PartitionEpoch != 1 {
		t.Fatalf("expansion sent as %+v", r)
	}
	// More records, which only follower 2 fetches.
	parts = []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 5, 0)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	return m
}

// followerFetch fetches as follower id whose replica has applied the leader's partition
// state.
func followerFetch(t *testing.T, m *Manager, id int32, offset int64) {
	t.Helper()
	p, err := m.Leader("t", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	followerFetchAt(t, m, id, offset, p.PartitionEpoch())
}

// followerFetchAt fetches as follower id whose replica has applied the partition state
// of partitionEpoch.
func followerFetchAt(t *testing.T, m *Manager, id int32, offset int64, partitionEpoch int32) {
	t.Helper()
	res := m.Fetch(Reader{ReplicaID: id, BrokerEpoch: 7}, FetchPartition{Topic: "t", FetchOffset: offset, CurrentLeaderEpoch: -1,
		LastFetchedEpoch: -1, MaxBytes: 1 << 20, PartitionEpoch: partitionEpoch})
	if res.View != nil {
		res.View.Release()
	}
	if res.Err != nil {
		t.Fatalf("fetch of follower %d at %d: %v", id, offset, res.Err)
	}
}

// An ISR expansion the controller committed but whose answer was lost (a timeout, then
// a retry that finds the partition epoch moved: INVALID_UPDATE_VERSION) may be in the
// ISR a new leader is elected from, so until newer state says otherwise the high
// watermark must wait for the follower being added: otherwise records acknowledged to
// acks=all producers exist on the leader and follower 2 only, and electing follower 3
// (in the committed ISR) loses them. The change is sent again, unchanged, until its
// outcome is known.
func TestLostISRExpansionKeepsTheMaximalISR(t *testing.T) {
	for _, lost := range []error{
		// The call timed out after the quorum committed the change.
		fmt.Errorf("alter partition: %w", context.DeadlineExceeded),
		// The quorum client resent the call to a new controller by itself, which found
		// the change committed.
		fmt.Errorf("%w: partition epoch is 2", kerr.InvalidUpdateVersion),
	} {
		t.Run(lost.Error(), func(t *testing.T) { testLostISRExpansion(t, lost) })
	}
}

func testLostISRExpansion(t *testing.T, lost error) {
	st := &alterStore{commitErr: lost}
	m := isrFixture(t, st)
	p := m.Replica("t", 0)

	// Follower 2 keeps fetching at the log end; follower 3 stays at 10. Wait for two
	// resends of the change (the first answered INVALID_UPDATE_VERSION, as the
	// controller does once the change is committed), all the while checking the high
	// watermark.
	deadline := time.Now().Add(10 * time.Second)
	for len(st.requests()) < 3 {
		followerFetch(t, m, 2, p.LogEndOffset())
		if hw := p.HighWatermark(); hw > 10 {
			c := st.state()
			t.Fatalf("high watermark %d passed follower 3's log end offset 10 while the ISR holding it is committed (ISR %v, partition epoch %d)",
				hw, c.ISR, c.PartitionEpoch)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost change was not sent again: %d AlterPartition calls", len(st.requests()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	calls := st.requests()
	for _, r := range calls[1:] {
		if !slices.Equal(r.NewISR, []int32{1, 2, 3}) || r.LeaderEpoch != 1 || r.PartitionEpoch != 1 {
			t.Fatalf("resent as %+v, not as the change first sent", r)
		}
	}
	if gap := len(calls); gap > 5 {
		t.Fatalf("%d AlterPartition calls: resends must back off", gap)
	}

	// The committed state arrives: no more resends, and the high watermark follows the
	// committed ISR {1, 2, 3}.
	m.apply(topicImage(11, oldTopicID, st.state()), false)
	if got := p.State(); got.PartitionEpoch != 2 || !slices.Equal(got.ISR, []int32{1, 2, 3}) {
		t.Fatalf("state after the committed image: %+v", got)
	}
	followerFetch(t, m, 2, p.LogEndOffset())
	if hw := p.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d, want 10 (follower 3's log end offset)", hw)
	}
	followerFetch(t, m, 3, p.LogEndOffset())
	if hw := p.HighWatermark(); hw != 15 {
		t.Fatalf("high watermark %d once every ISR member fetched to 15", hw)
	}
	// (A resend checked just before the image may still be in flight; none is due.)
	if resent := m.retryISRChanges(time.Now().Add(time.Hour)); resent != 0 {
		t.Fatalf("the change was sent again %d times after it was seen committed", resent)
	}
}

// A change the controller refuses (INELIGIBLE_REPLICA: the epochs are current, the
// follower may not join) proves only that this send was not applied; an earlier send,
// delayed, could still be. So the leader keeps the larger ISR and sends the fence (the
// committed ISR at the same epochs), whose commit refuses every earlier send; once the
// newer state arrives, the high watermark follows the committed ISR again and the
// refused change is never resent.
func TestRefusedISRExpansionIsFenced(t *testing.T) {
	for _, refuse := range []error{kerr.IneligibleReplica, kerr.OperationNotAttempted} {
		t.Run(refuse.(*kerr.Error).Message, func(t *testing.T) {
			st := &alterStore{refuseErr: fmt.Errorf("%w: broker 3 is shutting down", refuse)}
			m := isrFixture(t, st)
			p := m.Replica("t", 0)
			followerFetch(t, m, 2, p.LogEndOffset())
			if hw := p.HighWatermark(); hw != 10 {
				t.Fatalf("high watermark %d passed follower 3 before its refused expansion was fenced", hw)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(st.requests()) < 2 {
				if time.Now().After(deadline) {
					t.Fatal("no fence sent after the refusal")
				}
				m.retryISRChanges(time.Now().Add(time.Hour))
				time.Sleep(5 * time.Millisecond)
			}
			if r := st.requests()[1]; !slices.Equal(r.NewISR, []int32{1, 2}) || r.LeaderEpoch != 1 || r.PartitionEpoch != 1 {
				t.Fatalf("fence sent as %+v, want the committed ISR {1, 2} at epochs 1/1", r)
			}
			committed := st.state()
			if committed.PartitionEpoch != 2 {
				t.Fatalf("fence left the partition epoch at %d", committed.PartitionEpoch)
			}
			// The fence's state arrives: the refused expansion's outcome is known.
			next := topicImage(11, oldTopicID, committed)
			st.im = next
			m.apply(next, false)
			followerFetch(t, m, 2, p.LogEndOffset())
			if hw := p.HighWatermark(); hw != 15 {
				t.Fatalf("high watermark %d after the fence committed, want 15 (the committed ISR {1, 2} has it)", hw)
			}
			if resent := m.retryISRChanges(time.Now().Add(time.Hour)); resent != 0 || len(st.requests()) != 2 {
				t.Fatalf("a refused change was sent again (%d calls)", len(st.requests()))
			}
		})
	}
}

// TestStaleFetchDoesNotExpandISR: a fetch that follower 3 sent before it was removed
// from the replica set (its replica then deleted) and added back arrives late, carrying
// the old replica's log end. The leader must not add follower 3 to the ISR on it: the
// new replica holds nothing yet, and an ISR that counts it would commit records it does
// not have (simulation seed 7927). The old replica only knew partition states from
// before its removal, older than the leader's.
func TestStaleFetchDoesNotExpandISR(t *testing.T) {
	st := &alterStore{}
	st.committed = metadata.Partition{Topic: "t", Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 6}
	st.im = topicImage(10, oldTopicID, st.committed)
	st.called = make(chan struct{}, 16)
	m := testManager(t, t.TempDir(), st)
	parts := []*ProducePartition{{Topic: "t", Index: 0, Records: recordBatch(t, 0, 10, 0)}}
	m.Append(context.Background(), 1, parts)
	if parts[0].Err != nil {
		t.Fatal(parts[0].Err)
	}
	followerFetch(t, m, 2, 10)
	if hw := m.Replica("t", 0).HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d, want 10", hw)
	}

	followerFetchAt(t, m, 3, 10, 4) // sent by the replica removed at partition epoch 5
	select {
	case <-st.called:
		t.Fatalf("a fetch from a replica of partition epoch 4 added follower 3: %+v", st.requests())
	case <-time.After(200 * time.Millisecond):
	}
	followerFetchAt(t, m, 3, 0, 6) // the new replica, empty
	followerFetchAt(t, m, 3, 10, 4)
	select {
	case <-st.called:
		t.Fatalf("a fetch from a replica of partition epoch 4 added follower 3: %+v", st.requests())
	case <-time.After(200 * time.Millisecond):
	}
	followerFetchAt(t, m, 3, 10, 6) // the new replica, caught up
	select {
	case <-st.called:
	case <-time.After(5 * time.Second):
		t.Fatal("follower 3 caught up with the leader's partition state applied and no AlterPartition adding it was sent")
	}
	if r := st.requests()[0]; !slices.Equal(r.NewISR, []int32{1, 2, 3}) || r.PartitionEpoch != 6 {
		t.Fatalf("expansion sent as %+v", r)
	}
}
