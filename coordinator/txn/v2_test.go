package txn

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// endV1 is EndTxn v0-4: transactions v1.
func (h *harness) endV1(id string, pid int64, epoch int16, commit bool) error {
	_, _, err := h.c.EndTxn(bg, id, pid, epoch, commit, false)
	return err
}

// lastWrite is the last state of id the controller accepted from this coordinator and
// whose write has returned to it.
func (h *harness) lastWrite(id string) (metadata.TxnState, bool) {
	ws := h.store.accepted()
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].TransactionalID == id {
			return ws[i], true
		}
	}
	return metadata.TxnState{}, false
}

// completed waits for id's Complete* write (status) to have returned to the
// coordinator, which then takes the next request: the controller shows the state a
// moment before.
func (h *harness) completed(id string, status metadata.TxnStatus) {
	h.t.Helper()
	h.eventually("the Complete* write to return", func() bool {
		st, ok := h.lastWrite(id)
		return ok && st.Status == status
	})
	if got := h.status(id); got != status {
		h.t.Fatalf("controller has %s in state %v, want %v", id, got, status)
	}
}

// TestEndTxnV2BumpsEpoch: EndTxn v5 commits PrepareCommit with the epoch bumped in the
// same write, the markers carry the bumped epoch, the producer continues with it, and the
// old epoch is fenced except for a retry of the same EndTxn.
func TestEndTxnV2BumpsEpoch(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0, 1}}); err != nil {
		t.Fatal(err)
	}
	npid, nepoch, err := h.c.EndTxn(bg, a, pid, epoch, true, true)
	if err != nil || npid != pid || nepoch != epoch+1 {
		t.Fatalf("EndTxn v2: pid %d epoch %d err %v, want %d epoch %d", npid, nepoch, err, pid, epoch+1)
	}
	// The bump is in the PrepareCommit write itself, so a new coordinator loading it
	// completes with the bumped epoch.
	var prepare *metadata.TxnState
	for _, w := range h.store.accepted() {
		if w.Status == metadata.TxnPrepareCommit {
			prepare = &w
		}
	}
	if prepare == nil || prepare.ProducerEpoch != epoch+1 || prepare.LastProducerEpoch != epoch || prepare.TxnVersion != 2 || len(prepare.Partitions["t"]) != 2 {
		t.Fatalf("PrepareCommit written as %+v", prepare)
	}
	h.completed(a, metadata.TxnCompleteCommit)
	ms := h.markers.markers()
	if len(ms) != 2 {
		t.Fatalf("markers %+v, want one per partition", ms)
	}
	for _, m := range ms {
		if m.producerID != pid || m.producerEpoch != epoch+1 || !m.commit {
			t.Errorf("marker %+v, want producer %d epoch %d", m, pid, epoch+1)
		}
	}
	if st, _ := h.cl.state(a); st.ProducerEpoch != epoch+1 || st.ProducerID != pid {
		t.Fatalf("completed state %+v", st)
	}

	// A retry of the EndTxn (its answer lost) is recognised by the old epoch.
	if p, e, err := h.c.EndTxn(bg, a, pid, epoch, true, true); err != nil || p != pid || e != epoch+1 {
		t.Errorf("retried commit: pid %d epoch %d err %v, want %d epoch %d", p, e, err, pid, epoch+1)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, false, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("abort retried with the old epoch after a commit: %v, want INVALID_TXN_STATE", err)
	}
	// The old epoch cannot start a transaction: its late writes are fenced.
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("AddPartitions at the old epoch: %v, want PRODUCER_FENCED", err)
	}
	// The next transaction runs at the new epoch; once it is ongoing, the old epoch's
	// EndTxn is no longer a retry.
	if err := h.c.AddPartitions(bg, a, pid, epoch+1, map[string][]int32{"t": {1}}); err != nil {
		t.Fatalf("next transaction: %v", err)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, true, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("old epoch's EndTxn during the next transaction: %v, want PRODUCER_FENCED", err)
	}
	if p, e, err := h.c.EndTxn(bg, a, pid, epoch+1, false, true); err != nil || p != pid || e != epoch+2 {
		t.Fatalf("second EndTxn v2: pid %d epoch %d err %v", p, e, err)
	}
	h.completed(a, metadata.TxnCompleteAbort)
}

// TestEndTxnV2RetryWhilePreparing: a retry that arrives before the markers are written
// is answered CONCURRENT_TRANSACTIONS (clients retry), the opposite decision
// INVALID_TXN_STATE.
func TestEndTxnV2RetryWhilePreparing(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	h.markers.mu.Lock()
	h.markers.hold = make(chan struct{})
	h.markers.mu.Unlock()
	pid, epoch, _ := h.init(a, -1, -1)
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, false, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, false, true); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Errorf("retry while PrepareAbort: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, true, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("commit while PrepareAbort: %v, want INVALID_TXN_STATE", err)
	}
	// The bumped epoch's end (of the next transaction) waits for the markers.
	for _, commit := range []bool{true, false} {
		if _, _, err := h.c.EndTxn(bg, a, pid, epoch+1, commit, true); !errors.Is(err, kerr.ConcurrentTransactions) {
			t.Errorf("new epoch's EndTxn (commit %v) while PrepareAbort: %v, want CONCURRENT_TRANSACTIONS", commit, err)
		}
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch-1, false, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("an older epoch's EndTxn while PrepareAbort: %v, want PRODUCER_FENCED", err)
	}
	close(h.markers.hold)
	h.completed(a, metadata.TxnCompleteAbort)
	if p, e, err := h.c.EndTxn(bg, a, pid, epoch, false, true); err != nil || p != pid || e != epoch+1 {
		t.Errorf("retry after CompleteAbort: pid %d epoch %d err %v", p, e, err)
	}
}

// TestEndTxnV2EmptyAbort: transactions v2 may abort a transaction that added nothing;
// it bumps the epoch and writes no markers. Committing one is INVALID_TXN_STATE.
func TestEndTxnV2EmptyAbort(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, true, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("empty commit: %v, want INVALID_TXN_STATE", err)
	}
	p, e, err := h.c.EndTxn(bg, a, pid, epoch, false, true)
	if err != nil || p != pid || e != epoch+1 {
		t.Fatalf("empty abort: pid %d epoch %d err %v", p, e, err)
	}
	h.completed(a, metadata.TxnCompleteAbort)
	if ms := h.markers.markers(); len(ms) != 0 {
		t.Errorf("markers %+v for an empty transaction", ms)
	}
	// And again from CompleteAbort at the current epoch (not a retry).
	if p, e, err := h.c.EndTxn(bg, a, pid, epoch+1, false, true); err != nil || p != pid || e != epoch+2 {
		t.Fatalf("second empty abort: pid %d epoch %d err %v", p, e, err)
	}
	h.eventually("CompleteAbort at the second bumped epoch", func() bool {
		st, ok := h.lastWrite(a)
		return ok && st.Status == metadata.TxnCompleteAbort && st.ProducerEpoch == epoch+2
	})
	if st, _ := h.cl.state(a); st.Status != metadata.TxnCompleteAbort || st.ProducerEpoch != epoch+2 {
		t.Fatalf("state after the second empty abort %+v", st)
	}
}

// TestEndTxnV2EpochExhaustion: the end that would hand out the last epochs gives the
// producer a new producer id at epoch 0; the markers take the old id at the last epoch,
// and a retry with the old id and epoch gets the new id again. A coordinator that takes
// over between PrepareCommit and CompleteCommit moves the producer to the same new id.
func TestEndTxnV2EpochExhaustion(t *testing.T) {
	cl := newCluster(t, false)
	a := cl.id("a", 1)
	last := int16(math.MaxInt16 - 1)
	// Broker 1 coordinates a; its state is written before the coordinator starts and
	// loads it.
	st := metadata.TxnState{TransactionalID: a, ProducerID: 7, ProducerEpoch: last, LastProducerID: 7,
		LastProducerEpoch: last - 1, TimeoutMs: 60000, Status: metadata.TxnOngoing, Partitions: map[string][]int32{"t": {0}},
		StartMs: 1, LastUpdateMs: 1, TxnVersion: 2, NextProducerID: -1}
	if err := cl.node.Broker.WriteTxnState(bg, metadata.GroupFence{Broker: 1, Epoch: cl.epoch(a)}, st, false); err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, cl)
	h.markers.mu.Lock()
	h.markers.hold = make(chan struct{})
	h.markers.mu.Unlock()
	var (
		p   int64
		e   int16
		err error
	)
	h.eventually("loaded", func() bool {
		p, e, err = h.c.EndTxn(bg, a, 7, last, true, true)
		return !errors.Is(err, kerr.CoordinatorLoadInProgress)
	})
	if err != nil || p == 7 || p < 0 || e != 0 {
		t.Fatalf("EndTxn at the last epoch: pid %d epoch %d err %v, want a new producer id at epoch 0", p, e, err)
	}
	if st, _ := cl.state(a); st.Status != metadata.TxnPrepareCommit || st.ProducerID != 7 || st.ProducerEpoch != math.MaxInt16 || st.NextProducerID != p {
		t.Fatalf("PrepareCommit %+v", st)
	}
	// Failover: a new coordinator loads PrepareCommit and completes it.
	h.c.Close()
	h2 := newHarnessOn(t, cl)
	h2.completed(a, metadata.TxnCompleteCommit)
	for _, m := range h2.markers.markers() {
		if m.producerID != 7 || m.producerEpoch != math.MaxInt16 {
			t.Errorf("marker %+v, want producer 7 at epoch %d", m, math.MaxInt16)
		}
	}
	if len(h2.markers.markers()) == 0 {
		t.Error("no markers after the failover")
	}
	if st, _ := cl.state(a); st.ProducerID != p || st.ProducerEpoch != 0 || st.LastProducerID != 7 || st.LastProducerEpoch != last || st.NextProducerID != -1 {
		t.Fatalf("CompleteCommit %+v, want producer %d epoch 0 after 7 epoch %d", st, p, last)
	}
	if rp, re, err := h2.c.EndTxn(bg, a, 7, last, true, true); err != nil || rp != p || re != 0 {
		t.Errorf("retry with the exhausted id: pid %d epoch %d err %v, want %d epoch 0", rp, re, err, p)
	}
	if err := h2.c.AddPartitions(bg, a, 7, last, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Errorf("old producer id: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}
	if err := h2.c.AddPartitions(bg, a, p, 0, map[string][]int32{"t": {0}}); err != nil {
		t.Errorf("new producer id: %v", err)
	}
}

// TestEndTxnV1Unchanged: EndTxn v0-4 neither bumps the epoch nor changes the stored
// transaction version, and its retries are recognised by the same epoch.
func TestEndTxnV1Unchanged(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if p, e, err := h.c.EndTxn(bg, a, pid, epoch, true, false); err != nil || p != pid || e != epoch {
		t.Fatalf("EndTxn v1: pid %d epoch %d err %v", p, e, err)
	}
	h.completed(a, metadata.TxnCompleteCommit)
	if st, _ := h.cl.state(a); st.ProducerEpoch != epoch || st.TxnVersion != 0 {
		t.Fatalf("state after a v1 commit %+v", st)
	}
	for _, m := range h.markers.markers() {
		if m.producerEpoch != epoch {
			t.Errorf("marker %+v, want epoch %d", m, epoch)
		}
	}
	if err := h.endV1(a, pid, epoch, true); err != nil {
		t.Errorf("v1 retry: %v", err)
	}
	// v1 may not end a transaction that added nothing.
	if err := h.endV1(a, pid, epoch, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("v1 abort after commit: %v, want INVALID_TXN_STATE", err)
	}
}

// TestEndTxnV2FencedProducerIsNotARetry: after a timed-out transaction is aborted with
// a fencing bump, its producer's EndTxn with the old epoch is fenced, not mistaken for a
// retry of its own end.
func TestEndTxnV2FencedProducerIsNotARetry(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	// One v2 transaction first, so the state carries transaction version 2.
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, true, true); err != nil {
		t.Fatal(err)
	}
	h.completed(a, metadata.TxnCompleteCommit)
	epoch++
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(61 * time.Second)
	h.c.AbortTimedOut()
	h.completed(a, metadata.TxnCompleteAbort)
	for _, commit := range []bool{true, false} {
		if _, _, err := h.c.EndTxn(bg, a, pid, epoch, commit, true); !errors.Is(err, kerr.ProducerFenced) {
			t.Errorf("fenced producer's EndTxn (commit %v): %v, want PRODUCER_FENCED", commit, err)
		}
	}
}

// TestAddToTxnStartsTransaction: Produce v12's implicit add (the partition leader's
// AddToTxn) starts the transaction at the producer's current epoch and fences an ended
// transaction's epoch.
func TestAddToTxnStartsTransaction(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	v := &Verifier{Coordinator: h.c}
	pid, epoch, _ := h.init(a, -1, -1)
	if err := v.AddToTxn(bg, a, pid, epoch, "t", 0); err != nil {
		t.Fatalf("implicit add: %v", err)
	}
	if st, _ := h.cl.state(a); st.Status != metadata.TxnOngoing || len(st.Partitions["t"]) != 1 {
		t.Fatalf("state after the implicit add %+v", st)
	}
	if _, _, err := h.c.EndTxn(bg, a, pid, epoch, true, true); err != nil {
		t.Fatal(err)
	}
	h.completed(a, metadata.TxnCompleteCommit)
	// A late write of the committed transaction cannot start another one.
	if err := v.AddToTxn(bg, a, pid, epoch, "t", 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("late write at the ended epoch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if st, _ := h.cl.state(a); st.Status != metadata.TxnCompleteCommit {
		t.Fatalf("the late write changed the state: %+v", st)
	}
	if err := v.AddToTxn(bg, a, pid, epoch+1, "t", 0); err != nil {
		t.Fatalf("next transaction's implicit add: %v", err)
	}
}

// TestRemoteAddsUseAddPartitionsToTxnV5: a partition leader's add for Produce v12 and a
// group coordinator's for TxnOffsetCommit v5 reach a remote transaction coordinator as
// AddPartitionsToTxn v5 adds (not VerifyOnly), the group as its __consumer_offsets
// partition; a local coordinator adds the group by name.
func TestRemoteAddsUseAddPartitionsToTxnV5(t *testing.T) {
	h := newHarness2(t)
	a := h.cl.id("a", 2)
	remote := &fakeRemote{resp: func(req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		for _, tx := range req.Transactions {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = tx.TransactionalID
			for _, tt := range tx.Topics {
				rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rtt.Topic = tt.Topic
				for _, p := range tt.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ProducerFenced.Code
					rtt.Partitions = append(rtt.Partitions, rp)
				}
				rt.Topics = append(rt.Topics, rtt)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp, nil
	}}
	v := &Verifier{Coordinator: h.c, Remote: remote}
	check := func(what, topic string, partition int32) {
		t.Helper()
		tx := remote.req.Transactions
		if remote.to != 2 || remote.req.Version != 5 || len(tx) != 1 || tx[0].VerifyOnly || tx[0].TransactionalID != a || tx[0].ProducerID != 7 || tx[0].ProducerEpoch != 2 ||
			len(tx[0].Topics) != 1 || tx[0].Topics[0].Topic != topic || len(tx[0].Topics[0].Partitions) != 1 || tx[0].Topics[0].Partitions[0] != partition {
			t.Fatalf("%s: request to broker %d: %+v", what, remote.to, remote.req)
		}
	}
	// A fenced producer's write is INVALID_PRODUCER_EPOCH on Produce.
	if err := v.AddToTxn(bg, a, 7, 2, "t", 1); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("remote add of a fenced producer: %v", err)
	}
	check("Produce v12", "t", 1)
	if err := v.AddGroup(bg, a, 7, 2, "g"); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("remote group add of a fenced producer: %v", err)
	}
	check("TxnOffsetCommit v5", metadata.OffsetsTopic, metadata.OffsetsPartition("g", len(h.cl.node.Store().Current().Coordinators)))

	// Locally, by name: an id this broker coordinates.
	b := h.cl.id("b", 1)
	pid, epoch, _ := h.init(b, -1, -1)
	if err := v.AddGroup(bg, b, pid, epoch, "g"); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.cl.state(b); st.Status != metadata.TxnOngoing || len(st.Groups) != 1 || st.Groups[0] != "g" {
		t.Fatalf("after a local group add: %+v", st)
	}
}
