package partition

import (
	"testing"
	"time"
)

// A replica removed while an acks=all produce waits for its ISR (a reassignment moved
// it away) wakes the waiter, which then finds it no longer leads.
func TestRemovedReplicaWakesWaiters(t *testing.T) {
	m, err := NewManager(ManagerConfig{Dir: t.TempDir(), NodeID: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := m.Open("t", [16]byte{1}, 0, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	res := appendLeader(t, p, 3, -1)
	w := p.Waiter()
	if done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch); done || err != nil {
		t.Fatalf("replicated before the follower fetched: %v %v", done, err)
	}
	if err := m.Remove("t", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w:
	default:
		t.Fatal("removing the replica left its waiter parked")
	}
	if _, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch); err == nil {
		t.Fatal("a removed replica still reports itself leader")
	}
}
