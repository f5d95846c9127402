package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// fakeVerifier stands in for the transaction coordinator: it admits the partitions it
// was told were added, and counts the questions.
type fakeVerifier struct {
	mu    sync.Mutex
	added map[string]bool // "txnID/topic/partition"
	asked int
}

func (f *fakeVerifier) add(txnID, topic string, p int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.added == nil {
		f.added = map[string]bool{}
	}
	f.added[fmt.Sprintf("%s/%s/%d", txnID, topic, p)] = true
}

func (f *fakeVerifier) VerifyAdded(_ context.Context, txnID string, _ int64, _ int16, topic string, p int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if !f.added[fmt.Sprintf("%s/%s/%d", txnID, topic, p)] {
		return fmt.Errorf("%w: not in the transaction", kerr.InvalidTxnState)
	}
	return nil
}

func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []records.Record
	for i, v := range values {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	now := time.Now().UnixMilli()
	b, err := records.Build(shalelog.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: now, MaxTimestamp: now,
		PartitionLeaderEpoch: -1, Attributes: shalelog.AttrTransactional}, 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceTxn(t *testing.T, rc *rawConn, txnID, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 5000
	req.TransactionID = &txnID
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	return rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func writeMarker(t *testing.T, rc *rawConn, topic string, pid int64, epoch int16, commit bool, coordEpoch int32) int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: []int32{0}}}
	req.Markers = append(req.Markers, m)
	resp := rc.roundTrip(req).(*kmsg.WriteTxnMarkersResponse)
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// fetchIso fetches partition 0 of topic from offset with isolation level iso and
// returns the partition's answer.
func fetchIso(t *testing.T, rc *rawConn, topicID [16]byte, offset int64, iso int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = iso
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = offset, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp := rc.roundTrip(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch: %d", resp.ErrorCode)
	}
	return resp.Topics[0].Partitions[0]
}

// dataValues decodes the non-control records of a fetch's batches.
func dataValues(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	for len(raw) > 0 {
		h, err := shalelog.ParseHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := records.Records(raw[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() {
			for _, r := range recs {
				out = append(out, string(r.Value))
			}
		}
		raw = raw[h.Size():]
	}
	return out
}

// describeProducer returns what DescribeProducers says of producer pid on partition 0.
func describeProducer(t *testing.T, rc *rawConn, topic string, pid int64) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	rp := rc.roundTrip(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		t.Fatalf("DescribeProducers: %d", rp.ErrorCode)
	}
	for _, ap := range rp.ActiveProducers {
		if ap.ProducerID == pid {
			return ap
		}
	}
	t.Fatalf("DescribeProducers does not list producer %d: %+v", pid, rp.ActiveProducers)
	return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
}

func listLatest(t *testing.T, rc *rawConn, topic string, iso int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 5
	req.ReplicaID = -1
	req.IsolationLevel = iso
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
	lt.Partitions = append(lt.Partitions, lp)
	req.Topics = append(req.Topics, lt)
	rp := rc.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		t.Fatalf("list offsets: %d", rp.ErrorCode)
	}
	return rp.Offset
}

// TestTransactionalPartition drives one partition through an aborted and a committed
// transaction with raw requests: transactional produce verified by the coordinator
// (a fake), markers, and what read_committed and read_uncommitted consumers see.
func TestTransactionalPartition(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("txn", 1, nil)
	topicID := tb.broker.Image().Topic("txn").ID
	rc := dialRaw(t, tb.addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	ir := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatal(ir.ErrorCode)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	// Without a coordinator to verify with, a transactional write is refused.
	if p := produceTxn(t, rc, "tx", "txn", txnBatch(t, pid, epoch, 0, "a")); p.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("without a verifier: %d", p.ErrorCode)
	}
	v := &fakeVerifier{}
	tb.broker.SetTxnVerifier(v)
	// The coordinator does not know the partition is in the transaction.
	if p := produceTxn(t, rc, "tx", "txn", txnBatch(t, pid, epoch, 0, "a")); p.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("unverified: %d", p.ErrorCode)
	}
	v.add("tx", "txn", 0)
	if p := produceTxn(t, rc, "tx", "txn", txnBatch(t, pid, epoch, 0, "a1", "a2")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first write: code %d at %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceTxn(t, rc, "tx", "txn", txnBatch(t, pid, epoch, 2, "a3")); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("second write: code %d at %d", p.ErrorCode, p.BaseOffset)
	}
	if v.asked != 2 {
		t.Errorf("the coordinator was asked %d times; once per transaction and partition is enough (plus the refusal)", v.asked)
	}
	// A plain producer writes around the transaction.
	if p := produceRaw(t, rc, "txn", 0, makeBatch(t, -1, -1, -1, 1, 3)); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("plain write: code %d at %d", p.ErrorCode, p.BaseOffset)
	}

	// Open transaction: read_committed stops at its first offset.
	rp := fetchIso(t, rc, topicID, 0, 1)
	if rp.HighWatermark != 4 || rp.LastStableOffset != 0 || len(dataValues(t, rp.RecordBatches)) != 0 {
		t.Fatalf("open: hw %d lso %d values %v", rp.HighWatermark, rp.LastStableOffset, dataValues(t, rp.RecordBatches))
	}
	if rp := fetchIso(t, rc, topicID, 0, 0); rp.LastStableOffset != 0 || len(dataValues(t, rp.RecordBatches)) != 4 {
		t.Fatalf("read_uncommitted while open: lso %d values %v", rp.LastStableOffset, dataValues(t, rp.RecordBatches))
	}
	if got := listLatest(t, rc, "txn", 1); got != 0 {
		t.Errorf("ListOffsets read_committed latest %d, want the LSO 0", got)
	}
	if got := listLatest(t, rc, "txn", 0); got != 4 {
		t.Errorf("ListOffsets read_uncommitted latest %d, want 4", got)
	}

	// A marker from an older coordinator epoch is fenced once a newer one was seen.
	if code := writeMarker(t, rc, "txn", pid, epoch, false, 5); code != 0 {
		t.Fatalf("abort marker: %d", code)
	}
	if code := writeMarker(t, rc, "txn", pid, epoch, false, 4); code != kerr.TransactionCoordinatorFenced.Code {
		t.Errorf("stale coordinator: %d", code)
	}
	rp = fetchIso(t, rc, topicID, 0, 1)
	if rp.LastStableOffset != 5 || rp.HighWatermark != 5 {
		t.Fatalf("aborted: hw %d lso %d", rp.HighWatermark, rp.LastStableOffset)
	}
	if len(rp.AbortedTransactions) != 1 || rp.AbortedTransactions[0].ProducerID != pid || rp.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v", rp.AbortedTransactions)
	}

	// The next transaction needs verifying again, and commits.
	v.mu.Lock()
	asked := v.asked
	v.mu.Unlock()
	if p := produceTxn(t, rc, "tx", "txn", txnBatch(t, pid, epoch, 3, "b1")); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("second transaction: code %d at %d", p.ErrorCode, p.BaseOffset)
	}
	if v.asked != asked+1 {
		t.Errorf("a new transaction was not verified")
	}
	// Non-transactional writes of a producer inside its transaction are refused.
	if p := produceRaw(t, rc, "txn", 0, makeBatch(t, pid, epoch, 4, 1, 3)); p.ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("non-transactional write in a transaction: %d", p.ErrorCode)
	}
	if ap := describeProducer(t, rc, "txn", pid); ap.CurrentTxnStartOffset != 5 || ap.CoordinatorEpoch != 5 || ap.LastSequence != 3 || ap.ProducerEpoch != int32(epoch) {
		t.Errorf("DescribeProducers in the transaction: %+v", ap)
	}
	if code := writeMarker(t, rc, "txn", pid, epoch, true, 5); code != 0 {
		t.Fatalf("commit marker: %d", code)
	}
	if ap := describeProducer(t, rc, "txn", pid); ap.CurrentTxnStartOffset != -1 {
		t.Errorf("DescribeProducers after the commit: %+v", ap)
	}
	rp = fetchIso(t, rc, topicID, 5, 1)
	if rp.LastStableOffset != 7 || len(rp.AbortedTransactions) != 0 {
		t.Fatalf("committed: lso %d aborted %+v", rp.LastStableOffset, rp.AbortedTransactions)
	}
	if got := dataValues(t, rp.RecordBatches); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("committed values %v", got)
	}
	// A late write of the ended transaction is refused (KIP-890): the partition asks
	// the coordinator again, which no longer has it.
	v.mu.Lock()
	v.added = nil
	v.mu.Unlock()
	if p := produceTxn(t, rc, "tx", "txn", txnBatch(t, pid, epoch, 4, "late")); p.ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("late write: %d", p.ErrorCode)
	}
	// Markers of an older producer epoch are refused.
	if code := writeMarker(t, rc, "txn", pid, epoch-1, true, 6); epoch > 0 && code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("old producer epoch marker: %d", code)
	}

	// A read_committed franz-go consumer sees the plain record and the commit only.
	cl := tb.client(kgo.ConsumeTopics("txn"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	ctx := ctxTimeout(t, 10*time.Second)
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %q before timing out", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 2 || got[0] != "xxx" || got[1] != "b1" {
		t.Fatalf("read_committed consumer got %q", got)
	}
}

// A transactional produce needs WRITE on its transactional id besides WRITE on the
// topic; WriteTxnMarkers is for brokers: CLUSTER_ACTION on the cluster.
func TestACLsTransactionalPartition(t *testing.T) {
	b := startACLBroker(t, false)
	b.topic(t, "tx")
	b.grant(t, kadm.NewACLs().Topics("tx").Allow("User:w").Operations(kadm.OpWrite))
	send := func(user string, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := b.as(user).SeedBrokers()[0].Request(ctxTimeout(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	produce := func() int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
		id := "id"
		req.TransactionID = &id
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "tx", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: txnBatch(t, 1, 0, 0, "v")}}}}
		return send("w", req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("without WRITE on the transactional id: %d", code)
	}
	b.grant(t, kadm.NewACLs().TransactionalIDs("id").Allow("User:w").Operations(kadm.OpWrite))
	// Authorized now; refused only because no coordinator verifies it.
	if code := produce(); code != kerr.InvalidTxnState.Code {
		t.Errorf("with WRITE on the transactional id: %d", code)
	}
	markers := func(user string) int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed = 1, true
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "tx", Partitions: []int32{0}}}
		req.Markers = append(req.Markers, m)
		return send(user, req).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	if code := markers("w"); code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("markers without CLUSTER_ACTION: %d", code)
	}
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:broker2").Operations(kadm.OpClusterAction))
	if code := markers("broker2"); code != 0 {
		t.Errorf("markers with CLUSTER_ACTION: %d", code)
	}
}

// A read_committed long poll parked behind an open transaction wakes when the commit
// marker moves the last stable offset.
func TestReadCommittedLongPollWakesOnCommit(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("lp", 1, nil)
	v := &fakeVerifier{}
	v.add("tx", "lp", 0)
	tb.broker.SetTxnVerifier(v)
	rc := dialRaw(t, tb.addr)
	if p := produceTxn(t, rc, "tx", "lp", txnBatch(t, 1, 0, 0, "a")); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	// The fetch goes on a connection of its own and parks: nothing is committed yet.
	fc := dialRaw(t, tb.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 13, -1, 1<<20, -1
	req.IsolationLevel, req.MinBytes, req.MaxWaitMillis = 1, 1, 60000
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = tb.broker.Image().Topic("lp").ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	fc.send(req)
	// Give the fetch time to park (should it not have, it finds the commit at once).
	time.Sleep(300 * time.Millisecond)
	if code := writeMarker(t, rc, "lp", 1, 0, true, 0); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	// readBody gives up after 5 s, far before the fetch's 60 s wait would end.
	_, body, err := fc.readBody()
	if err != nil {
		t.Fatalf("the parked read_committed fetch did not wake: %v", err)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	rp := resp.Topics[0].Partitions[0]
	if got := dataValues(t, rp.RecordBatches); len(got) != 1 || got[0] != "a" || rp.LastStableOffset != 2 {
		t.Fatalf("long poll answered %q with LSO %d", got, rp.LastStableOffset)
	}
}
