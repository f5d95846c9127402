package partition

import (
	"slices"
	"testing"
	"time"
)

// An ISR change stays the one in flight until the controller proves it was not applied
// (ISRChangeFailed) or newer state arrives: meanwhile no other change replaces it, even
// after the back-off of a refused change, and the high watermark respects the ISR it
// adds, so that the leader can send it again as it is.
func TestPendingISRChangeIsNotReplaced(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	start := time.Now()
	p.ApplyState(leaderState(1, 1, 1, 2), start)
	appendLeader(t, p, 2, 1)
	p.FollowerFetched(2, 2, start)
	if _, expand, _ := p.FollowerFetched(3, 2, start); !expand {
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
	p.FollowerFetched(2, 3, later)
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d passed follower 3 while its expansion is pending", hw)
	}
	if !p.ISRChangePending(c) {
		t.Fatal("the expansion is no longer pending")
	}
	// Another change's failure (an older one, answered late) does not drop it.
	other := c
	other.PartitionEpoch = 0
	p.ISRChangeFailed(other, time.Now())
	if !p.ISRChangePending(c) {
		t.Fatal("a stale change's failure dropped the pending one")
	}

	// Newer state ends it: its outcome is then known.
	p.ApplyState(leaderState(1, 2, 1, 2, 3), later)
	if p.ISRChangePending(c) {
		t.Fatal("the expansion is still pending after the committed state arrived")
	}

	// A proven refusal drops it; so does stepping down.
	c, ok = p.ProposeShrink(later.Add(time.Hour), 10*time.Second)
	if !ok {
		t.Fatal("no shrink proposed")
	}
	p.ISRChangeFailed(c, time.Now())
	if p.ISRChangePending(c) {
		t.Fatal("a refused change is still pending")
	}
	if c, ok = p.ProposeShrink(later.Add(time.Hour), 10*time.Second); !ok {
		t.Fatal("no shrink proposed after the refused one")
	}
	p.ApplyState(State{Role: RoleFollower, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, later)
	if p.ISRChangePending(c) {
		t.Fatal("a change is pending on a replica that no longer leads")
	}
}
