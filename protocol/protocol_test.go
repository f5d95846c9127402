package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

func TestProduceConsumeEveryCodec(t *testing.T) {
	tb := startBroker(t)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			tb.createTopic(topic, 3, nil)
			prod := tb.client(kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
			ctx := ctxTimeout(t, 20*time.Second)
			const n = 300
			var recs []*kgo.Record
			for i := 0; i < n; i++ {
				recs = append(recs, &kgo.Record{
					Key:       []byte(fmt.Sprintf("key-%d", i%17)),
					Value:     bytes.Repeat([]byte{byte('a' + i%26)}, 100+i),
					Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}},
					Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
				})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			keyPart := map[string]int32{}
			for _, r := range recs {
				if p, ok := keyPart[string(r.Key)]; ok && p != r.Partition {
					t.Fatalf("key %s in partitions %d and %d", r.Key, p, r.Partition)
				}
				keyPart[string(r.Key)] = r.Partition
			}
			cons := tb.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := map[string]*kgo.Record{}
			lastOffset := map[int32]int64{}
			for len(got) < n {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", len(got), n, err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
				fs.EachRecord(func(r *kgo.Record) {
					if last, ok := lastOffset[r.Partition]; ok && r.Offset != last+1 {
						t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, last)
					}
					lastOffset[r.Partition] = r.Offset
					got[string(r.Headers[0].Value)] = r
				})
			}
			for i, want := range recs {
				r := got[fmt.Sprint(i)]
				if r == nil || !bytes.Equal(r.Value, want.Value) || !bytes.Equal(r.Key, want.Key) || !r.Timestamp.Equal(want.Timestamp) || r.Partition != want.Partition {
					t.Fatalf("record %d: got %+v, want %+v", i, r, want)
				}
			}
		})
	}
}

func TestAcksLevels(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("acks", 1, nil)
	for _, acks := range []kgo.Acks{kgo.NoAck(), kgo.LeaderAck(), kgo.AllISRAcks()} {
		opts := []kgo.Opt{kgo.DefaultProduceTopic("acks"), kgo.RequiredAcks(acks)}
		if acks != kgo.AllISRAcks() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := tb.client(opts...)
		ctx := ctxTimeout(t, 10*time.Second)
		for i := 0; i < 10; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("acks %v: %v", acks, err)
			}
		}
	}
	// acks=0 records arrive even without responses.
	deadline := time.Now().Add(5 * time.Second)
	for tb.broker.Partitions().Get("acks", 0).HighWatermark() != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("high watermark %d, want 30", tb.broker.Partitions().Get("acks", 0).HighWatermark())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestApiVersionsTooNew(t *testing.T) {
	tb := startBroker(t)
	rc := dialRaw(t, tb.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	rc.send(req)
	// Claim a version far past what anyone knows: the body is not parsed.
	b := frame(req, 99)
	binary.BigEndian.PutUint16(b[6:], 250)
	rc.c.Write(b)
	rc.readBody() // the v3 answer
	corr, body, err := rc.readBody()
	if err != nil || corr != 99 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	// Kafka lists only ApiVersions' own range: a client given the whole list in the v0
	// format (franz-go) would use it and never see the v3+ features.
	if resp.ErrorCode != 35 || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion < 3 {
		t.Fatalf("error %d with keys %+v, want 35 with ApiVersions' range alone", resp.ErrorCode, resp.ApiKeys)
	}
}

func TestUnknownKeyClosesConnection(t *testing.T) {
	tb := startBroker(t)
	rc := dialRaw(t, tb.addr)
	b := frame(kmsg.NewPtrApiVersionsRequest(), 1)
	binary.BigEndian.PutUint16(b[4:], 9999)
	rc.c.Write(b)
	rc.expectClosed()
}

func TestUnsupportedVersionAnswered(t *testing.T) {
	tb := startBroker(t)
	rc := dialRaw(t, tb.addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 0 // kmsg knows v0; Shale serves 1+
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "x", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0}}}}
	resp := rc.roundTrip(req).(*kmsg.ListOffsetsResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != 35 {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION", resp.Topics[0].Partitions[0].ErrorCode)
	}
}

func TestOversizedRequestClosesConnection(t *testing.T) {
	tb := startBroker(t, withMaxRequestBytes(1<<20))
	rc := dialRaw(t, tb.addr)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], 2<<20)
	rc.c.Write(size[:])
	rc.expectClosed()
	// The broker still serves others.
	if _, err := tb.admin().ListTopics(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestDisconnectMidRequest(t *testing.T) {
	tb := startBroker(t)
	for i := 0; i < 20; i++ {
		rc := dialRaw(t, tb.addr)
		b := frame(kmsg.NewPtrMetadataRequest(), 1)
		rc.c.Write(b[:len(b)/2])
		rc.c.Close()
	}
	if _, err := tb.admin().ListTopics(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// produceRaw sends one batch to topic/partition and returns the partition response.
func produceRaw(t *testing.T, rc *rawConn, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

func makeBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, valueSize int) []byte {
	t.Helper()
	var recs []records.Record
	for i := 0; i < n; i++ {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{'x'}, valueSize)})
	}
	now := time.Now().UnixMilli()
	b, err := records.Build(shalelog.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: now, MaxTimestamp: now, PartitionLeaderEpoch: -1}, 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProduceErrors(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("small", 1, map[string]*string{"max.message.bytes": strPtr("2000")})
	rc := dialRaw(t, tb.addr)

	if p := produceRaw(t, rc, "missing", 0, makeBatch(t, -1, -1, -1, 1, 10)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing topic: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "small", 7, makeBatch(t, -1, -1, -1, 1, 10)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing partition: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "small", 0, makeBatch(t, -1, -1, -1, 3, 1000)); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Errorf("too large: %d", p.ErrorCode)
	}
	bad := makeBatch(t, -1, -1, -1, 2, 10)
	bad[len(bad)-1] ^= 0xff
	if p := produceRaw(t, rc, "small", 0, bad); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Errorf("corrupt: %d", p.ErrorCode)
	}
	two := append(makeBatch(t, -1, -1, -1, 1, 10), makeBatch(t, -1, -1, -1, 1, 10)...)
	if p := produceRaw(t, rc, "small", 0, two); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("two batches: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "small", 0, []byte{1, 2, 3}); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Errorf("garbage: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "small", 0, makeBatch(t, -1, -1, -1, 2, 10)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Errorf("valid batch after errors: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
}

func TestIdempotentSequences(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("idem", 1, nil)
	rc := dialRaw(t, tb.addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	ir := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatal(ir.ErrorCode)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	first := makeBatch(t, pid, epoch, 0, 5, 10)
	p := produceRaw(t, rc, "idem", 0, append([]byte(nil), first...))
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first: %d at %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, rc, "idem", 0, makeBatch(t, pid, epoch, 5, 5, 10)); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("second: %d at %d", p.ErrorCode, p.BaseOffset)
	}
	// A retry of the first batch gets its original offset and is not appended again.
	if p := produceRaw(t, rc, "idem", 0, append([]byte(nil), first...)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("retry: %d at %d", p.ErrorCode, p.BaseOffset)
	}
	if hw := tb.broker.Partitions().Get("idem", 0).HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d after a duplicate, want 10", hw)
	}
	if p := produceRaw(t, rc, "idem", 0, makeBatch(t, pid, epoch, 20, 1, 10)); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "idem", 0, makeBatch(t, pid, epoch+1, 3, 1, 10)); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("new epoch not at 0: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "idem", 0, makeBatch(t, pid, epoch+1, 0, 1, 10)); p.ErrorCode != 0 {
		t.Fatalf("new epoch at 0: %d", p.ErrorCode)
	}
	if p := produceRaw(t, rc, "idem", 0, makeBatch(t, pid, epoch, 10, 1, 10)); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %d", p.ErrorCode)
	}

	// Producer state survives a restart: the retry is still recognised.
	tb2 := tb.restart()
	rc2 := dialRaw(t, tb2.addr)
	second := makeBatch(t, pid, epoch+1, 1, 2, 10)
	if p := produceRaw(t, rc2, "idem", 0, append([]byte(nil), second...)); p.ErrorCode != 0 || p.BaseOffset != 11 {
		t.Fatalf("after restart: %d at %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, rc2, "idem", 0, second); p.ErrorCode != 0 || p.BaseOffset != 11 {
		t.Fatalf("retry after restart: %d at %d", p.ErrorCode, p.BaseOffset)
	}
}

func TestIdempotentProducerRetriesNoDuplicates(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("retries", 2, nil)
	cl := tb.client(kgo.DefaultProduceTopic("retries"), kgo.MaxBufferedRecords(10000))
	ctx := ctxTimeout(t, 30*time.Second)
	var wg sync.WaitGroup
	const n = 2000
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	total := int64(0)
	for i := int32(0); i < 2; i++ {
		total += tb.broker.Partitions().Get("retries", i).HighWatermark()
	}
	if total != n {
		t.Fatalf("%d records in the log, want %d", total, n)
	}
}

func TestFetchLongPollWakesOnAppend(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("poll", 1, nil)
	rc := dialRaw(t, tb.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis = 10_000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "poll", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1}}}}
	start := time.Now()
	corr := rc.send(req)
	time.Sleep(200 * time.Millisecond)
	cl := tb.client(kgo.DefaultProduceTopic("poll"))
	if err := cl.ProduceSync(ctxTimeout(t, 5*time.Second), &kgo.Record{Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, body, err := rc.readBody()
	if err != nil || got != corr {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("fetch returned after %v: did not wake on append", waited)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("partition %+v", p)
	}
	if _, recs, err := records.Records(p.RecordBatches); err != nil || string(recs[0].Value) != "wake" {
		t.Fatalf("records %v %v", recs, err)
	}
}

func TestFetchErrorsAndOutOfRange(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("fe", 1, nil)
	rc := dialRaw(t, tb.addr)
	fetch := func(topic string, offset int64, leaderEpoch int32) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		req.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: leaderEpoch, LogStartOffset: -1}}}}
		return rc.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	if p := fetch("nope", 0, -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %d", p.ErrorCode)
	}
	if p := fetch("fe", 5, -1); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("past the end: %d", p.ErrorCode)
	}
	if p := fetch("fe", 0, 5); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("future epoch: %d", p.ErrorCode)
	}
	if p := fetch("fe", 0, -1); p.ErrorCode != 0 || p.HighWatermark != 0 {
		t.Errorf("empty partition: %+v", p)
	}
}

func TestListOffsets(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("lo", 1, nil)
	cl := tb.client(kgo.DefaultProduceTopic("lo"), kgo.ProducerLinger(0))
	ctx := ctxTimeout(t, 10*time.Second)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(1000 * int64(i+1))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := tb.admin()
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("lo", 0); o.Offset != 0 {
		t.Errorf("start %d", o.Offset)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 10 {
		t.Errorf("end %d", o.Offset)
	}
	byTime, err := adm.ListOffsetsAfterMilli(ctx, 4500, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := byTime.Lookup("lo", 0); o.Offset != 4 || o.Timestamp != 5000 {
		t.Errorf("after 4500ms: offset %d ts %d, want 4 at 5000", o.Offset, o.Timestamp)
	}
	late, _ := adm.ListOffsetsAfterMilli(ctx, 99_000, "lo")
	if o, _ := late.Lookup("lo", 0); o.Offset != -1 && o.Offset != 10 {
		t.Errorf("after the last timestamp: offset %d", o.Offset)
	}
}

func TestMetadataAllTopicsSemantics(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("m1", 1, nil)
	rc := dialRaw(t, tb.addr)
	v0 := kmsg.NewPtrMetadataRequest()
	v0.Version = 0
	// All topics include the internal __consumer_offsets, as in Kafka.
	if r := rc.roundTrip(v0).(*kmsg.MetadataResponse); len(r.Topics) != 2 {
		t.Errorf("v0 empty list: %d topics, want all (2)", len(r.Topics))
	}
	v1 := kmsg.NewPtrMetadataRequest()
	v1.Version = 1
	v1.Topics = []kmsg.MetadataRequestTopic{}
	if r := rc.roundTrip(v1).(*kmsg.MetadataResponse); len(r.Topics) != 0 {
		t.Errorf("v1 empty list: %d topics, want none", len(r.Topics))
	}
	v12 := kmsg.NewPtrMetadataRequest()
	v12.Version = 12
	v12.Topics = nil
	r := rc.roundTrip(v12).(*kmsg.MetadataResponse)
	if len(r.Topics) != 2 || r.Topics[0].TopicID == [16]byte{} || r.Topics[0].Partitions[0].Leader != 1 || !r.Topics[1].IsInternal {
		t.Errorf("v12 null list: %+v", r.Topics)
	}
	if len(r.Brokers) != 1 || r.Brokers[0].NodeID != 1 {
		t.Errorf("brokers %+v", r.Brokers)
	}
}

func TestAutoCreateOnMetadata(t *testing.T) {
	tb := startBroker(t)
	cl := tb.client(kgo.DefaultProduceTopic("auto-created"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctxTimeout(t, 10*time.Second), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if topic := tb.store.Current().Topic("auto-created"); topic == nil || len(topic.Partitions) != 3 {
		t.Fatalf("auto-created topic %+v", topic)
	}
	bad := kmsg.NewPtrMetadataRequest()
	bad.Version = 9
	bad.AllowAutoTopicCreation = true
	bad.Topics = []kmsg.MetadataRequestTopic{{Topic: strPtr("bad/name")}}
	r := dialRaw(t, tb.addr).roundTrip(bad).(*kmsg.MetadataResponse)
	if r.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %d", r.Topics[0].ErrorCode)
	}
}

func TestAdminAPIs(t *testing.T) {
	tb := startBroker(t)
	adm := tb.admin()
	ctx := ctxTimeout(t, 20*time.Second)

	// validate_only creates nothing.
	if _, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "validated"); err != nil {
		t.Fatal(err)
	}
	res, err := adm.CreateTopics(ctx, 2, 1, map[string]*string{"retention.ms": strPtr("60000")}, "admin")
	if err != nil || res["admin"].Err != nil {
		t.Fatal(err, res["admin"].Err)
	}
	// The controller commits changes in order, so the image that shows "admin" would
	// show "validated" too had validate_only created it.
	if tb.waitApplied("topic admin", func(im *metadata.Image) bool { return im.Topic("admin") != nil }).Topic("validated") != nil {
		t.Fatal("validate_only created the topic")
	}
	if res, _ := adm.CreateTopics(ctx, 2, 1, nil, "admin"); !errors.Is(res["admin"].Err, kerr.TopicAlreadyExists) {
		t.Errorf("duplicate: %v", res["admin"].Err)
	}
	if res, _ := adm.CreateTopics(ctx, 2, 3, nil, "rf3"); !errors.Is(res["rf3"].Err, kerr.InvalidReplicationFactor) {
		t.Errorf("rf 3 on one broker: %v", res["rf3"].Err)
	}
	if res, _ := adm.CreateTopics(ctx, 1, 1, map[string]*string{"retention.ms": strPtr("soon")}, "badcfg"); !errors.Is(res["badcfg"].Err, kerr.InvalidConfig) {
		t.Errorf("bad config: %v", res["badcfg"].Err)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{}
	for _, c := range rcs[0].Configs {
		cfg[c.Key] = c.MaybeValue()
	}
	if cfg["retention.ms"] != "60000" || cfg["segment.bytes"] != "1073741824" {
		t.Errorf("configs %v", cfg)
	}

	if _, err := adm.AlterTopicConfigs(ctx, []kadmAlter{{Name: "retention.ms", Value: strPtr("120000")}, {Name: "cleanup.policy", Value: strPtr("delete")}}, "admin"); err != nil {
		t.Fatal(err)
	}
	tb.waitApplied("incremental alter: retention.ms 120000", func(im *metadata.Image) bool {
		return im.Topic("admin").Configs["retention.ms"] == "120000"
	})
	alterRes, err := adm.AlterTopicConfigsState(ctx, []kadmAlter{{Name: "max.message.bytes", Value: strPtr("5000")}}, "admin")
	if err != nil || alterRes[0].Err != nil {
		t.Fatal(err, alterRes)
	}
	tb.waitApplied("whole-set alter: only max.message.bytes", func(im *metadata.Image) bool {
		c := im.Topic("admin").Configs
		return c["max.message.bytes"] == "5000" && c["retention.ms"] == ""
	})

	if _, err := adm.CreatePartitions(ctx, 2, "admin"); err != nil {
		t.Fatal(err)
	}
	tb.waitApplied("4 partitions after adding 2", func(im *metadata.Image) bool { return len(im.Topic("admin").Partitions) == 4 })

	if err := tb.client(kgo.DefaultProduceTopic("admin")).ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dr, err := adm.DeleteRecords(ctx, kadmOffsets("admin", tb))
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range dr {
		for _, p := range ps {
			if p.Err != nil {
				t.Errorf("delete records: %v", p.Err)
			}
		}
	}

	cluster, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, tb.client())
	if err != nil || cluster.ErrorCode != 0 || len(cluster.Brokers) != 1 || cluster.ClusterID == "" {
		t.Fatal(err, cluster)
	}

	if _, err := adm.DeleteTopics(ctx, "admin"); err != nil {
		t.Fatal(err)
	}
	tb.waitApplied("topic admin gone", func(im *metadata.Image) bool { return im.Topic("admin") == nil })
	for i := int32(0); i < 4; i++ {
		if tb.broker.Partitions().Get("admin", i) != nil {
			t.Fatalf("replica admin-%d not removed after delete", i)
		}
	}
}

type kadmAlter = kadm.AlterConfig

// kadmOffsets asks to delete everything below the high watermark of each partition.
func kadmOffsets(topic string, tb *testBroker) kadm.Offsets {
	os := kadm.Offsets{}
	for i, p := range tb.broker.Image().Topic(topic).Partitions {
		if part := tb.broker.Partitions().Get(topic, p.Index); part != nil {
			os.Add(kadm.Offset{Topic: topic, Partition: int32(i), At: part.HighWatermark()})
		}
	}
	return os
}

// TestProduceLegacyMessageSets sends Produce v2 with a gzip-wrapped v1 message set, as
// librdkafka does against brokers that list Produce v0, and reads it back as v2 records.
func TestProduceLegacyMessageSets(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("legacy", 1, nil)
	var inner []byte
	for i := 0; i < 3; i++ {
		m := kmsg.MessageV1{Magic: 1, Timestamp: 1000 + int64(i), Key: []byte("k"), Value: []byte(fmt.Sprint("v", i))}
		inner = append(inner, fixLegacyMessage(m.AppendTo(nil))...)
	}
	gz, err := records.Compress(1, inner, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := kmsg.MessageV1{Magic: 1, Attributes: 1, Timestamp: 1002, Value: gz}
	set := fixLegacyMessage(wrapper.AppendTo(nil))
	rc := dialRaw(t, tb.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 2
	req.Acks = 1
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "legacy", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: set}}}}
	p := rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("legacy produce: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	cl := tb.client(kgo.ConsumeTopics("legacy"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxTimeout(t, 10*time.Second)
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
		})
	}
	if fmt.Sprint(got) != "[k=v0@1000 k=v1@1001 k=v2@1002]" {
		t.Fatalf("consumed %v", got)
	}
}

func fixLegacyMessage(b []byte) []byte {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	return b
}
