package partition

import (
	"testing"
	"time"
)

// The counters beside the waiter: bytes reach the log end count at once, the committed
// count only as the high watermark passes them, and changes other than data move the
// generation.
func TestMarkCountsBytesAtEachBound(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	m := p.Mark()
	if pr := p.Since(m); pr.Changed || pr.Committed != 0 || pr.Appended != 0 || pr.HWMoved {
		t.Fatalf("nothing happened, got %+v", pr)
	}
	b1 := appendLeader(t, p, 3, -1)
	size1 := int64(len(batch(t, 0, 3, 0)))
	pr := p.Since(m)
	if pr.Appended != size1 || pr.Committed != 0 || pr.HWMoved || pr.Changed {
		t.Fatalf("after an append the follower has not fetched: %+v, want %d appended", pr, size1)
	}
	appendLeader(t, p, 2, -1)
	size2 := int64(len(batch(t, 0, 2, 0)))
	// The follower fetches the first batch: the high watermark passes it alone.
	if _, _, err := p.FollowerFetched(2, b1.LastOffset+1, -1, -1, now); err != nil {
		t.Fatal(err)
	}
	pr = p.Since(m)
	if pr.Appended != size1+size2 || pr.Committed != size1 || !pr.HWMoved || pr.Changed {
		t.Fatalf("after the first batch replicated: %+v", pr)
	}
	if _, _, err := p.FollowerFetched(2, p.LogEndOffset(), -1, -1, now); err != nil {
		t.Fatal(err)
	}
	if pr = p.Since(m); pr.Committed != size1+size2 {
		t.Fatalf("after both replicated: %+v", pr)
	}
	// A mark taken now sees nothing new until something happens.
	m = p.Mark()
	if m.HighWatermark() != p.HighWatermark() {
		t.Fatalf("mark's high watermark %d, partition's %d", m.HighWatermark(), p.HighWatermark())
	}
	if _, err := p.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	if pr = p.Since(m); !pr.Changed {
		t.Fatal("a log start move left the generation")
	}
	m = p.Mark()
	if _, err := p.ApplyState(leaderState(1, 2, 1), now); err != nil {
		t.Fatal(err)
	}
	if pr = p.Since(m); !pr.Changed {
		t.Fatal("an ISR change left the generation")
	}
	m = p.Mark()
	if _, err := p.ApplyState(State{Role: RoleFollower, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, now); err != nil {
		t.Fatal(err)
	}
	if pr = p.Since(m); !pr.Changed {
		t.Fatal("losing the leadership left the generation")
	}
	if m = p.Mark(); !p.Since(m).Changed {
		t.Fatal("a mark taken on a follower must not bound anything")
	}
}

// A new leader does not know the sizes of the batches it inherited above the high
// watermark: the high watermark passing them moves the generation instead.
func TestMarkInheritedTailMovesGeneration(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	follower := State{Role: RoleFollower, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}
	if _, err := p.ApplyState(follower, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsFollower(batch(t, 0, 4, 1), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ApplyState(leaderState(2, 2, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	m := p.Mark()
	if p.HighWatermark() != 0 {
		t.Fatalf("high watermark %d before the follower fetched", p.HighWatermark())
	}
	if _, _, err := p.FollowerFetched(2, p.LogEndOffset(), -1, -1, now); err != nil {
		t.Fatal(err)
	}
	if pr := p.Since(m); !pr.Changed || !pr.HWMoved {
		t.Fatalf("the inherited tail became visible: %+v, want Changed", pr)
	}
	// From there on the leader counts what it appends itself.
	m = p.Mark()
	appendLeader(t, p, 1, -1)
	if _, _, err := p.FollowerFetched(2, p.LogEndOffset(), -1, -1, now); err != nil {
		t.Fatal(err)
	}
	if pr := p.Since(m); pr.Changed || pr.Committed != int64(len(batch(t, 0, 1, 0))) {
		t.Fatalf("after the leader's own batch replicated: %+v", pr)
	}
}

// A high watermark held back for long (an ISR member that stopped fetching) does not
// make the leader keep every batch appended meanwhile: past maxPending it forgets them,
// and the high watermark passing them moves the generation instead of the count.
func TestMarkPendingIsBounded(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	m := p.Mark()
	for range maxPending + 10 {
		appendLeader(t, p, 1, -1)
	}
	p.mu.Lock()
	kept := len(p.pending) - p.pendingHead
	p.mu.Unlock()
	if kept > maxPending {
		t.Fatalf("%d batches kept above the high watermark, at most %d", kept, maxPending)
	}
	if _, _, err := p.FollowerFetched(2, p.LogEndOffset(), -1, -1, now); err != nil {
		t.Fatal(err)
	}
	if pr := p.Since(m); !pr.Changed {
		t.Fatalf("the forgotten batches became visible: %+v, want Changed", pr)
	}
}
