package protocol_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/protocol"
)

func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	c.Write(&d)
	return d.GetCounter().GetValue()
}

// longPollFetch is a consumer Fetch v12 of the given partitions of topic from offset 0.
func longPollFetch(topic string, minBytes, maxWaitMs int32, partitions ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.SessionEpoch = 12, -1, -1
	req.MinBytes, req.MaxWaitMillis, req.MaxBytes = minBytes, maxWaitMs, 50<<20
	ft := kmsg.FetchRequestTopic{Topic: topic}
	for _, p := range partitions {
		ft.Partitions = append(ft.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: 0, PartitionMaxBytes: 1 << 20,
			CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1})
	}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	return req
}

// readFetchResponse reads the answer to req from rc (it gives up after 5 s).
func readFetchResponse(t *testing.T, rc *rawConn, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	_, body, err := rc.readBody()
	if err != nil {
		t.Fatalf("no fetch response: %v", err)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

// produceEach produces values one per batch (ProduceSync of one record at a time).
func produceEach(t *testing.T, cl *kgo.Client, partition int32, values ...string) {
	t.Helper()
	for _, v := range values {
		r := &kgo.Record{Value: []byte(v), Partition: partition}
		if err := cl.ProduceSync(ctxTimeout(t, 5*time.Second), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// A long poll with a MinBytes many appends must make up is woken by every append but
// reads the log again only once the bytes appended could meet MinBytes; it then answers
// at once, with everything appended since it parked.
func TestFetchLongPollRereadsOnlyWhenMinBytesCouldBeMet(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withMetrics(m))
	tb.createTopic("lp", 1, nil)
	cl := tb.client(kgo.DefaultProduceTopic("lp"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceEach(t, cl, 0, "warm") // the client's metadata and producer id, before the fetch parks

	const minBytes = 8 << 10
	rc := dialRaw(t, tb.addr)
	req := longPollFetch("lp", minBytes, 60_000, 0)
	req.Topics[0].Partitions[0].FetchOffset = 1
	rc.send(req)
	testutil.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return gaugeValue(m.FetchPollWaiting) == 1 })

	// Twenty batches of about 170 bytes: 3.4 KiB, far below MinBytes.
	var want []string
	small := string(bytes.Repeat([]byte("s"), 100))
	for i := range 20 {
		v := fmt.Sprintf("%02d%s", i, small)
		want = append(want, v)
		produceEach(t, cl, 0, v)
	}
	testutil.Eventually(t, 10*time.Second, "the appends to wake the fetch", func() bool { return counterValue(m.FetchPollWakes) >= 1 })
	if got := counterValue(m.FetchPollRereads); got != 0 {
		t.Fatalf("the parked fetch read the log %v times before MinBytes could be met", got)
	}
	if got := gaugeValue(m.FetchPollWaiting); got != 1 {
		t.Fatalf("%v fetches parked, want the one still waiting", got)
	}

	// One batch that brings the total past MinBytes: the fetch reads once and answers,
	// long before its 60 s wait.
	big := string(bytes.Repeat([]byte("b"), minBytes))
	want = append(want, big)
	produceEach(t, cl, 0, big)
	resp := readFetchResponse(t, rc, req)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 22 {
		t.Fatalf("partition %+v", p)
	}
	if got := dataValues(t, p.RecordBatches); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fetched %d records, want the %d appended since it parked", len(got), len(want))
	}
	if got := counterValue(m.FetchPollRereads); got != 1 {
		t.Fatalf("%v re-reads, want exactly the one that answered", got)
	}
	if got := counterValue(m.FetchPollWakes); got < 2 {
		t.Fatalf("%v wake-ups", got)
	}
}

// MinBytes never met: the fetch answers at MaxWait with whatever there is.
func TestFetchLongPollAnswersAtMaxWaitWithWhatThereIs(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withMetrics(m))
	tb.createTopic("mw", 1, nil)
	cl := tb.client(kgo.DefaultProduceTopic("mw"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rc := dialRaw(t, tb.addr)
	req := longPollFetch("mw", 1<<20, 2000, 0)
	rc.send(req)
	testutil.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return gaugeValue(m.FetchPollWaiting) == 1 })
	produceEach(t, cl, 0, "a", "b", "c")
	resp := readFetchResponse(t, rc, req)
	p := resp.Topics[0].Partitions[0]
	if got := dataValues(t, p.RecordBatches); p.ErrorCode != 0 || fmt.Sprint(got) != "[a b c]" || p.HighWatermark != 3 {
		t.Fatalf("answered %v (error %d, high watermark %d), want [a b c]", got, p.ErrorCode, p.HighWatermark)
	}
	if got := counterValue(m.FetchPollRereads); got != 0 {
		t.Fatalf("%v re-reads on wake-up; only the deadline's read was due", got)
	}
}

// The bytes that make up MinBytes may come from several partitions, none enough alone.
func TestFetchLongPollSumsPartitions(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withMetrics(m))
	tb.createTopic("sum", 2, nil)
	cl := tb.client(kgo.DefaultProduceTopic("sum"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceEach(t, cl, 0, "warm")
	rc := dialRaw(t, tb.addr)
	req := longPollFetch("sum", 1500, 60_000, 0, 1)
	req.Topics[0].Partitions[0].FetchOffset = 1
	rc.send(req)
	testutil.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return gaugeValue(m.FetchPollWaiting) == 1 })
	v := string(bytes.Repeat([]byte("x"), 1000))
	produceEach(t, cl, 0, "0"+v)
	produceEach(t, cl, 1, "1"+v)
	resp := readFetchResponse(t, rc, req)
	for i, p := range resp.Topics[0].Partitions {
		if got := dataValues(t, p.RecordBatches); p.ErrorCode != 0 || len(got) != 1 || got[0][0] != byte('0'+i) {
			t.Fatalf("partition %d answered %d records (error %d)", i, len(got), p.ErrorCode)
		}
	}
}

// A change other than data answers a parked fetch at once, as before the byte counts:
// here the topic is deleted under it.
func TestFetchLongPollAnswersAtOnceWhenItsPartitionGoes(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withMetrics(m))
	tb.createTopic("gone", 1, nil)
	rc := dialRaw(t, tb.addr)
	req := longPollFetch("gone", 1<<20, 60_000, 0)
	rc.send(req)
	testutil.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return gaugeValue(m.FetchPollWaiting) == 1 })
	if _, err := tb.admin().DeleteTopics(ctxTimeout(t, 5*time.Second), "gone"); err != nil {
		t.Fatal(err)
	}
	resp := readFetchResponse(t, rc, req)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode == 0 {
		t.Fatalf("a fetch of a deleted topic answered without an error: %+v", p)
	}
}

// read_committed behind an open transaction: appends past it wake the fetch but cannot
// add to what it may read, so it does not read again until the commit moves the last
// stable offset; then it answers with everything up to it.
func TestFetchLongPollReadCommittedWaitsForTheLastStableOffset(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withoutAutoCreate(), withMetrics(m))
	tb.createTopic("rc", 1, nil)
	v := &fakeVerifier{}
	v.add("tx", "rc", 0)
	tb.broker.SetTxnVerifier(v)
	rc := dialRaw(t, tb.addr)
	if p := produceTxn(t, rc, "tx", "rc", txnBatch(t, 1, 0, 0, "t")); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	fc := dialRaw(t, tb.addr)
	req := longPollFetch("rc", 2000, 60_000, 0)
	req.IsolationLevel = 1
	fc.send(req)
	testutil.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return gaugeValue(m.FetchPollWaiting) == 1 })
	for range 4 {
		if p := produceRaw(t, rc, "rc", 0, makeBatch(t, -1, -1, -1, 1, 1000)); p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the appends to wake the fetch", func() bool { return counterValue(m.FetchPollWakes) >= 1 })
	if got := counterValue(m.FetchPollRereads); got != 0 {
		t.Fatalf("%v re-reads while the open transaction held the last stable offset", got)
	}
	if code := writeMarker(t, rc, "rc", 1, 0, true, 0); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	resp := readFetchResponse(t, fc, req)
	p := resp.Topics[0].Partitions[0]
	if got := dataValues(t, p.RecordBatches); p.ErrorCode != 0 || len(got) != 5 || got[0] != "t" || p.LastStableOffset != 6 {
		t.Fatalf("answered %d records (error %d, last stable offset %d), want 5 up to 6", len(got), p.ErrorCode, p.LastStableOffset)
	}
}
