package protocol_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/protocol"
)

// The bytes of fetch responses sent with sendfile from the segment files are exactly
// those written from the segments' mappings with writev, for the same reads: many
// partitions in one response, each read spanning several segments (the producer rolled
// them), from the live log (active segments, sealed ones not yet synced) and after a
// restart (every segment sealed, synced and mapped on first use), at a version with
// 4-byte record lengths and one with varint ones, whole logs and reads cut by
// partition_max_bytes.
func TestFetchSendfileMatchesWritev(t *testing.T) {
	m := protocol.NewMetrics(nil)
	tb := startBroker(t, func(c *protocol.Config) { c.Metrics = m })
	const (
		topic      = "sendfile"
		partitions = 12
		perPart    = 60
	)
	tb.createTopic(topic, partitions, map[string]*string{"segment.bytes": strPtr("32768")})
	cl := tb.client(kgo.ProducerBatchMaxBytes(8<<10), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	var recs []*kgo.Record
	for p := range int32(partitions) {
		for i := range perPart {
			v := make([]byte, 1500+7*i)
			rand.Read(v)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "%d-%d", p, i), Value: v})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	type read struct {
		version  int16
		offset   int64
		maxBytes int32
	}
	reads := []read{{4, 0, 1 << 20}, {12, 0, 1 << 20}, {12, 17, 40000}, {11, 33, 1 << 20}}
	fetchAll := func(addr string) [][]byte {
		rc := dialRaw(t, addr)
		var out [][]byte
		for _, r := range reads {
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(r.version)
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 50<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			for p := range int32(partitions) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, r.offset, r.maxBytes, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			corr := rc.send(req)
			got, body, err := rc.readBody()
			if err != nil || got != corr {
				t.Fatalf("fetch v%d: correlation %d (want %d), %v", r.version, got, corr, err)
			}
			if len(body) < 64<<10 {
				t.Fatalf("fetch v%d: a response of %d bytes is written through the buffer, not the direct path", r.version, len(body))
			}
			checkFetchBody(t, body, r.version, partitions, perPart, r.offset, r.maxBytes == 1<<20)
			out = append(out, body)
		}
		return out
	}
	sent := func() float64 {
		var d dto.Metric
		if err := m.BytesSendfile.Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetCounter().GetValue()
	}

	live := fetchAll(tb.addr)
	if sent() < 1<<20 {
		t.Fatalf("%.0f bytes went out with sendfile, want the records of every response", sent())
	}
	tb.cfg.DisableSendfile = true
	tb = tb.restart()
	before := sent()
	writev := fetchAll(tb.addr)
	if sent() != before {
		t.Fatal("sendfile used with fetch.sendfile.enable=false")
	}
	tb.cfg.DisableSendfile = false
	tb = tb.restart()
	restarted := fetchAll(tb.addr)
	if sent() < before+1<<20 {
		t.Fatal("sendfile not used after the restart")
	}
	for i := range reads {
		if !bytes.Equal(live[i], writev[i]) {
			t.Errorf("read %d (%+v): the live log's sendfile response differs from writev's", i, reads[i])
		}
		if !bytes.Equal(restarted[i], writev[i]) {
			t.Errorf("read %d (%+v): the restarted log's sendfile response differs from writev's", i, reads[i])
		}
	}
}

// checkFetchBody decodes a fetch response and checks that every partition carries
// contiguous whole batches from the one holding offset, all the way to the end when
// whole (the read was not cut by partition_max_bytes): more than one 32 KiB segment.
func checkFetchBody(t *testing.T, body []byte, version int16, partitions, perPart int, offset int64, whole bool) {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	if version >= 12 {
		body = body[1:] // the response header's tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode fetch v%d: %v", version, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
		t.Fatalf("fetch v%d: %d topics", version, len(resp.Topics))
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
		b := p.RecordBatches
		next := int64(-1)
		for len(b) > 0 {
			h, err := shalelog.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				t.Fatalf("partition %d: batch %v (%d bytes left)", p.Partition, err, len(b))
			}
			if next < 0 && (h.BaseOffset > offset || h.LastOffset() < offset) || next >= 0 && h.BaseOffset != next {
				t.Fatalf("partition %d: batch at %d, after %d (fetch offset %d)", p.Partition, h.BaseOffset, next, offset)
			}
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
		if next < 0 {
			t.Fatalf("partition %d: no batches", p.Partition)
		}
		if whole && (next != int64(perPart) || len(p.RecordBatches) <= 32768) {
			t.Fatalf("partition %d: %d bytes up to offset %d, want all %d records over several segments", p.Partition, len(p.RecordBatches), next, perPart)
		}
	}
}
