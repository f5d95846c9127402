package partition

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) ([]byte, shalelog.Header) {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{OffsetDelta: int32(i), Value: []byte("t")}
	}
	b, err := records.Build(shalelog.Header{Magic: 2, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		Attributes: shalelog.AttrTransactional}, shalelog.CodecNone, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := shalelog.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

func appendTxn(t *testing.T, p *Partition, pid int64, epoch int16, seq int32, n int) AppendResult {
	t.Helper()
	if token, needed := p.BeginTxnVerification(pid, epoch); needed {
		p.CompleteTxnVerification(pid, token)
	}
	b, h := txnBatch(t, pid, epoch, seq, n)
	res, err := p.AppendAsLeader(b, h, -1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func marker(t *testing.T, p *Partition, pid int64, epoch int16, commit bool, coord int32) int64 {
	t.Helper()
	res, err := p.AppendMarker(pid, epoch, records.Marker{Commit: commit, CoordinatorEpoch: coord})
	if err != nil {
		t.Fatal(err)
	}
	return res.Offset
}

// logBytes is the replica's whole log as a follower would fetch it.
func logBytes(t *testing.T, p *Partition) []byte {
	t.Helper()
	v, err := p.Read(0, 1<<20, true, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	return slices.Concat(v.Chunks...)
}

// txnLeader builds a leader log with an aborted transaction (producer 7, offsets 0-1,
// marker at 4), a plain batch at 2, and a committed one (producer 8, offset 3, marker at
// 5), replicated to follower 2 up to offset 6.
func txnLeader(t *testing.T, dir string) *Partition {
	t.Helper()
	p := openTest(t, dir, 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	if r := appendTxn(t, p, 7, 0, 0, 2); r.BaseOffset != 0 {
		t.Fatalf("txn batch at %d", r.BaseOffset)
	}
	appendLeader(t, p, 1, -1)
	p.FollowerFetched(2, 3, -1, -1, now)
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 3 || lso != 0 {
		t.Fatalf("open transaction: hw %d lso %d", hw, lso)
	}
	appendTxn(t, p, 8, 0, 0, 1)
	p.FollowerFetched(2, 4, -1, -1, now)
	if off := marker(t, p, 7, 0, false, 1); off != 4 {
		t.Fatalf("abort marker at %d", off)
	}
	// Until the marker is committed, the aborted transaction's records stay unstable.
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d before the abort marker is replicated", lso)
	}
	p.FollowerFetched(2, 5, -1, -1, now)
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d after the abort, want producer 8's first offset 3", lso)
	}
	if off := marker(t, p, 8, 0, true, 1); off != 5 {
		t.Fatalf("commit marker at %d", off)
	}
	p.FollowerFetched(2, 6, -1, -1, now)
	if lso := p.LastStableOffset(); lso != 6 {
		t.Fatalf("LSO %d after both transactions ended, want the HW 6", lso)
	}
	return p
}

var wantAborted = []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 4, LastStableOffset: 3}}

func TestTransactionState(t *testing.T) {
	p := txnLeader(t, t.TempDir())
	if got, _ := p.AbortedTxns(0, 6); !slices.Equal(got, wantAborted) {
		t.Errorf("aborted %+v, want %+v", got, wantAborted)
	}
	if got, _ := p.AbortedTxns(5, 6); len(got) != 0 {
		t.Errorf("aborted past the marker: %+v", got)
	}
	if _, err := p.AppendMarker(8, 0, records.Marker{Commit: true, CoordinatorEpoch: 0}); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Errorf("marker from an older coordinator: %v", err)
	}
	marker(t, p, 8, 1, false, 1) // the coordinator bumped the epoch (fencing the producer)
	if _, err := p.AppendMarker(8, 0, records.Marker{CoordinatorEpoch: 1}); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("marker of an older producer epoch: %v", err)
	}
	b, h := txnBatch(t, 8, 0, 1, 1)
	if _, err := p.AppendAsLeader(b, h, 1); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("write of a fenced producer epoch: %v", err)
	}
	// An unverified first write of a transaction is refused.
	b, h = txnBatch(t, 9, 0, 0, 1)
	if _, err := p.AppendAsLeader(b, h, 1); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("unverified write: %v", err)
	}
	// A marker between the verification's start and its answer cancels it.
	token, _ := p.BeginTxnVerification(9, 0)
	marker(t, p, 9, 0, false, 1)
	p.CompleteTxnVerification(9, token)
	if _, err := p.AppendAsLeader(b, h, 1); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("write verified for a transaction that ended: %v", err)
	}
	var info ProducerInfo
	for _, pi := range p.Producers() {
		if pi.ProducerID == 7 {
			info = pi
		}
	}
	if info.ProducerEpoch != 0 || info.LastSequence != 1 || info.CoordinatorEpoch != 1 || info.CurrentTxnStartOffset != -1 {
		t.Errorf("producer 7: %+v", info)
	}
}

// An open transaction and the aborted ones survive a restart, from the snapshot of a
// clean shutdown and from a replay of the log after a crash.
func TestTransactionStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p := txnLeader(t, dir)
	appendTxn(t, p, 9, 0, 0, 2) // open at 6
	p.FollowerFetched(2, 8, -1, -1, time.Now())
	if lso := p.LastStableOffset(); lso != 6 {
		t.Fatalf("LSO %d", lso)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		q := openTest(t, dir, 1, 8)
		if lso := q.LastStableOffset(); lso != 6 {
			t.Errorf("%s: LSO %d, want 6", what, lso)
		}
		if got, _ := q.AbortedTxns(0, 8); !slices.Equal(got, wantAborted) {
			t.Errorf("%s: aborted %+v", what, got)
		}
		if err := q.close(); err != nil {
			t.Fatal(err)
		}
	}
	check("snapshot")
	if err := os.Remove(filepath.Join(dir, producerSnapshotFile)); err != nil {
		t.Fatal(err)
	}
	check("replay")
}

// A follower builds the leader's transaction state from the replicated batches, and
// truncation reopens the transactions whose markers it cut.
func TestFollowerTransactionState(t *testing.T) {
	leader := txnLeader(t, t.TempDir())
	f := openTest(t, t.TempDir(), 2, -1)
	if _, err := f.ApplyState(State{Role: RoleFollower, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendAsFollower(logBytes(t, leader), 1); err != nil {
		t.Fatal(err)
	}
	f.SetFollowerHighWatermark(6)
	if lso := f.LastStableOffset(); lso != 6 {
		t.Errorf("follower LSO %d", lso)
	}
	if got, _ := f.AbortedTxns(0, 6); !slices.Equal(got, wantAborted) {
		t.Errorf("follower aborted %+v", got)
	}
	if err := f.TruncateTo(5); err != nil { // cuts producer 8's commit
		t.Fatal(err)
	}
	if first := f.firstUnstableOffset(); first != 3 {
		t.Errorf("after truncating the commit marker the first unstable offset is %d, want 3", first)
	}
	if err := f.TruncateTo(4); err != nil { // and producer 7's abort
		t.Fatal(err)
	}
	if aborted, _ := f.AbortedTxns(0, 4); f.firstUnstableOffset() != 0 || len(aborted) != 0 {
		t.Errorf("after truncating the abort marker: first unstable %d, aborted %+v", f.firstUnstableOffset(), aborted)
	}
}

// Retention deletes no segment at or after the first offset of an open transaction.
func TestRetentionStopsAtOpenTransaction(t *testing.T) {
	s := testSettings()
	s.Log.SegmentBytes = 200 // about one batch per segment
	s.Log.RetentionMs = 0    // everything is old enough
	p, err := open("t", testID, 0, 1, t.TempDir(), -1, s, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	now := time.Now()
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), now); err != nil {
		t.Fatal(err)
	}
	appendLeader(t, p, 1, -1)
	appendLeader(t, p, 1, -1)
	appendTxn(t, p, 7, 0, 0, 1) // open at 2
	for range 3 {
		appendLeader(t, p, 1, -1)
	}
	p.FollowerFetched(2, p.LogEndOffset(), -1, -1, now)
	if err := p.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if start := p.LogStartOffset(); start != 2 {
		t.Fatalf("log start %d with a transaction open at 2", start)
	}
	marker(t, p, 7, 0, true, 0)
	if err := p.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if start := p.LogStartOffset(); start <= 2 {
		t.Fatalf("log start %d after the transaction committed", start)
	}
}

// Two requests of one producer verifying at once share the check: either answer admits
// both writes.
func TestConcurrentVerificationsShareTheGuard(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	t1, n1 := p.BeginTxnVerification(3, 0)
	t2, n2 := p.BeginTxnVerification(3, 0)
	if !n1 || !n2 {
		t.Fatal("verification not needed for a new transaction")
	}
	p.CompleteTxnVerification(3, t1)
	_ = t2
	for seq := int32(0); seq < 2; seq++ {
		b, h := txnBatch(t, 3, 0, seq, 1)
		if _, err := p.AppendAsLeader(b, h, 1); err != nil {
			t.Fatalf("write %d: %v", seq, err)
		}
	}
}

// TestNextEpochWriteNeedsItsOwnVerification: transactions v2 (KIP-890 part 2) bump the
// producer epoch at every end, so the next transaction's first write may arrive while
// the previous one is still open here (its marker, at the new epoch, not yet written).
// It must not join the open transaction: it is verified, and a verification the marker
// overtakes is cancelled, so that the partition asks again after the marker.
func TestNextEpochWriteNeedsItsOwnVerification(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	if _, err := p.ApplyState(leaderState(1, 1, 1, 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	appendTxn(t, p, 5, 0, 0, 1)
	// The open transaction admits more of its own epoch without asking.
	if _, needed := p.BeginTxnVerification(5, 0); needed {
		t.Fatal("a write of the open transaction's epoch needs verification")
	}
	token, needed := p.BeginTxnVerification(5, 1)
	if !needed {
		t.Fatal("a write of the next epoch joins the open transaction without verification")
	}
	b, h := txnBatch(t, 5, 1, 0, 1)
	if _, err := p.AppendAsLeader(b, h, 1); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("unverified write of the next epoch: %v, want INVALID_TXN_STATE", err)
	}
	// The previous transaction's marker, at the bumped epoch, lands during the check.
	marker(t, p, 5, 1, true, 0)
	if p.CompleteTxnVerification(5, token) {
		t.Fatal("a verification the marker overtook completed")
	}
	if _, err := p.AppendAsLeader(b, h, 1); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("write after a cancelled verification: %v, want INVALID_TXN_STATE", err)
	}
	token, needed = p.BeginTxnVerification(5, 1)
	if !needed || !p.CompleteTxnVerification(5, token) {
		t.Fatal("verification after the marker")
	}
	res, err := p.AppendAsLeader(b, h, 1)
	if err != nil {
		t.Fatalf("verified write of the next transaction: %v", err)
	}
	// It opened a transaction of its own, after the marker.
	if lso := p.LastStableOffset(); lso > res.BaseOffset {
		t.Fatalf("last stable offset %d is past the new transaction's first offset %d", lso, res.BaseOffset)
	}
}
