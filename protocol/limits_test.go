package protocol_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/protocol"
)

func withLimits(poolBytes int64, idle, write time.Duration) brokerOpt {
	return func(c *protocol.Config) {
		c.QueuedMaxRequestBytes, c.ConnectionsMaxIdle, c.WriteTimeout = poolBytes, idle, write
	}
}

func withMetrics(m *protocol.Metrics) brokerOpt { return func(c *protocol.Config) { c.Metrics = m } }

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rssBytes is the process's resident set, from /proc (0 where there is none).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func gaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	g.Write(&d)
	return d.GetGauge().GetValue()
}

// sizePrefix is the 4-byte frame length of a request of n bytes.
func sizePrefix(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// TestStalledSizePrefixesHoldNoMemory: many connections each announce a 100 MiB request
// and send nothing more. The broker allocates a request's buffer only as its bytes
// arrive and reserves the pool only once the body starts, so its heap stays within the
// pool's cap and other clients are served meanwhile.
func TestStalledSizePrefixesHoldNoMemory(t *testing.T) {
	const pool = 32 << 20
	tb := startBroker(t, withLimits(pool, time.Minute, time.Minute))
	tb.createTopic("served", 1, nil)
	cl := tb.client(kgo.DefaultProduceTopic("served"), kgo.ProducerBatchMaxBytes(4<<20))
	if err := cl.ProduceSync(ctxTimeout(t, 10*time.Second), &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	heapBefore, rssBefore := heapInUse(), rssBytes()
	const stalled = 40 // 4 GiB announced
	for range stalled {
		rc := dialRaw(t, tb.addr)
		if _, err := rc.c.Write(sizePrefix(100 << 20)); err != nil {
			t.Fatal(err)
		}
	}
	// Other clients are served while the prefixes stall: a 3 MiB produce and its fetch.
	big := bytes.Repeat([]byte("x"), 3<<20)
	if err := cl.ProduceSync(ctxTimeout(t, 10*time.Second), &kgo.Record{Value: big}).FirstErr(); err != nil {
		t.Fatalf("produce while prefixes stall: %v", err)
	}
	consumer := tb.client(kgo.ConsumeTopics("served"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(8<<20))
	got := 0
	for got < 2 {
		fs := consumer.PollFetches(ctxTimeout(t, 10*time.Second))
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch while prefixes stall: %v", err)
		}
		got += fs.NumRecords()
	}

	// The prefixes were read long ago on a quiet machine, but check for a while: the
	// heap must never take up what they announced.
	limit := uint64(pool + 64<<20)
	for range 20 {
		if grew := int64(heapInUse()) - int64(heapBefore); grew > int64(limit) {
			t.Fatalf("heap grew by %d MiB with %d stalled 100 MiB prefixes, want under %d MiB", grew>>20, stalled, limit>>20)
		}
		time.Sleep(50 * time.Millisecond)
	}
	heapGrew := int64(heapInUse()) - int64(heapBefore)
	rssGrew := int64(rssBytes()) - int64(rssBefore)
	t.Logf("%d stalled 100 MiB prefixes: heap +%d KiB, RSS +%d KiB", stalled, heapGrew>>10, rssGrew>>10)
	// RSS also carries the served clients' traffic, pages the runtime has not returned
	// yet and, under -race, shadow memory: only a gross bound is meaningful, well below
	// the 4 GiB announced.
	if rssLimit := int64(512 << 20); rssBefore > 0 && rssGrew > rssLimit {
		t.Fatalf("RSS grew by %d MiB, want under %d MiB", rssGrew>>20, rssLimit>>20)
	}
}

// TestPoolMutesReaders: with the pool exhausted by a request whose body stalls, other
// connections are muted (read nothing), and they resume once the stalled client is gone.
func TestPoolMutesReaders(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withLimits(1<<20, time.Minute, time.Minute), withMetrics(m))
	hog := dialRaw(t, tb.addr)
	// 2 MiB announced, one byte sent: the whole 2 MiB is reserved, past the 1 MiB pool.
	if _, err := hog.c.Write(append(sizePrefix(2<<20), 0)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the hog's reservation", func() bool { return gaugeValue(m.RequestPoolBytes) == 2<<20 })
	other := dialRaw(t, tb.addr)
	corr := other.send(kmsg.NewPtrApiVersionsRequest())
	other.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var b [1]byte
	if _, err := other.c.Read(b[:]); err == nil {
		t.Fatal("answered while the pool was exhausted, want the connection muted")
	}
	hog.c.Close()
	got, _, err := other.readBody()
	if err != nil || got != corr {
		t.Fatalf("after the pool freed: correlation %d, err %v; want %d", got, err, corr)
	}
	testutil.Eventually(t, 10*time.Second, "the pool to be empty", func() bool { return gaugeValue(m.RequestPoolBytes) == 0 })
}

// TestIdleConnectionClosed: connections.max.idle.ms closes a connection that sends
// nothing, and one stalled in the middle of a request, releasing its reservation.
func TestIdleConnectionClosed(t *testing.T) {
	tb := startBroker(t, withLimits(1<<20, 300*time.Millisecond, time.Minute))
	quiet := dialRaw(t, tb.addr)
	quiet.expectClosed()
	partial := dialRaw(t, tb.addr)
	if _, err := partial.c.Write(append(sizePrefix(2<<20), make([]byte, 1000)...)); err != nil {
		t.Fatal(err)
	}
	partial.expectClosed()
	// The reservation went with it: a request is read again.
	rc := dialRaw(t, tb.addr)
	rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

// TestStuckReaderClosed: a client that sends fetches and never reads the responses is
// disconnected by the write deadline, which releases the fetch views it pinned.
func TestStuckReaderClosed(t *testing.T) {
	m := protocol.NewMetrics(prometheus.NewRegistry())
	tb := startBroker(t, withLimits(-1, time.Minute, 500*time.Millisecond), withMetrics(m))
	tb.createTopic("stuck", 1, nil)
	cl := tb.client(kgo.DefaultProduceTopic("stuck"), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 900<<10)
	for range 8 {
		rand.Read(val) // incompressible, so the responses really are this large
		if err := cl.ProduceSync(ctxTimeout(t, 10*time.Second), &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	before := gaugeValue(m.Connections)
	rc := dialRaw(t, tb.addr)
	testutil.Eventually(t, 10*time.Second, "the broker to accept", func() bool { return gaugeValue(m.Connections) == before+1 })
	for range 8 { // ~7 MiB each, far beyond what the socket buffers hold
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		req.MaxWaitMillis, req.MaxBytes, req.ReplicaID = 0, 64<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "stuck"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 64<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		rc.send(req)
	}
	testutil.Eventually(t, 20*time.Second, "the stuck reader's connection to close", func() bool { return gaugeValue(m.Connections) == before })
}

func withConnLimits(total, perIP int, overrides map[string]int) brokerOpt {
	return func(c *protocol.Config) {
		c.MaxConnections, c.MaxConnectionsPerIP, c.MaxConnectionsPerIPOverrides = total, perIP, overrides
	}
}

// TestMaxConnectionsPerIP: a connection past its address's limit is closed at once;
// closing one lets a new one in.
func TestMaxConnectionsPerIP(t *testing.T) {
	tb := startBroker(t, withConnLimits(0, 2, nil))
	a, b := dialRaw(t, tb.addr), dialRaw(t, tb.addr)
	a.roundTrip(kmsg.NewPtrApiVersionsRequest())
	b.roundTrip(kmsg.NewPtrApiVersionsRequest())
	over := dialRaw(t, tb.addr)
	over.send(kmsg.NewPtrApiVersionsRequest())
	over.expectClosed()
	a.c.Close()
	testutil.Eventually(t, 10*time.Second, "a connection to be accepted again", func() bool {
		c, err := net.DialTimeout("tcp", tb.addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		rc := &rawConn{t: t, c: c}
		rc.corr++
		if _, err := c.Write(frame(kmsg.NewPtrApiVersionsRequest(), rc.corr)); err != nil {
			return false
		}
		_, _, err = rc.readBody()
		return err == nil
	})

	// An override of 0 refuses the address outright.
	tb2 := startBroker(t, withConnLimits(0, 0, map[string]int{"127.0.0.1": 0}))
	refused := dialRaw(t, tb2.addr)
	refused.send(kmsg.NewPtrApiVersionsRequest())
	refused.expectClosed()
}

// TestMaxConnections: past max.connections the broker accepts nothing until a
// connection closes.
func TestMaxConnections(t *testing.T) {
	tb := startBroker(t, withConnLimits(1, 0, nil))
	first := dialRaw(t, tb.addr)
	first.roundTrip(kmsg.NewPtrApiVersionsRequest())
	waiting := dialRaw(t, tb.addr) // completes in the listen backlog, not accepted
	corr := waiting.send(kmsg.NewPtrApiVersionsRequest())
	waiting.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if _, err := waiting.c.Read(one[:]); err == nil {
		t.Fatal("a connection past max.connections was served")
	}
	first.c.Close()
	got, _, err := waiting.readBody()
	if err != nil || got != corr {
		t.Fatalf("after a slot freed: correlation %d, err %v", got, err)
	}
}
