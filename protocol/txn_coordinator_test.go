package protocol_test

import (
	"context"
	"errors"
	"fmt"
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

// startTxnBroker starts a broker with group and transaction coordinators.
func startTxnBroker(t testing.TB) *testBroker {
	t.Helper()
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	tcfg := txn.Config{NodeID: 1, Logger: quietLogger(), MarkerRetryBackoff: 10 * time.Millisecond}
	return launchTxn(t, t.TempDir(), nil, brokerConfig(), &gcfg, &tcfg)
}

func txnProducer(t *testing.T, tb *testBroker, id, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := tb.client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30 * time.Second)}, opts...)...)
	return cl
}

// readAll reads topic from the start with the isolation level until want records
// arrived, then a little longer to catch any extra.
func readAll(t *testing.T, tb *testBroker, topic string, committed bool, want int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := tb.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	extra := time.Time{}
	for {
		if len(got) >= want && extra.IsZero() {
			extra = time.Now().Add(300 * time.Millisecond)
		}
		if (!extra.IsZero() && time.Now().After(extra)) || time.Now().After(deadline) {
			return got
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
}

func produceN(t *testing.T, cl *kgo.Client, prefix string, n int) {
	t.Helper()
	ctx := ctxTimeout(t, 20*time.Second)
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
			t.Fatalf("produce %s-%d: %v", prefix, i, err)
		}
	}
}

func TestTransactionalProducerCommitAndAbort(t *testing.T) {
	tb := startTxnBroker(t)
	tb.createTopic("tx", 2, nil)
	cl := txnProducer(t, tb, "p1", "tx", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxTimeout(t, 30*time.Second)

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "committed", 10)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "aborted", 5)
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	// A third transaction right after the abort: the coordinator answers
	// CONCURRENT_TRANSACTIONS until the abort's markers are written, and the client
	// retries.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "third", 2)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("third commit: %v", err)
	}

	got := readAll(t, tb, "tx", true, 12)
	if len(got) != 12 {
		t.Fatalf("read_committed saw %d records, want the 12 committed: %v", len(got), got)
	}
	for _, v := range got {
		if len(v) >= 7 && v[:7] == "aborted" {
			t.Fatalf("read_committed saw aborted record %q", v)
		}
	}
	if all := readAll(t, tb, "tx", false, 17); len(all) != 17 {
		t.Fatalf("read_uncommitted saw %d records, want 17", len(all))
	}

	// The coordinator describes and lists the transactional id.
	adm := kadm.NewClient(tb.client())
	desc, err := adm.DescribeTransactions(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := desc["p1"]
	if !ok || d.Err != nil || d.State != "CompleteCommit" || d.ProducerID < 0 {
		t.Fatalf("DescribeTransactions: %+v", desc)
	}
	list, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := list["p1"]; !ok {
		t.Fatalf("ListTransactions: %+v", list)
	}
}

func TestZombieProducerIsFenced(t *testing.T) {
	tb := startTxnBroker(t)
	tb.createTopic("tz", 2, nil)
	ctx := ctxTimeout(t, 30*time.Second)
	zombie := txnProducer(t, tb, "z", "tz", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, zombie, "zombie", 4)

	// The producer's replacement starts with the same transactional id: its
	// InitProducerId aborts the zombie's transaction and bumps the epoch.
	fresh := txnProducer(t, tb, "z", "tz", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, fresh, "fresh", 4)
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("fresh commit: %v", err)
	}

	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	got := readAll(t, tb, "tz", true, 4)
	if len(got) != 4 {
		t.Fatalf("read_committed saw %v, want the 4 fresh records", got)
	}
	for _, v := range got {
		if v[:5] != "fresh" {
			t.Fatalf("read_committed saw the zombie's %q", v)
		}
	}
}

func TestTxnOffsetCommitVisibleOnlyAfterCommit(t *testing.T) {
	tb := startTxnBroker(t)
	tb.createTopic("to", 1, nil)
	ctx := ctxTimeout(t, 30*time.Second)
	cl := txnProducer(t, tb, "o", "to")
	adm := kadm.NewClient(tb.client())
	committed := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup("to", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	txnCommit := func(offset int64) {
		t.Helper()
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "o", pid, epoch, "g"
		resp, err := add.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
		}
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "o", "g", pid, epoch
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "to"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		cresp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := cresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
		}
	}

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "x", 1)
	txnCommit(5)
	if got := committed(); got != -1 {
		t.Fatalf("offset %d visible before the commit", got)
	}
	// KIP-447: a consumer that requires stable offsets is told to wait.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group, fetch.RequireStable = "g", true
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "to", []int32{0}
	fetch.Topics = append(fetch.Topics, ft)
	fresp, err := fetch.RequestWith(ctx, tb.client())
	if err != nil {
		t.Fatal(err)
	}
	var code int16
	if fresp.Version >= 8 {
		code = fresp.Groups[0].Topics[0].Partitions[0].ErrorCode
	} else {
		code = fresp.Topics[0].Partitions[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("OffsetFetch with require_stable during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The commit completes (and the offsets appear) once the markers are written.
	deadline := time.Now().Add(10 * time.Second)
	for committed() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("offset %d after the commit, want 5", committed())
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "y", 1)
	txnCommit(9)
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	// The next transaction begins only after the abort completed.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "z", 1)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 5 {
		t.Fatalf("offset %d after an aborted TxnOffsetCommit, want 5", got)
	}
}

// TestGroupTransactSessionExactlyOnce runs franz-go's consume-transform-produce loop:
// every input record reaches the output exactly once, and the group's committed offsets
// move with the transactions.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	groupTransactExactlyOnce(t, startTxnBroker(t))
}

// groupTransactExactlyOnce consumes, transforms and produces 200 records in
// transactions with a GroupTransactSession and checks that the output holds each once.
func groupTransactExactlyOnce(t *testing.T, tb *testBroker, opts ...kgo.Opt) {
	tb.createTopic("in", 2, nil)
	tb.createTopic("out", 2, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	const n = 200
	in := tb.client(kgo.DefaultProduceTopic("in"))
	for i := range n {
		in.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := in.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(tb.addr), kgo.WithLogger(nil),
		kgo.TransactionalID("eos"), kgo.TransactionTimeout(30 * time.Second),
		kgo.ConsumerGroup("eos-group"), kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	seen := 0
	for round := 0; seen < n; round++ {
		if round > 1000 {
			t.Fatalf("only %d of %d records transformed", seen, n)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollFetches(pctx)
		cancel()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var batch int
		fs.EachRecord(func(r *kgo.Record) {
			batch++
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if committed {
			seen += batch
		}
	}
	got := readAll(t, tb, "out", true, n)
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	for i := range n {
		if c := count[fmt.Sprintf("out-%d", i)]; c != 1 {
			t.Fatalf("output has %d copies of record %d (%d records in all)", c, i, len(got))
		}
	}
	if len(got) != n {
		t.Fatalf("output has %d records, want %d", len(got), n)
	}
	adm := kadm.NewClient(tb.client())
	offs, err := adm.FetchOffsets(ctx, "eos-group")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != n {
		t.Fatalf("group committed %d offsets in all, want %d", total, n)
	}
}

// TestTransactionACLs: a transactional id needs WRITE on the TRANSACTIONAL_ID to be used
// and the topics WRITE to be added to a transaction.
func TestTransactionACLs(t *testing.T) {
	b := startACLBrokerTxn(t, false, &txn.Config{NodeID: 1, Logger: quietLogger()})
	b.topic(t, "secure")
	b.grant(t, kadm.NewACLs().Topics("secure").Allow("User:alice", "User:bob").Operations(kadm.OpWrite, kadm.OpDescribe))
	// The coordinator writes its markers as the inter-broker principal, which needs
	// CLUSTER_ACTION as replica fetchers do (here the client id stands for it).
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:shale-txn-coordinator-1").Operations(kadm.OpClusterAction))
	ctx := ctxTimeout(t, 30*time.Second)
	produce := func(user, id string) error {
		cl := b.as(user, kgo.TransactionalID(id), kgo.DefaultProduceTopic("secure"), kgo.RequestRetries(2))
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err := produce("alice", "tx-a"); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("without an ACL on the id: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	b.grant(t, kadm.NewACLs().TransactionalIDs("tx-a").Allow("User:alice").Operations(kadm.OpWrite))
	if err := produce("alice", "tx-a"); err != nil {
		t.Fatalf("with WRITE on the id and the topic: %v", err)
	}
	// WRITE on the id but not on the topic.
	b.topic(t, "other")
	cl := b.as("alice", kgo.TransactionalID("tx-a"), kgo.DefaultProduceTopic("other"), kgo.RequestRetries(2))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("adding a topic without WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// DescribeTransactions needs DESCRIBE on the id (WRITE implies it).
	// (kadm fails the whole call: FindCoordinator already refuses bob the id.)
	desc, err := b.adminAs("bob").DescribeTransactions(ctx, "tx-a")
	if err == nil {
		err = desc["tx-a"].Err
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("bob describes tx-a: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	desc, err = b.adminAs("alice").DescribeTransactions(ctx, "tx-a")
	if err != nil || desc["tx-a"].Err != nil {
		t.Fatalf("alice describes tx-a: %+v %v", desc, err)
	}
}

// TestAddPartitionsToTxnVersions: a client's v3 request answers an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED; a broker's v4
// VerifyOnly batch answers per partition whether it is in the transaction.
func TestAddPartitionsToTxnVersions(t *testing.T) {
	tb := startTxnBroker(t)
	tb.createTopic("va", 2, nil)
	ctx := ctxTimeout(t, 30*time.Second)
	cl := txnProducer(t, tb, "v", "va", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "v", 1) // adds va-0
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A client's versions stop at 3 (franz-go uses the highest the broker offers).
	v3 := kversion.Stable()
	v3.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	broker := tb.client(kgo.MaxVersions(v3)).Broker(1)

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "v", pid, epoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "va", Partitions: []int32{1}}, {Topic: "missing", Partitions: []int32{0}}}
	kresp, err := broker.Request(ctx, add)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	if codes["missing-0"] != kerr.UnknownTopicOrPartition.Code || codes["va-1"] != kerr.OperationNotAttempted.Code {
		t.Fatalf("v3 codes %v", codes)
	}

	broker = tb.client().Broker(1)
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "v", pid, epoch, true
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "va", Partitions: []int32{0, 1}}}
	verify.Transactions = append(verify.Transactions, tx)
	kresp, err = broker.Request(ctx, verify)
	if err != nil {
		t.Fatal(err)
	}
	vresp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if vresp.ErrorCode != 0 || len(vresp.Transactions) != 1 {
		t.Fatalf("v4 response %+v", vresp)
	}
	codes = map[string]int16{}
	for _, rt := range vresp.Transactions[0].Topics {
		for _, rp := range rt.Partitions {
			codes[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	if codes["va-0"] != 0 || codes["va-1"] != kerr.InvalidTxnState.Code {
		t.Fatalf("VerifyOnly codes %v: want va-0 in the transaction, va-1 INVALID_TXN_STATE", codes)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}
