package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReplicationDoneAcrossLeadershipLoss: an acks=all produce appended as leader of
// epoch 1 must never be answered as replicated once the replica has lost that
// leadership, even if, while ReplicationDone runs, the replica follows a new leader,
// truncates the batch away and takes a follower high watermark past its offsets for
// different records.
func TestReplicationDoneAcrossLeadershipLoss(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	res := appendLeader(t, p, 3, -1) // offsets 0..2, never fetched by follower 2
	p.beforeHWLoad = func() {
		p.beforeHWLoad = nil
		follower := State{Role: RoleFollower, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
		if _, err := p.ApplyState(follower, now); err != nil {
			t.Error(err)
		}
		if err := p.TruncateTo(0); err != nil {
			t.Error(err)
		}
		if _, err := p.AppendAsFollower(batch(t, 0, 5, 2), 2); err != nil {
			t.Error(err)
		}
		p.SetFollowerHighWatermark(5)
	}
	done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch)
	if done || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("ReplicationDone(%d, epoch %d) after the batch was truncated under a new leader = %v, %v; want false, NOT_LEADER_OR_FOLLOWER",
			res.LastOffset, res.LeaderEpoch, done, err)
	}
	if p.HighWatermark() != 5 || p.LogEndOffset() != 5 {
		t.Fatalf("interleaving not simulated: HW %d, LEO %d", p.HighWatermark(), p.LogEndOffset())
	}
}

// TestFollowerWritesRefusedWhileLeading: a fetch response from the previous leader that
// is handled after this replica became leader (the fetcher checks the role before the
// response is applied, not under the lock) must not move the high watermark or cut the
// log, or an acks=all batch would be answered as replicated that no follower has.
func TestFollowerWritesRefusedWhileLeading(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	res := appendLeader(t, p, 3, -1)
	p.SetFollowerHighWatermark(3)
	if done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch); done || err != nil {
		t.Fatalf("a stale follower high watermark completed an unreplicated batch: HW %d, %v %v", p.HighWatermark(), done, err)
	}
	if err := p.TruncateTo(0); !errors.Is(err, kerr.NotLeaderForPartition) || p.LogEndOffset() != 3 {
		t.Fatalf("truncation as leader: %v, LEO %d", err, p.LogEndOffset())
	}
	if err := p.RestartAt(10); !errors.Is(err, kerr.NotLeaderForPartition) || p.LogEndOffset() != 3 {
		t.Fatalf("restart as leader: %v, LEO %d", err, p.LogEndOffset())
	}
}
