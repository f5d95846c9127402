package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
)

// servedBy records which broker served each batch a consumer read (kgo's
// HookFetchBatchRead names the broker whose fetch response carried it).
type servedBy struct {
	mu      sync.Mutex
	batches []int32 // broker id per batch, in the order read
}

func (s *servedBy) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	if m.NumRecords == 0 {
		return
	}
	s.mu.Lock()
	s.batches = append(s.batches, meta.NodeID)
	s.mu.Unlock()
}

// since returns the brokers of the batches read after the first n.
func (s *servedBy) since(n int) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches[n:])
}

func (s *servedBy) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches)
}

func onlyFrom(brokers []int32, id int32) bool {
	for _, b := range brokers {
		if b != id {
			return false
		}
	}
	return len(brokers) > 0
}

// TestFollowerFetchingByRack (KIP-392): three brokers in racks a, b and c, the leader in
// rack a, replica.selector.class set to Kafka's rack-aware selector. A franz-go
// consumer in rack b reads every batch from the rack-b follower. When that follower is
// stopped (SIGSTOP) and leaves the ISR, the consumer comes back to the leader (at its
// next preferred-replica recheck, as against Kafka) and reads on without a gap; when
// the follower resumes and rejoins the ISR, the consumer moves back to it.
func TestFollowerFetchingByRack(t *testing.T) {
	racks := map[int32]string{4: "a", 5: "b", 6: "c"}
	c := newClusterWith(t, func(id int32) []string { return []string{"--broker.rack=" + racks[id]} },
		"--replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
		"--replica.lag.time.max.ms=3000")
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "racks", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{4, 5, 6}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	createTopic(t, c.brokers[0].addr, req)
	c.waitTopicEverywhere("racks")
	waitISR := func(want ...int32) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("ISR %v", want), func() bool {
			resp, err := metadataFrom(context.Background(), c.broker(4).addr)
			if err != nil {
				return false
			}
			ps, _ := topicState(resp, "racks")
			if len(ps) != 1 || ps[0].leader != 4 {
				return false
			}
			isr := slices.Sorted(slices.Values(ps[0].isr))
			return slices.Equal(isr, want)
		})
	}
	waitISR(4, 5, 6)

	producer := c.kafkaClient(kgo.DefaultProduceTopic("racks"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	next := 0
	produce := func(n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for range n {
			r := &kgo.Record{Value: []byte(strconv.Itoa(next))}
			next++
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}

	hook := &servedBy{}
	consumer := c.kafkaClient(kgo.Rack("b"), kgo.ConsumeTopics("racks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.RequestTimeoutOverhead(time.Second),
		kgo.RecheckPreferredReplicaInterval(2*time.Second), kgo.WithHooks(hook))
	got := 0
	consume := func(upTo int, timeout time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for got < upTo {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records in %v", got, upTo, timeout)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch error %s-%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if want := strconv.Itoa(got); string(r.Value) != want {
					t.Fatalf("record at offset %d is %q, want %q (a gap or a repeat)", r.Offset, r.Value, want)
				}
				got++
			})
		}
	}

	// Rack b: every batch from broker 5, none from the leader.
	produce(200)
	consume(200, 30*time.Second)
	if b := hook.since(0); !onlyFrom(b, 5) {
		t.Fatalf("rack-b consumer's batches came from brokers %v, want only 5", b)
	}
	t.Logf("rack b: %d batches, all from broker 5", hook.count())

	// The rack-b follower stops and leaves the ISR: the consumer reads from the leader.
	c.broker(5).signal(syscall.SIGSTOP)
	t.Cleanup(func() {
		if c.broker(5).running() {
			c.broker(5).cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	stopped := time.Now()
	waitISR(4, 6)
	mark := hook.count()
	produce(200)
	consume(400, 60*time.Second)
	t.Logf("broker 5 stopped: records consumed again %v after the stop", time.Since(stopped))
	if b := hook.since(mark); !onlyFrom(b, 4) {
		t.Fatalf("with broker 5 out of the ISR, batches came from brokers %v, want only the leader 4", b)
	}

	// Back in the ISR: the consumer returns to its rack's replica.
	c.broker(5).signal(syscall.SIGCONT)
	waitISR(4, 5, 6)
	mark = hook.count()
	deadline := time.Now().Add(30 * time.Second)
	for {
		produce(20)
		consume(next, 30*time.Second)
		b := hook.since(mark)
		if len(b) > 0 && b[len(b)-1] == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 5 back in the ISR, but the consumer's batches still come from %v", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("broker 5 back in the ISR: the consumer reads from it again (%d records in all)", got)
}

// bytesOut scrapes a broker's kafka_server_brokertopicmetrics_bytesout_total for topic:
// the record bytes it served to consumers (followers' fetches are not counted).
func bytesOut(t *testing.T, metricsAddr, topic string) float64 {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", metricsAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	prefix := `kafka_server_brokertopicmetrics_bytesout_total{topic="` + topic + `"} `
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// TestFollowerFetchingKcat: librdkafka (kcat, client.rack=b) reads a partition led in
// rack a from the rack-b follower: only that broker serves it record bytes. With the
// rack-b follower out of the ISR, a rack-b consumer reads from the leader. (librdkafka
// leaves a preferred replica only on an error from it or after its 5-minute lease, so a
// consumer already on a stopped follower is not checked here; franz-go's is above.)
func TestFollowerFetchingKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("no kcat on PATH")
	}
	racks := map[int32]string{4: "a", 5: "b", 6: "c"}
	metrics := map[int32]string{}
	for id := range racks {
		metrics[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	}
	c := newClusterWith(t, func(id int32) []string {
		return []string{"--broker.rack=" + racks[id], "--http.listener=" + metrics[id]}
	}, "--replica.selector.class=RackAwareReplicaSelector", "--replica.lag.time.max.ms=3000")
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "racks-kcat", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{4, 5, 6}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	createTopic(t, c.brokers[0].addr, req)
	c.waitTopicEverywhere("racks-kcat")
	isr := func(want ...int32) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("ISR %v", want), func() bool {
			resp, err := metadataFrom(context.Background(), c.broker(4).addr)
			if err != nil {
				return false
			}
			ps, _ := topicState(resp, "racks-kcat")
			return len(ps) == 1 && slices.Equal(slices.Sorted(slices.Values(ps[0].isr)), want)
		})
	}
	isr(4, 5, 6)
	producer := c.kafkaClient(kgo.DefaultProduceTopic("racks-kcat"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := from; i < from+n; i++ {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	kcat := func(offset, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "kcat", "-C", "-b", c.broker(4).addr, "-t", "racks-kcat", "-p", "0",
			"-o", strconv.Itoa(offset), "-c", strconv.Itoa(n), "-q", "-X", "client.rack=b").Output()
		if err != nil {
			t.Fatalf("kcat: %v (%s)", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != n || lines[0] != strconv.Itoa(offset) || lines[n-1] != strconv.Itoa(offset+n-1) {
			t.Fatalf("kcat read %d records (%q ... %q), want %d from %d", len(lines), lines[0], lines[len(lines)-1], n, offset)
		}
	}
	stopped := map[int32]bool{}
	served := func() map[int32]float64 {
		out := map[int32]float64{}
		for id, addr := range metrics {
			if !stopped[id] {
				out[id] = bytesOut(t, addr, "racks-kcat")
			}
		}
		return out
	}

	produce(0, 100)
	kcat(0, 100)
	if b := served(); b[5] == 0 || b[4] != 0 || b[6] != 0 {
		t.Fatalf("record bytes served to the rack-b kcat by broker: %v, want only by 5", b)
	} else {
		t.Logf("record bytes served to the rack-b kcat by broker: %v", b)
	}

	c.broker(5).signal(syscall.SIGSTOP)
	stopped[5] = true
	t.Cleanup(func() {
		if c.broker(5).running() {
			c.broker(5).cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	isr(4, 6)
	before := served()
	produce(100, 100)
	kcat(100, 100)
	after := served()
	t.Logf("with broker 5 stopped, record bytes served by brokers 4 and 6: %v, then %v", before, after)
	if after[4] == before[4] || after[6] != before[6] {
		t.Fatalf("rack b with its replica out of the ISR: bytes served %v, then %v; want the leader 4 to serve", before, after)
	}
}
