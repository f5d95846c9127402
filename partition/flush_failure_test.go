package partition

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	shalelog "github.com/shalelog/shale/log"
)

// flushSettings fsyncs every append, on a disk whose fsyncs fail when faults says so.
func flushSettings(faults *shalelog.Faults) Settings {
	s := testSettings()
	s.MinInsyncReplicas = 1
	s.Log.FlushMessages = 1
	s.Log.Logger = quiet()
	s.Log.Faults = faults
	return s
}

// copiesOf counts the batches of producer 42 with base sequence seq in the log.
func copiesOf(t *testing.T, p *Partition, seq int32) int {
	t.Helper()
	n := 0
	if err := p.ScanHeaders(p.LogStartOffset(), func(h shalelog.Header) bool {
		if h.ProducerID == 42 && h.BaseSequence == seq {
			n++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func soleLeader(epoch int32) State {
	return State{Role: RoleLeader, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1}, ISR: []int32{1}}
}

// TestFailedFlushRetryIsNotAppendedTwice: under flush.messages=1 a batch whose group
// commit fails is answered KAFKA_STORAGE_ERROR (its acks=all wait), yet the batch is in
// the log. The producer then
// resends the same batch (same producer id, epoch and sequence). That retry must not
// become a second copy: the replica goes offline, as Kafka takes the log directory
// offline, and after a restart the producer state rebuilt from the log knows the batch.
func TestFailedFlushRetryIsNotAppendedTwice(t *testing.T) {
	dir := t.TempDir()
	faults := &shalelog.Faults{}
	p, err := open("t", testID, 0, 1, dir, -1, flushSettings(faults), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ApplyState(soleLeader(1), time.Now()); err != nil {
		t.Fatal(err)
	}
	b, h := idempotentBatch(t, 0, 4)
	if _, err := p.AppendAsLeader(b, h, -1); err != nil {
		t.Fatal(err)
	}

	sent, h := idempotentBatch(t, 4, 4) // what the producer holds and resends
	testutil.Eventually(t, 10*time.Second, "the first batch's group commit", func() bool { return p.HighWatermark() == 4 })
	faults.FailSyncs(syscall.EIO)
	res, err := p.AppendAsLeader(bytes.Clone(sent), h, -1)
	if err != nil {
		t.Fatalf("append with a failing fsync: %v; the fsync is the group commit's, after the append", err)
	}
	testutil.Eventually(t, 10*time.Second, "the failed group commit takes the replica offline", p.Offline)
	done, err := p.ReplicationDone(res.LastOffset, res.LeaderEpoch)
	if done || !errors.Is(err, shalelog.ErrStorage) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("acks=all wait of the batch whose fsync failed: %v, %v; want a storage error", done, err)
	}
	if p.HighWatermark() != 4 {
		t.Fatalf("high watermark %d after a failed fsync, want 4", p.HighWatermark())
	}
	faults.FailSyncs(nil) // fsync works again, or says it does

	res, err = p.AppendAsLeader(bytes.Clone(sent), h, -1)
	if n := copiesOf(t, p, 4); n != 1 {
		t.Fatalf("the log holds %d copies of the batch after its retry (answer %+v, %v)", n, res, err)
	}
	if !errors.Is(err, shalelog.ErrStorage) || !p.Offline() {
		t.Fatalf("retry on the replica whose flush failed: %+v, %v; want it offline with a storage error", res, err)
	}
	if _, err := p.Read(0, 1<<20, true, true); !errors.Is(err, shalelog.ErrStorage) {
		t.Fatalf("read from an offline replica: %v", err)
	}
	if _, err := p.ReplicationDone(1<<40, 1); !errors.Is(err, shalelog.ErrStorage) {
		t.Fatalf("acks=all wait on an offline replica: %v", err)
	}
	end := p.LogEndOffset()
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	// The restart: recovery keeps what is on disk, and the producer state matches it.
	p, err = open("t", testID, 0, 1, dir, end, flushSettings(nil), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if _, err := p.ApplyState(soleLeader(2), time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err = p.AppendAsLeader(bytes.Clone(sent), h, -1)
	if err != nil || !res.Duplicate || res.BaseOffset != 4 {
		t.Fatalf("retry after the restart: %+v, %v; want a duplicate at offset 4", res, err)
	}
	if n := copiesOf(t, p, 4); n != 1 || p.LogEndOffset() != end {
		t.Fatalf("after the restart: %d copies, log end %d (was %d)", n, p.LogEndOffset(), end)
	}
	b, h = idempotentBatch(t, 8, 4)
	if res, err := p.AppendAsLeader(b, h, -1); err != nil || res.BaseOffset != 8 {
		t.Fatalf("next batch: %+v, %v", res, err)
	}
}

// TestFailedFlushOnFollowerRecordsTheBatch: a follower whose fsync fails has the
// leader's batch in its log, so its leader does not send it again. If the producer state
// missed it, this replica, once elected, would take the producer's retry as new.
func TestFailedFlushOnFollowerRecordsTheBatch(t *testing.T) {
	faults := &shalelog.Faults{}
	p, err := open("t", testID, 0, 1, t.TempDir(), -1, flushSettings(faults), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	follow := State{Role: RoleFollower, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if _, err := p.ApplyState(follow, time.Now()); err != nil {
		t.Fatal(err)
	}
	sent, h := idempotentBatch(t, 0, 4) // the leader assigned offset 0
	faults.FailSyncs(syscall.EIO)
	if _, err := p.AppendAsFollower(bytes.Clone(sent), 1); err != nil {
		t.Fatalf("follower append with a failing fsync: %v; the fsync is the group commit's, after the append", err)
	}
	testutil.Eventually(t, 10*time.Second, "the failed group commit takes the replica offline", p.Offline)
	if err := p.SyncErr(); !errors.Is(err, shalelog.ErrStorage) || p.FlushedOffset() != 0 {
		t.Fatalf("follower after a failed fsync: %v, flushed offset %d; want a storage error and 0", err, p.FlushedOffset())
	}
	faults.FailSyncs(nil)
	if p.LogEndOffset() != 4 {
		t.Fatalf("log end %d: the test needs the batch in the log", p.LogEndOffset())
	}

	// The leader dies and the controller, which knows nothing of the disk, elects this
	// replica; the producer resends the batch it never got an answer for.
	lead := State{Role: RoleLeader, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}
	if _, err := p.ApplyState(lead, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := p.AppendAsLeader(bytes.Clone(sent), h, 1)
	if n := copiesOf(t, p, 0); n != 1 {
		t.Fatalf("the log holds %d copies of the batch after its retry (answer %+v, %v)", n, res, err)
	}
	if err == nil && !res.Duplicate {
		t.Fatalf("retry answered %+v as a new batch", res)
	}
}
