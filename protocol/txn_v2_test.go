package protocol_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
)

// startTxnBrokerAt starts a broker with group and transaction coordinators that
// finalizes transaction.version at level.
func startTxnBrokerAt(t testing.TB, level int16) *testBroker {
	t.Helper()
	cfg := brokerConfig()
	cfg.TransactionVersion = level
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	tcfg := txn.Config{NodeID: 1, Logger: quietLogger(), MarkerRetryBackoff: 10 * time.Millisecond}
	return launchTxn(t, t.TempDir(), nil, cfg, &gcfg, &tcfg)
}

// requestCounter counts the requests a client writes, by key.
type requestCounter struct {
	mu sync.Mutex
	n  map[int16]int
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[int16]int{}
	}
	c.n[key]++
}

func (c *requestCounter) count(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key.Int16()]
}

// TestTransactionVersionFeature: ApiVersions advertises transaction.version 0-2 and
// finalizes the configured level; the KIP-890 part 2 versions are advertised only at 2.
func TestTransactionVersionFeature(t *testing.T) {
	for _, level := range []int16{0, 1, 2} {
		tb := startTxnBrokerAt(t, level)
		ctx := ctxTimeout(t, 10*time.Second)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 4
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		kresp, err := tb.client().Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.ApiVersionsResponse)
		if resp.Version != 4 {
			t.Fatalf("ApiVersions answered at v%d, want v4", resp.Version)
		}
		supported := false
		for _, f := range resp.SupportedFeatures {
			if f.Name == "transaction.version" && f.MinVersion == 0 && f.MaxVersion == 2 {
				supported = true
			}
		}
		if !supported {
			t.Errorf("level %d: supported features %+v lack transaction.version 0-2", level, resp.SupportedFeatures)
		}
		// v3 leaves out supported features whose minimum is 0 (older Java clients
		// reject them), and still finalizes them.
		v3 := kversion.Stable()
		v3.SetMaxKeyVersion(kmsg.ApiVersions.Int16(), 3)
		kresp, err = tb.client(kgo.MaxVersions(v3)).Broker(1).Request(ctx, kmsg.NewPtrApiVersionsRequest())
		if err != nil {
			t.Fatal(err)
		}
		if r3 := kresp.(*kmsg.ApiVersionsResponse); r3.Version != 3 || len(r3.SupportedFeatures) != 0 || len(r3.FinalizedFeatures) != len(resp.FinalizedFeatures) {
			t.Errorf("level %d: v%d answer has supported %+v finalized %+v", level, r3.Version, r3.SupportedFeatures, r3.FinalizedFeatures)
		}
		finalized := int16(0)
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				finalized = f.MaxVersionLevel
			}
		}
		if finalized != level || resp.FinalizedFeaturesEpoch < 0 {
			t.Errorf("level %d: finalized transaction.version %d at epoch %d", level, finalized, resp.FinalizedFeaturesEpoch)
		}
		maxOf := map[int16]int16{}
		for _, k := range resp.ApiKeys {
			maxOf[k.ApiKey] = k.MaxVersion
		}
		wantProduce, wantEnd, wantAdd, wantOffsets := int16(9), int16(3), int16(4), int16(3)
		if level == 2 {
			wantProduce, wantEnd, wantAdd, wantOffsets = 12, 5, 5, 5
		}
		if maxOf[kmsg.Produce.Int16()] != wantProduce || maxOf[kmsg.EndTxn.Int16()] != wantEnd || maxOf[kmsg.AddPartitionsToTxn.Int16()] != wantAdd ||
			maxOf[kmsg.TxnOffsetCommit.Int16()] != wantOffsets {
			t.Errorf("level %d: Produce max %d, EndTxn max %d, AddPartitionsToTxn max %d, TxnOffsetCommit max %d; want %d, %d, %d, %d", level,
				maxOf[kmsg.Produce.Int16()], maxOf[kmsg.EndTxn.Int16()], maxOf[kmsg.AddPartitionsToTxn.Int16()], maxOf[kmsg.TxnOffsetCommit.Int16()],
				wantProduce, wantEnd, wantAdd, wantOffsets)
		}
	}
}

// transactCommitAbortCommit runs three transactions (commit, abort, commit) over two
// partitions and returns the producer's id and epoch before each transaction ended and
// after the last.
func transactCommitAbortCommit(t *testing.T, cl *kgo.Client) (pids []int64, epochs []int16) {
	t.Helper()
	ctx := ctxTimeout(t, 60*time.Second)
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		prefix := "committed"
		if !end {
			prefix = "aborted"
		}
		produceN(t, cl, prefix+string(rune('a'+i)), 4)
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids, epochs = append(pids, pid), append(epochs, epoch)
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatalf("transaction %d end (commit %v): %v", i, end, err)
		}
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return append(pids, pid), append(epochs, epoch)
}

func checkCommittedOnly(t *testing.T, tb *testBroker, topic string) {
	t.Helper()
	got := readAll(t, tb, topic, true, 8)
	if len(got) != 8 {
		t.Fatalf("read_committed saw %d records, want the 8 committed: %v", len(got), got)
	}
	seen := map[string]bool{}
	for _, v := range got {
		if strings.HasPrefix(v, "aborted") || seen[v] {
			t.Fatalf("read_committed saw %q (aborted or twice): %v", v, got)
		}
		seen[v] = true
	}
	if all := readAll(t, tb, topic, false, 12); len(all) != 12 {
		t.Fatalf("read_uncommitted saw %d records, want 12", len(all))
	}
}

// TestTransactionsV2FranzGo: franz-go opts in to transactions v2 when the broker
// finalizes transaction.version 2: its produces join the transaction without
// AddPartitionsToTxn, every EndTxn bumps the producer epoch, and read_committed sees
// the committed transactions exactly once.
func TestTransactionsV2FranzGo(t *testing.T) {
	tb := startTxnBrokerAt(t, 2)
	tb.createTopic("tx2", 2, nil)
	var reqs requestCounter
	cl := txnProducer(t, tb, "p2", "tx2", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(&reqs))
	// franz-go decides at BeginTransaction from the ApiVersions it has seen (a client
	// that has talked to no broker yet runs its first transaction as v1 and opts in at
	// its end): talk to the broker first.
	if err := cl.Ping(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	pids, epochs := transactCommitAbortCommit(t, cl)
	for i := 1; i < len(epochs); i++ {
		if pids[i] != pids[0] || epochs[i] != epochs[i-1]+1 {
			t.Fatalf("producer ids %v epochs %v: want one id, its epoch bumped by every EndTxn", pids, epochs)
		}
	}
	if n := reqs.count(kmsg.AddPartitionsToTxn); n != 0 {
		t.Errorf("the client sent %d AddPartitionsToTxn: it did not use transactions v2", n)
	}
	checkCommittedOnly(t, tb, "tx2")

	// The coordinator holds the epoch the client continues with.
	ctx := ctxTimeout(t, 10*time.Second)
	desc, err := kadm.NewClient(tb.client()).DescribeTransactions(ctx, "p2")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := desc["p2"]
	if !ok || d.Err != nil || d.ProducerID != pids[0] || d.ProducerEpoch != epochs[len(epochs)-1] || d.State != "CompleteCommit" {
		t.Fatalf("DescribeTransactions: %+v", desc)
	}

	// A late write of an ended transaction (its epoch) cannot start one: the implicit
	// add is fenced and the partition refuses it.
	prod := kmsg.NewPtrProduceRequest()
	id := "p2"
	prod.TransactionID, prod.Acks, prod.TimeoutMillis = &id, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "tx2"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 1, txnBatch(t, pids[2], epochs[2], 100, "late")
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	kresp, err := tb.client().Broker(1).Request(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	presp := kresp.(*kmsg.ProduceResponse)
	if presp.Version < 12 {
		t.Fatalf("produce answered at v%d, want v12", presp.Version)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("late write at the ended epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	desc, err = kadm.NewClient(tb.client()).DescribeTransactions(ctx, "p2")
	if err != nil {
		t.Fatal(err)
	}
	if d := desc["p2"]; d.State != "CompleteCommit" || d.ProducerEpoch != epochs[len(epochs)-1] {
		t.Fatalf("after the late write: %+v", d)
	}
	checkCommittedOnly(t, tb, "tx2")
}

// TestTransactionsV1ClientOnV2Broker: a client whose versions stop below KIP-890 part 2
// keeps transactions v1 on a transaction.version 2 broker: AddPartitionsToTxn, one
// epoch for every transaction.
func TestTransactionsV1ClientOnV2Broker(t *testing.T) {
	tb := startTxnBrokerAt(t, 2)
	tb.createTopic("tx1", 2, nil)
	var reqs requestCounter
	cl := txnProducer(t, tb, "p1", "tx1", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(&reqs),
		kgo.MaxVersions(kversion.V3_9_0()))
	pids, epochs := transactCommitAbortCommit(t, cl)
	for i := range epochs {
		if pids[i] != pids[0] || epochs[i] != epochs[0] {
			t.Fatalf("producer ids %v epochs %v: a v1 client's epoch must not change", pids, epochs)
		}
	}
	if n := reqs.count(kmsg.AddPartitionsToTxn); n == 0 {
		t.Error("the v1 client sent no AddPartitionsToTxn")
	}
	checkCommittedOnly(t, tb, "tx1")
}

// TestGroupTransactSessionExactlyOnceV2: consume-transform-produce with offsets in the
// transaction, under transactions v2.
func TestGroupTransactSessionExactlyOnceV2(t *testing.T) {
	tb := startTxnBrokerAt(t, 2)
	var reqs requestCounter
	groupTransactExactlyOnce(t, tb, kgo.WithHooks(&reqs))
	if n := reqs.count(kmsg.AddPartitionsToTxn); n != 0 {
		t.Errorf("the session sent %d AddPartitionsToTxn: it did not use transactions v2", n)
	}
	// TxnOffsetCommit v5 added the group: no AddOffsetsToTxn either.
	if n := reqs.count(kmsg.AddOffsetsToTxn); n != 0 || reqs.count(kmsg.TxnOffsetCommit) == 0 {
		t.Errorf("the session sent %d AddOffsetsToTxn and %d TxnOffsetCommit: want only the latter", n, reqs.count(kmsg.TxnOffsetCommit))
	}
	if reqs.count(kmsg.EndTxn) == 0 {
		t.Fatal("no EndTxn sent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := kadm.NewClient(tb.client()).DescribeTransactions(ctx, "eos")
	if err != nil {
		t.Fatal(err)
	}
	// InitProducerId gave epoch 0; the EndTxns bumped it.
	if d := desc["eos"]; d.Err != nil || d.ProducerEpoch < 1 {
		t.Fatalf("epoch %d after %d EndTxn: %+v", d.ProducerEpoch, reqs.count(kmsg.EndTxn), d)
	}
}

// markerRacingAdder admits every write, and on its first question writes the marker
// that ends the producer's previous transaction, as a coordinator completing it while a
// partition leader asks would.
type markerRacingAdder struct {
	mu     sync.Mutex
	asked  int
	marker func()
}

func (a *markerRacingAdder) ask() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked++
	if a.asked == 1 {
		a.marker()
	}
}

func (a *markerRacingAdder) VerifyAdded(context.Context, string, int64, int16, string, int32) error {
	a.ask()
	return nil
}

func (a *markerRacingAdder) AddToTxn(context.Context, string, int64, int16, string, int32) error {
	a.ask()
	return nil
}

// TestNextTransactionWriteRacingTheMarker: under transactions v2 the next transaction's
// first write (at the bumped epoch) can reach the partition while the previous
// transaction is open there, and its marker (at the same bumped epoch) can land while
// the leader asks the coordinator. The write must not join the open transaction, and
// the leader asks again after the marker (Produce v12); a Produce v9 (transactions v1)
// is refused instead, as before.
func TestNextTransactionWriteRacingTheMarker(t *testing.T) {
	for _, version := range []int16{12, 9} {
		tb := startTxnBrokerAt(t, 2)
		topic := fmt.Sprintf("race%d", version)
		tb.createTopic(topic, 1, nil)
		rc := dialRaw(t, tb.addr)
		init := kmsg.NewPtrInitProducerIDRequest()
		init.Version = 4
		ir := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
		if ir.ErrorCode != 0 {
			t.Fatal(ir.ErrorCode)
		}
		pid, epoch := ir.ProducerID, ir.ProducerEpoch
		v := &fakeVerifier{}
		v.add("tx", topic, 0)
		tb.broker.SetTxnVerifier(v)
		if p := produceTxn(t, rc, "tx", topic, txnBatch(t, pid, epoch, 0, "first")); p.ErrorCode != 0 {
			t.Fatalf("v%d: first transaction's write: %v", version, kerr.ErrorForCode(p.ErrorCode))
		}
		markerConn := dialRaw(t, tb.addr)
		adder := &markerRacingAdder{marker: func() {
			if code := writeMarker(t, markerConn, topic, pid, epoch+1, true, 0); code != 0 {
				t.Errorf("marker: %v", kerr.ErrorForCode(code))
			}
		}}
		tb.broker.SetTxnVerifier(adder)
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = version, -1, 5000
		id := "tx"
		req.TransactionID = &id
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0,
			Records: txnBatch(t, pid, epoch+1, 0, "second")}}}}
		p := rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if version == 9 {
			if p.ErrorCode != kerr.InvalidTxnState.Code || adder.asked != 1 {
				t.Fatalf("v9 write whose verification the marker cancelled: %v after %d questions, want INVALID_TXN_STATE after 1",
					kerr.ErrorForCode(p.ErrorCode), adder.asked)
			}
			continue
		}
		// The first transaction is the write at 0 and its marker at 1; the second
		// starts after them.
		if p.ErrorCode != 0 || p.BaseOffset != 2 || adder.asked != 2 {
			t.Fatalf("v12 write: %v at %d after %d questions, want success at 2 after 2", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, adder.asked)
		}
		topicID := tb.broker.Image().Topic(topic).ID
		if rp := fetchIso(t, rc, topicID, 0, 1); rp.LastStableOffset != 2 {
			t.Fatalf("last stable offset %d: the second transaction (open, from 2) must hold it at 2", rp.LastStableOffset)
		}
	}
}
