package records

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	shalelog "github.com/shalelog/shale/log"
)

var franzCodecs = map[int]kgo.CompressionCodec{
	shalelog.CodecNone:   kgo.NoCompression(),
	shalelog.CodecGzip:   kgo.GzipCompression(),
	shalelog.CodecSnappy: kgo.SnappyCompression(),
	shalelog.CodecLZ4:    kgo.Lz4Compression(),
	shalelog.CodecZstd:   kgo.ZstdCompression(),
}

func newFakeCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fetchRaw reads partition t/0 from offset 0 as raw record batches.
func fetchRaw(ctx context.Context, t *testing.T, cl *kgo.Client) [][]byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MaxBytes = 64 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 64 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatal(err)
	}
	batches, err := shalelog.SplitBatches(p.RecordBatches)
	if err != nil {
		t.Fatal(err)
	}
	return batches
}

// TestInteropFranzProducer produces with a real franz-go client (its own record
// encoding, compression and idempotent producer fields) to an in-process kfake broker,
// reads the raw batches back and checks we validate and decode them.
func TestInteropFranzProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process broker")
	}
	for _, codec := range allCodecs {
		t.Run(CodecName(codec), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cluster := newFakeCluster(t)
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(cluster.ListenAddrs()...),
				kgo.DefaultProduceTopic("t"),
				kgo.ProducerBatchCompression(franzCodecs[codec]),
				kgo.ProducerLinger(50*time.Millisecond),
				kgo.ProducerBatchMaxBytes(8<<10), // several batches, so base offsets vary
				// Our raw Fetch names the topic, which Fetch v13+ replaces with an id.
				kgo.MaxVersions(kversion.V3_0_0()),
			)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()

			const n = 300
			var want []*kgo.Record
			for i := 0; i < n; i++ {
				r := &kgo.Record{Value: []byte(fmt.Sprintf("value %d %s", i, bytes.Repeat([]byte("x"), i%97)))}
				if i%3 != 0 {
					r.Key = []byte(fmt.Sprintf("key-%d", i))
				}
				if i%7 == 0 {
					r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}
				}
				want = append(want, r)
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}

			var got []Record
			batches := fetchRaw(ctx, t, cl)
			t.Logf("%d records came back in %d batches", n, len(batches))
			withCodec := 0
			for _, batch := range batches {
				h, err := shalelog.ParseHeader(batch)
				if err != nil {
					t.Fatal(err)
				}
				// franz-go sends a batch uncompressed when compressing does not shrink
				// it (a lone small record under a slow scheduler), so only require that
				// the codec shows up.
				if h.Codec() == codec {
					withCodec++
				} else if h.Codec() != shalelog.CodecNone {
					t.Fatalf("franz-go wrote codec %d", h.Codec())
				}
				if !h.HasProducer() {
					t.Fatal("expected an idempotent batch")
				}
				// As it arrived in the produce request: base offset 0.
				produced := append([]byte(nil), batch...)
				shalelog.SetBaseOffset(produced, 0)
				if _, err := Validate(produced, ValidateOptions{Compacted: false, NowMs: time.Now().UnixMilli(), MaxTimestampDiffMs: 60_000}); err != nil {
					t.Fatalf("franz-go batch rejected: %v", err)
				}
				_, recs, err := Records(batch)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, recs...)
				// Recompress to every codec and read back with franz-go's decoder.
				for _, to := range allCodecs {
					out, err := Recompress(batch, to)
					if err != nil {
						t.Fatal(err)
					}
					if _, krecs := kmsgDecode(t, out); len(krecs) != len(recs) {
						t.Fatalf("recompressed to %s: %d records", CodecName(to), len(krecs))
					}
				}
			}
			if len(got) != n {
				t.Fatalf("decoded %d records, produced %d", len(got), n)
			}
			if codec != shalelog.CodecNone && withCodec == 0 {
				t.Fatalf("no batch came back compressed with %s", CodecName(codec))
			}
			for i, r := range got {
				w := want[i]
				if !bytes.Equal(r.Value, w.Value) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Key, w.Key) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: got %q/%q, want %q/%q", i, r.Key, r.Value, w.Key, w.Value)
				}
			}
		})
	}
}

// TestInteropFranzConsumer sends batches we built, in every codec, to kfake in raw
// produce requests (kfake checks them as a broker would) and consumes them with a
// franz-go consumer, whose decompression and record decoding are its own.
func TestInteropFranzConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster := newFakeCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Our raw Produce names the topic, which Produce v13+ replaces with an id.
		kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	recs := testRecords(50)
	now := time.Now().UnixMilli()
	for _, codec := range allCodecs {
		h := shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: now, MaxTimestamp: now + 49, PartitionLeaderEpoch: -1}
		batch, err := Build(h, codec, recs)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("kfake rejected our %s batch: %v", CodecName(codec), err)
		}
	}

	var got []*kgo.Record
	for len(got) < len(recs)*len(allCodecs) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		w := recs[i%len(recs)]
		if !bytes.Equal(r.Value, w.Value) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Key, w.Key) ||
			len(r.Headers) != len(w.Headers) || r.Offset != int64(i) || r.Timestamp.UnixMilli() != now+w.TimestampDelta {
			t.Fatalf("record %d (%s): %+v, want %+v", i, CodecName(allCodecs[i/len(recs)]), r, w)
		}
	}
}
