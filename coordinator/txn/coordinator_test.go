package txn

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

var bg = context.Background()

func TestInitProducerIDBumpsEpochAndFences(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, err := h.init(a, -1, -1)
	if err != nil || epoch != 0 {
		t.Fatalf("first InitProducerId: pid %d epoch %d err %v", pid, epoch, err)
	}
	pid2, epoch2, err := h.init(a, -1, -1)
	if err != nil || pid2 != pid || epoch2 != 1 {
		t.Fatalf("second InitProducerId: pid %d epoch %d err %v, want %d epoch 1", pid2, epoch2, err, pid)
	}
	// The zombie (epoch 0) is fenced everywhere.
	if err := h.c.AddPartitions(bg, a, pid, 0, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie AddPartitions: %v, want PRODUCER_FENCED", err)
	}
	if err := h.endV1(a, pid, 0, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie EndTxn: %v, want PRODUCER_FENCED", err)
	}
	if err := h.c.AddPartitions(bg, a, pid+1, 1, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("wrong producer id: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}
	if st, _ := h.cl.state(a); st.ProducerEpoch != 1 || st.Status != metadata.TxnEmpty {
		t.Fatalf("stored state %+v", st)
	}
}

func TestInitProducerIDValidatesTimeout(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	for _, ms := range []int32{0, -1, 900001} {
		if _, _, err := h.c.InitProducerID(bg, a, ms, -1, -1); !errors.Is(err, kerr.InvalidTransactionTimeout) {
			t.Errorf("timeout %d: %v, want INVALID_TRANSACTION_TIMEOUT", ms, err)
		}
	}
}

func TestNotCoordinator(t *testing.T) {
	h := newHarness2(t)
	a := h.cl.id("a", 2)
	if _, _, err := h.c.InitProducerID(bg, a, 1000, -1, -1); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("InitProducerId on another broker's id: %v, want NOT_COORDINATOR", err)
	}
}

func TestKIP360EpochBump(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, _, _ := h.init(a, -1, -1)
	pid2, epoch, err := h.init(a, pid, 0)
	if err != nil || pid2 != pid || epoch != 1 {
		t.Fatalf("bump: pid %d epoch %d err %v", pid2, epoch, err)
	}
	// The same bump retried (its answer lost) gets the current epoch again.
	if pid3, epoch, err := h.init(a, pid, 0); err != nil || pid3 != pid || epoch != 1 {
		t.Fatalf("retried bump: pid %d epoch %d err %v", pid3, epoch, err)
	}
	// Another producer's id is fenced.
	if _, _, err := h.init(a, pid+7, 0); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("foreign producer id: %v, want PRODUCER_FENCED", err)
	}
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	h := newHarness2(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.AddOffsets(bg, a, pid, epoch, "g"); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.cl.state(a); st.Status != metadata.TxnOngoing || len(st.Partitions["t"]) != 2 || len(st.Groups) != 1 {
		t.Fatalf("after adds: %+v", st)
	}
	if err := h.endV1(a, pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	h.eventually("CompleteCommit", func() bool { return h.status(a) == metadata.TxnCompleteCommit })
	ms := h.markers.markers()
	if len(ms) != 2 {
		t.Fatalf("markers %+v, want one per partition", ms)
	}
	for _, m := range ms {
		leader := int32(1)
		if m.partition == 1 {
			leader = 2
		}
		if m.to != leader || !m.commit || m.producerID != pid || m.producerEpoch != epoch || m.coordinatorEpoch != h.cl.epoch(a) {
			t.Errorf("marker %+v", m)
		}
	}
	// Every transition was written, in Kafka's order. (The controller shows the last
	// one a moment before its write returns to the coordinator.)
	h.eventually("the CompleteCommit write to return", func() bool {
		ws := h.store.accepted()
		return len(ws) > 0 && ws[len(ws)-1].Status == metadata.TxnCompleteCommit
	})
	var got []metadata.TxnStatus
	for _, w := range h.store.accepted() {
		if len(got) == 0 || got[len(got)-1] != w.Status {
			got = append(got, w.Status)
		}
	}
	want := []metadata.TxnStatus{metadata.TxnEmpty, metadata.TxnOngoing, metadata.TxnPrepareCommit, metadata.TxnCompleteCommit}
	if len(got) != len(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("transitions %v, want %v", got, want)
		}
	}
	// A retried EndTxn is answered as a success; the opposite decision is not.
	if err := h.endV1(a, pid, epoch, true); err != nil {
		t.Errorf("retried commit: %v", err)
	}
	if err := h.endV1(a, pid, epoch, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("abort after commit: %v, want INVALID_TXN_STATE", err)
	}
	// The next transaction starts.
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatalf("next transaction: %v", err)
	}
}

func TestConcurrentTransactionsWhileCompleting(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	h.markers.mu.Lock()
	h.markers.hold = make(chan struct{})
	h.markers.mu.Unlock()
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if err := h.endV1(a, pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("AddPartitions during PrepareAbort: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if err := h.endV1(a, pid, epoch, false); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("retried abort during PrepareAbort: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if err := h.endV1(a, pid, epoch, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("commit during PrepareAbort: %v, want INVALID_TXN_STATE", err)
	}
	if _, _, err := h.c.InitProducerID(bg, a, 1000, -1, -1); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId during PrepareAbort: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	close(h.markers.hold)
	h.eventually("CompleteAbort", func() bool { return h.status(a) == metadata.TxnCompleteAbort })
}

func TestEndTxnErrors(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	if err := h.endV1(a, pid, epoch, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("EndTxn with no transaction: %v, want INVALID_TXN_STATE", err)
	}
	if err := h.endV1("nobody", pid, epoch, true); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Errorf("EndTxn of an unknown id: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}
}

func TestMarkersRetriedUntilLeaderAcknowledges(t *testing.T) {
	h := newHarness2(t)
	a := h.cl.id("a", 1)
	failures := 3
	h.markers.fail = func(to int32, _ string, _ int32) error {
		if to == 2 && failures > 0 {
			failures--
			return kerr.NotLeaderForPartition
		}
		return nil
	}
	pid, epoch, _ := h.init(a, -1, -1)
	h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0, 1}})
	if err := h.endV1(a, pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	h.eventually("CompleteCommit", func() bool { return h.status(a) == metadata.TxnCompleteCommit })
	if failures != 0 {
		t.Fatalf("%d failures left: completed before broker 2 acknowledged", failures)
	}
}

func TestInitProducerIDAbortsOngoingTransaction(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}})
	// A new producer instance with the same id: the old transaction is aborted under a
	// bumped epoch, and the new producer gets the epoch after that.
	pid2, epoch2, err := h.init(a, -1, -1)
	if err != nil || pid2 != pid || epoch2 != epoch+2 {
		t.Fatalf("InitProducerId over an ongoing transaction: pid %d epoch %d err %v", pid2, epoch2, err)
	}
	ms := h.markers.markers()
	if len(ms) != 1 || ms[0].commit || ms[0].producerEpoch != epoch+1 {
		t.Fatalf("markers %+v, want one abort at epoch %d", ms, epoch+1)
	}
	if err := h.endV1(a, pid, epoch, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old producer's commit: %v, want PRODUCER_FENCED", err)
	}
}

func TestTimedOutTransactionIsAborted(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1) // timeout 60s
	h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {1}})
	h.clock.advance(59 * time.Second)
	h.c.AbortTimedOut()
	if s := h.status(a); s != metadata.TxnOngoing {
		t.Fatalf("aborted before its timeout: %v", s)
	}
	h.clock.advance(2 * time.Second)
	h.c.AbortTimedOut()
	h.eventually("CompleteAbort", func() bool { return h.status(a) == metadata.TxnCompleteAbort })
	if st, _ := h.cl.state(a); st.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch %d after the timeout abort, want %d (the producer fenced)", st.ProducerEpoch, epoch+1)
	}
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {1}}); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("timed out producer: %v, want PRODUCER_FENCED", err)
	}
}

func TestExpiredIDIsForgotten(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	h.init(a, -1, -1)
	h.clock.advance(7*24*time.Hour - time.Second)
	h.c.RemoveExpired()
	if _, ok := h.cl.state(a); !ok {
		t.Fatal("forgotten before transactional.id.expiration.ms")
	}
	h.clock.advance(time.Second)
	h.c.RemoveExpired()
	if _, ok := h.cl.state(a); ok {
		t.Fatal("not forgotten after transactional.id.expiration.ms")
	}
	if _, err := h.c.Describe(a); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("Describe of an expired id: %v", err)
	}
}

func TestNewCoordinatorCompletesPreparedTransaction(t *testing.T) {
	cl := newCluster(t, false)
	a, next := cl.movable("a")
	// Another broker coordinates a and leaves its transaction prepared to commit.
	b3 := cl.node.AddBroker(next, "127.0.0.1", 9094)
	im := controllertest.WaitFor(t, b3, "the new broker coordinating "+a, func(im *metadata.Image) bool {
		_, co, _ := im.CoordinatorOf(a)
		return co.Broker == next
	})
	_, co, _ := im.CoordinatorOf(a)
	st := metadata.TxnState{TransactionalID: a, ProducerID: 7, ProducerEpoch: 4, TimeoutMs: 1000,
		Status: metadata.TxnPrepareCommit, Partitions: map[string][]int32{"t": {0, 1}}, LastProducerID: -1, LastProducerEpoch: -1}
	if err := b3.WriteTxnState(bg, metadata.GroupFence{Broker: next, Epoch: co.Epoch}, st, false); err != nil {
		t.Fatal(err)
	}
	// Broker 1 starts knowing that it does not coordinate a.
	controllertest.WaitFor(t, cl.node.Broker, "broker 1 seeing the move of "+a, func(im *metadata.Image) bool {
		_, now, _ := im.CoordinatorOf(a)
		return now.Epoch >= co.Epoch
	})
	h := newHarnessOn(t, cl)
	// Broker 1 takes over when the other shuts down, at a new coordinator epoch.
	if err := b3.Close(); err != nil {
		t.Fatal(err)
	}
	h.eventually("CompleteCommit", func() bool { return h.status(a) == metadata.TxnCompleteCommit })
	epoch := h.cl.epoch(a)
	if epoch <= co.Epoch {
		t.Fatalf("coordinator epoch %d after the move, want more than %d", epoch, co.Epoch)
	}
	for _, m := range h.markers.markers() {
		if !m.commit || m.producerID != 7 || m.producerEpoch != 4 || m.coordinatorEpoch != epoch {
			t.Errorf("marker %+v", m)
		}
	}
	if n := len(h.markers.markers()); n != 2 {
		t.Fatalf("%d markers, want 2", n)
	}
}

func TestStaleCoordinatorIsFenced(t *testing.T) {
	cl := newCluster(t, false)
	a, next := cl.movable("a")
	h := newHarnessOn(t, cl)
	pid, epoch, _ := h.init(a, -1, -1)
	before := cl.epoch(a)
	// The controller moves a to another broker and back before this broker's image
	// shows it: the write is refused and the partition unloaded.
	h.store.freeze()
	b3 := cl.node.AddBroker(next, "127.0.0.1", 9094)
	controllertest.WaitFor(t, b3, "the new broker coordinating "+a, func(im *metadata.Image) bool {
		_, co, _ := im.CoordinatorOf(a)
		return co.Broker == next
	})
	if err := b3.Close(); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, cl.node.Broker, "broker 1 coordinating "+a+" again", func(im *metadata.Image) bool {
		_, co, _ := im.CoordinatorOf(a)
		return co.Broker == 1 && co.Epoch >= before+2
	})
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("write under a stale epoch: %v, want NOT_COORDINATOR", err)
	}
	// Until the image moves on it reloads, and is refused again.
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); !errors.Is(err, kerr.CoordinatorLoadInProgress) && !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("after the refusal: %v, want COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR", err)
	}
	// The new image arrives: it reloads under the new epoch and goes on.
	h.store.thaw()
	h.eventually("AddPartitions under the new epoch", func() bool {
		return h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}) == nil
	})
	if st, _ := cl.state(a); st.Status != metadata.TxnOngoing {
		t.Fatalf("state %v", st.Status)
	}
}

func TestVerify(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}})
	v := &Verifier{Coordinator: h.c}
	if err := v.VerifyAdded(bg, a, pid, epoch, "t", 0); err != nil {
		t.Errorf("added partition: %v", err)
	}
	if err := v.VerifyAdded(bg, a, pid, epoch, "t", 1); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("partition not added: %v, want INVALID_TXN_STATE", err)
	}
	if err := v.VerifyAdded(bg, a, pid, epoch-1, "t", 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("old epoch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
}

func TestListAndDescribe(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	pid, epoch, _ := h.init(a, -1, -1)
	b := h.cl.id("b", 1)
	h.init(b, -1, -1)
	h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {1, 0}})
	st, err := h.c.Describe(a)
	if err != nil || st.Status != metadata.TxnOngoing || len(st.Partitions["t"]) != 2 || st.StartMs != h.clock.now().UnixMilli() {
		t.Fatalf("Describe: %+v %v", st, err)
	}
	all, _ := h.c.List(ListFilter{MinDurationMs: -1})
	if len(all) != 2 || all[0].TransactionalID != a || all[1].TransactionalID != b {
		t.Fatalf("List all: %+v", all)
	}
	ongoing, _ := h.c.List(ListFilter{States: []string{"Ongoing"}, MinDurationMs: -1})
	if len(ongoing) != 1 || ongoing[0].TransactionalID != a {
		t.Fatalf("List Ongoing: %+v", ongoing)
	}
}

func TestRequestWaitsForThePreviousCompletion(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	h.c.cfg.CompletionWait = time.Minute
	pid, epoch, _ := h.init(a, -1, -1)
	h.markers.mu.Lock()
	h.markers.hold = make(chan struct{})
	h.markers.mu.Unlock()
	h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}})
	if err := h.endV1(a, pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	// The next transaction's first request is answered once the commit completed,
	// instead of CONCURRENT_TRANSACTIONS.
	res := make(chan error, 1)
	go func() { res <- h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {1}}) }()
	h.eventually("AddPartitions waiting for the commit to complete", func() bool {
		buf := make([]byte, 1<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*Coordinator).awaitPrevious"))
	})
	close(h.markers.hold)
	if err := <-res; err != nil {
		t.Fatalf("AddPartitions after the completion: %v", err)
	}
	if st, _ := h.cl.state(a); st.Status != metadata.TxnOngoing || len(st.Partitions["t"]) != 1 || st.Partitions["t"][0] != 1 {
		t.Fatalf("state %+v", st)
	}
}

// A request arriving while the completion commits its Complete* state waits too:
// answered CONCURRENT_TRANSACTIONS, librdkafka would retry its AddPartitionsToTxn and
// send an abort's EndTxn as though it had been applied, which the completed
// transaction answers INVALID_TXN_STATE, fatal for the producer.
func TestRequestWaitsForTheCompleteWrite(t *testing.T) {
	h := newHarness(t)
	a := h.cl.id("a", 1)
	h.c.cfg.CompletionWait = time.Minute
	pid, epoch, _ := h.init(a, -1, -1)
	h.store.mu.Lock()
	h.store.holdComplete, h.store.completeHeld = make(chan struct{}), make(chan struct{}, 1)
	h.store.mu.Unlock()
	if err := h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if err := h.endV1(a, pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	<-h.store.completeHeld // the markers are written; CompleteCommit is being committed
	res := make(chan error, 1)
	go func() { res <- h.c.AddPartitions(bg, a, pid, epoch, map[string][]int32{"t": {1}}) }()
	h.eventually("AddPartitions waiting for the Complete* write", func() bool {
		buf := make([]byte, 1<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*Coordinator).awaitPrevious"))
	})
	close(h.store.holdComplete)
	if err := <-res; err != nil {
		t.Fatalf("AddPartitions after the completion: %v", err)
	}
	if st, _ := h.cl.state(a); st.Status != metadata.TxnOngoing || len(st.Partitions["t"]) != 1 || st.Partitions["t"][0] != 1 {
		t.Fatalf("state %+v", st)
	}
}

type fakeRemote struct {
	to   int32
	req  *kmsg.AddPartitionsToTxnRequest
	resp func(*kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
}

func (r *fakeRemote) AddPartitionsToTxn(_ context.Context, to metadata.Broker, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	r.to, r.req = to.ID, req
	return r.resp(req)
}

func TestVerifyAsksTheRemoteCoordinator(t *testing.T) {
	h := newHarness2(t)
	a := h.cl.id("a", 2)
	answer := func(top, part int16) func(*kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
		return func(req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
			resp := kmsg.NewPtrAddPartitionsToTxnResponse()
			resp.ErrorCode = top
			for _, tx := range req.Transactions {
				rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
				rt.TransactionalID = tx.TransactionalID
				for _, tt := range tx.Topics {
					rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
					rtt.Topic = tt.Topic
					for _, p := range tt.Partitions {
						rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
						rp.Partition, rp.ErrorCode = p, part
						rtt.Partitions = append(rtt.Partitions, rp)
					}
					rt.Topics = append(rt.Topics, rtt)
				}
				resp.Transactions = append(resp.Transactions, rt)
			}
			return resp, nil
		}
	}
	remote := &fakeRemote{resp: answer(0, 0)}
	v := &Verifier{Coordinator: h.c, Remote: remote}
	if err := v.VerifyAdded(bg, a, 7, 2, "t", 1); err != nil {
		t.Fatal(err)
	}
	tx := remote.req.Transactions
	if remote.to != 2 || remote.req.Version != 4 || len(tx) != 1 || !tx[0].VerifyOnly || tx[0].TransactionalID != a ||
		tx[0].ProducerID != 7 || tx[0].ProducerEpoch != 2 || tx[0].Topics[0].Topic != "t" || tx[0].Topics[0].Partitions[0] != 1 {
		t.Fatalf("request to broker %d: %+v", remote.to, remote.req)
	}
	remote.resp = answer(0, kerr.InvalidTxnState.Code)
	if err := v.VerifyAdded(bg, a, 7, 2, "t", 1); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("partition not in the transaction: %v", err)
	}
	// The coordinator moving or loading is retriable for a producer.
	remote.resp = answer(kerr.NotCoordinator.Code, 0)
	if err := v.VerifyAdded(bg, a, 7, 2, "t", 1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("coordinator moved: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	remote.resp = func(*kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
		return nil, errors.New("connection refused")
	}
	if err := v.VerifyAdded(bg, a, 7, 2, "t", 1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("coordinator unreachable: %v, want NOT_ENOUGH_REPLICAS", err)
	}
}
