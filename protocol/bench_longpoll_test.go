package protocol_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/protocol"
)

// BenchmarkFetchLongPollHerd: 50 consumers long-poll one partition (fetch.min.bytes 64
// KiB, fetch.max.wait.ms 500) while a producer appends small batches (one 200-byte
// record each, acks=all on one replica). Every append wakes all 50; what the wake-ups
// cost is the broker's business. b.N is the number of appends. Reported: wake-ups and
// log re-reads per append (from the listener's metrics), the process's CPU (broker,
// producer and the 50 raw fetch loops together) per append and per appended MB, and
// the fetch responses. consumers=0 is the producer alone, for scale.
func BenchmarkFetchLongPollHerd(b *testing.B) {
	for _, consumers := range []int{0, 50} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) { benchLongPollHerd(b, consumers) })
	}
}

func benchLongPollHerd(b *testing.B, consumers int) {
	const (
		minBytes  = 64 << 10
		maxWaitMs = 500
		valueSize = 200
	)
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(b, withMetrics(m))
	tb.createTopic("herd", 1, nil)
	cl := tb.client(kgo.DefaultProduceTopic("herd"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := bytes.Repeat([]byte("v"), valueSize)
	ctx := b.Context()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}

	var (
		wg        sync.WaitGroup
		responses atomic.Int64
		conns     []net.Conn
	)
	for range consumers {
		c, err := net.DialTimeout("tcp", tb.addr, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			herdConsumer(c, minBytes, maxWaitMs, &responses)
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for gaugeValue(m.FetchPollWaiting) < float64(consumers) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	wakes0, rereads0, resp0 := counterValue(m.FetchPollWakes), counterValue(m.FetchPollRereads), responses.Load()
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	wakes, rereads := counterValue(m.FetchPollWakes)-wakes0, counterValue(m.FetchPollRereads)-rereads0
	resps := responses.Load() - resp0
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	n := float64(b.N)
	b.ReportMetric(wakes/n, "wakes/append")
	b.ReportMetric(rereads/n, "rereads/append")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/append")
	// The batch as the log holds it: the record plus the batch and record headers.
	appendedMB := n * float64(valueSize+70) / 1e6
	b.ReportMetric(float64(cpu.Milliseconds())/appendedMB, "cpu-ms/MB")
	b.ReportMetric(float64(resps), "responses")
}

// herdConsumer long-polls the benchmark's partition on c from its end until c closes,
// counting the responses.
func herdConsumer(c net.Conn, minBytes, maxWaitMs int32, responses *atomic.Int64) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.SessionEpoch = 12, -1, -1
	req.MinBytes, req.MaxWaitMillis, req.MaxBytes = minBytes, maxWaitMs, 50<<20
	fp := kmsg.FetchRequestTopicPartition{Partition: 0, FetchOffset: 1, PartitionMaxBytes: 16 << 20,
		CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1}
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "herd", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	var size [4]byte
	for corr := int32(1); ; corr++ {
		if _, err := c.Write(frame(req, corr)); err != nil {
			return
		}
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		responses.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if err := resp.ReadFrom(body[5:]); err != nil || len(resp.Topics) == 0 {
			return
		}
		// Walk the batch headers only: the next offset is past the last whole batch.
		raw := resp.Topics[0].Partitions[0].RecordBatches
		for len(raw) >= shalelog.BatchHeaderSize {
			h, err := shalelog.ParseHeader(raw)
			if err != nil || h.Size() > len(raw) {
				break
			}
			req.Topics[0].Partitions[0].FetchOffset = h.LastOffset() + 1
			raw = raw[h.Size():]
		}
	}
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
