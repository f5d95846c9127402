package partition

import (
	"slices"
	"testing"
	"time"
)

// An ISR change stays the one in flight until newer state arrives, even once the
// controller refuses a send of it (ISRChangeRefused: an earlier send may yet apply):
// meanwhile no other change replaces it, and the high watermark respects the ISR it
// adds, so that the leader can send it, or its fence, again as it is.
func TestPendingISRChangeIsNotReplaced(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	start := time.Now()
	p.ApplyState(leaderState(1, 1, 1, 2), start)
	appendLeader(t, p, 2, 1)
	p.FollowerFetched(2, 2, -1, -1, start)
	if _, expand, _ := p.FollowerFetched(3, 2, -1, -1, start); !expand {
		t.Fatal("follower 3 caught up and no expansion is suggested")
	}
	c, ok := p.ProposeExpand(3, start)
	if !ok || !slices.Equal(c.NewISR, []int32{1, 2, 3}) || !p.ISRChangePending(c) {
		t.Fatalf("expand: %+v %v", c, ok)
	}
	// Follower 2 stops fetching: no shrink may replace the expansion, however long it
	// stays pending, and the high watermark waits for follower 3.
	later := start.Add(time.Hour)
	if s, ok := p.ProposeShrink(later, 10*time.Second); ok {
		t.Fatalf("a shrink %v replaced the pending expansion", s.NewISR)
	}
	if _, ok := p.ProposeExpand(3, later); ok {
		t.Fatal("a second expansion while one is pending")
	}
	appendLeader(t, p, 1, 1)
	p.FollowerFetched(2, 3, -1, -1, later)
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d passed follower 3 while its expansion is pending", hw)
	}
	if !p.ISRChangePending(c) {
		t.Fatal("the expansion is no longer pending")
	}
	// Another change's refusal (an older one, answered late) neither drops it nor gets
	// a fence.
	other := c
	other.PartitionEpoch = 0
	if _, ok := p.ISRChangeRefused(other, time.Now()); ok || !p.ISRChangePending(c) {
		t.Fatal("a stale change's refusal acted on the pending one")
	}

	// Newer state ends it: its outcome is then known.
	p.ApplyState(leaderState(1, 2, 1, 2, 3), later)
	if p.ISRChangePending(c) {
		t.Fatal("the expansion is still pending after the committed state arrived")
	}

	// A refusal keeps it pending until its fence commits; so does stepping down.
	c, ok = p.ProposeShrink(later.Add(time.Hour), 10*time.Second)
	if !ok {
		t.Fatal("no shrink proposed")
	}
	if _, ok := p.ISRChangeRefused(c, time.Now()); !ok || !p.ISRChangePending(c) {
		t.Fatal("a refused change is no longer pending before its fence committed")
	}
	p.ApplyState(leaderState(1, 3, 1, 2, 3), later.Add(time.Hour))
	if p.ISRChangePending(c) {
		t.Fatal("the refused change is still pending after its fence committed")
	}
	if c, ok = p.ProposeShrink(later.Add(2*time.Hour), 10*time.Second); !ok {
		t.Fatal("no shrink proposed after the fenced one")
	}
	p.ApplyState(State{Role: RoleFollower, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, later)
	if p.ISRChangePending(c) {
		t.Fatal("a change is pending on a replica that no longer leads")
	}
}
