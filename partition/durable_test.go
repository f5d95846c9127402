package partition

import (
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	shalelog "github.com/shalelog/shale/log"
)

// heldBackground holds the log's deferred work (its group commits among it) until the
// test runs it.
type heldBackground struct {
	mu  sync.Mutex
	fns []func()
}

func (b *heldBackground) Go(fn func()) {
	b.mu.Lock()
	b.fns = append(b.fns, fn)
	b.mu.Unlock()
}

func (b *heldBackground) runAll() {
	for {
		b.mu.Lock()
		fns := b.fns
		b.fns = nil
		b.mu.Unlock()
		if len(fns) == 0 {
			return
		}
		for _, fn := range fns {
			fn()
		}
	}
}

func openDurable(t *testing.T, bg shalelog.Background, faults *shalelog.Faults) *Partition {
	t.Helper()
	s := testSettings()
	s.AcksAllFsync = true
	s.Log.Logger = quiet()
	s.Log.Background = bg
	s.Log.Faults = faults
	p, err := open("t", testID, 0, 1, t.TempDir(), -1, s, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

// TestDurableHighWatermarkWaitsForLeaderFsync: under acks.all.fsync the leader's own term
// in the high watermark is its flushed offset: every follower has the batch, yet the
// acks=all produce is not answered, and consumers do not see it, until the leader's
// group commit has run.
func TestDurableHighWatermarkWaitsForLeaderFsync(t *testing.T) {
	bg := &heldBackground{}
	p := openDurable(t, bg, nil)
	bg.runAll()
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2, 3), now); err != nil {
		t.Fatal(err)
	}
	res := appendLeader(t, p, 3, -1)
	p.FollowerFetched(2, 3, -1, -1, now)
	p.FollowerFetched(3, 3, -1, -1, now)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d with the leader's fsync pending, want 0", hw)
	}
	if done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch); done || err != nil {
		t.Fatalf("acks=all done before the leader's fsync: %v %v", done, err)
	}
	waiter := p.Waiter()
	bg.runAll()
	select {
	case <-waiter:
	default:
		t.Fatal("the group commit that moved the HW woke nobody")
	}
	if hw := p.HighWatermark(); hw != 3 || p.FlushedOffset() != 3 {
		t.Fatalf("HW %d, flushed %d after the leader's fsync; want 3 and 3", hw, p.FlushedOffset())
	}
	if done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch); !done || err != nil {
		t.Fatalf("acks=all not done once every ISR member has it on disk: %v %v", done, err)
	}
}

// TestDurableHighWatermarkIsLeastFlushedOverISR: a follower's term is its fetch offset,
// which such a follower sends only once it has fsynced below it: one behind holds the
// HW however far the leader has flushed, and a follower outside the ISR does not.
func TestDurableHighWatermarkIsLeastFlushedOverISR(t *testing.T) {
	bg := &heldBackground{}
	p := openDurable(t, bg, nil)
	bg.runAll()
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	appendLeader(t, p, 5, -1)
	bg.runAll()
	if p.FlushedOffset() != 5 {
		t.Fatalf("flushed %d, want 5", p.FlushedOffset())
	}
	p.FollowerFetched(3, 5, -1, -1, now) // not in the ISR
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before ISR member 2 reported, want 0", hw)
	}
	p.FollowerFetched(2, 2, -1, -1, now)
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("HW %d, want 2 (follower 2 flushed below 2)", hw)
	}
	// Turning acks.all.fsync off lifts the leader's bound at once.
	appendLeader(t, p, 1, -1)
	p.FollowerFetched(2, 6, -1, -1, now)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("HW %d with the leader flushed to 5, want 5", hw)
	}
	s := p.Settings()
	s.AcksAllFsync = false
	p.ApplySettings(s)
	if hw := p.HighWatermark(); hw != 6 {
		t.Fatalf("HW %d after acks.all.fsync=false, want 6", hw)
	}
}

// TestDurableFailedFsyncHoldsHWAndAnswersStorageError: a failed group commit never moves
// the high watermark, and the acks=all wait is answered KAFKA_STORAGE_ERROR at once.
func TestDurableFailedFsyncHoldsHWAndAnswersStorageError(t *testing.T) {
	faults := &shalelog.Faults{}
	bg := &heldBackground{}
	p := openDurable(t, bg, faults)
	bg.runAll()
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	res := appendLeader(t, p, 2, -1)
	p.FollowerFetched(2, 2, -1, -1, now)
	faults.FailSyncs(syscall.EIO)
	waiter := p.Waiter()
	bg.runAll()
	faults.FailSyncs(nil)
	select {
	case <-waiter:
	default:
		t.Fatal("the failed group commit woke nobody")
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d after a failed fsync, want 0", hw)
	}
	done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch)
	if done || !errors.Is(err, shalelog.ErrStorage) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("acks=all wait after a failed fsync: %v %v, want KAFKA_STORAGE_ERROR", done, err)
	}
	p.FollowerFetched(2, 2, -1, -1, now)
	bg.runAll()
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d after a later fsync that works, want 0: a failed fsync is final", hw)
	}
}

// TestDurableFollowerRequestsSyncAndWakes: a follower's append under acks.all.fsync
// requests its group commit, and FlushWaiter hears it; the leader's HW that the
// follower takes is not bounded by its own flush (the leader bounds it).
func TestDurableFollowerRequestsSyncAndWakes(t *testing.T) {
	p := openDurable(t, nil, nil) // the log's own group-commit goroutine
	follow := State{Role: RoleFollower, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if _, err := p.ApplyState(follow, time.Now()); err != nil {
		t.Fatal(err)
	}
	w := p.FlushWaiter()
	if _, err := p.AppendAsFollower(batch(t, 0, 4, 1), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up from the follower's group commit within 30s")
	}
	testutil.Eventually(t, 10*time.Second, "the follower's flushed offset reaches its log end", func() bool {
		return p.FlushedOffset() == p.LogEndOffset()
	})
	if !p.DurableAcks() || p.LogEndOffset() != 4 {
		t.Fatalf("durable %v, log end %d", p.DurableAcks(), p.LogEndOffset())
	}
}
