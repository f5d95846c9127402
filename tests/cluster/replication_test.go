package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// withConfig sets a topic config on every topic of a CreateTopics request.
func withConfig(req *kmsg.CreateTopicsRequest, name, value string) *kmsg.CreateTopicsRequest {
	for i := range req.Topics {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, kmsg.StringPtr(value)
		req.Topics[i].Configs = append(req.Topics[i].Configs, c)
	}
	return req
}

// waitFullISR waits until every partition of topic has a leader and all its replicas
// in the ISR, as any broker answers Metadata.
func (c *cluster) waitFullISR(topic string, timeout time.Duration) []partitionState {
	c.t.Helper()
	var ps []partitionState
	testutil.Eventually(c.t, timeout, "full ISR for "+topic, func() bool {
		for _, b := range c.brokers {
			if !b.running() {
				continue
			}
			resp, err := metadataFrom(context.Background(), b.addr)
			if err != nil {
				return false
			}
			var ok bool
			if ps, ok = topicState(resp, topic); !ok {
				return false
			}
			for _, p := range ps {
				if p.leader < 0 || len(p.isr) != len(p.replicas) {
					return false
				}
			}
			return true
		}
		return false
	})
	return ps
}

// readAll reads every partition of topic from the beginning up to its high watermark.
func (c *cluster) readAll(topic string, partitions int) [][]string {
	c.t.Helper()
	adm := kadm.NewClient(c.kafkaClient())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		c.t.Fatal(err)
	}
	out := make([][]string, partitions)
	want := 0
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want += int(o.Offset)
		offsets[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl := c.kafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("read %d of %d records of %s: %v", got, want, topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			got++
		})
	}
	return out
}

// TestReplicatedAcksAllSurvivesLeaderKill is the new-user scenario with a
// verifier: acks=all, idempotent producers to an RF=3, min.insync.replicas=2 topic; the
// broker leading most partitions is killed with SIGKILL. Produce carries on within
// seconds, no acknowledged record is lost or duplicated, and the restarted broker
// rejoins every ISR.
func TestReplicatedAcksAllSurvivesLeaderKill(t *testing.T) {
	c := newCluster(t)
	const parts = 6
	createTopic(t, c.brokers[0].addr, withConfig(newTopic("rep", parts, 3), "min.insync.replicas", "2"))
	before := c.waitFullISR("rep", 20*time.Second)

	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	var mu sync.Mutex
	acked := make([][]string, parts)
	var lastAck time.Time
	var longestGap time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				v := fmt.Sprintf("%d-%06d", p, seq)
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "rep", Partition: int32(p), Value: []byte(v)}).FirstErr(); err != nil {
					t.Errorf("partition %d record %d not acknowledged within the delivery timeout: %v", p, seq, err)
					return
				}
				mu.Lock()
				acked[p] = append(acked[p], v)
				now := time.Now()
				if !lastAck.IsZero() && now.Sub(lastAck) > longestGap {
					longestGap = now.Sub(lastAck)
				}
				lastAck = now
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)

	leads := map[int32]int{}
	for _, p := range before {
		leads[p.leader]++
	}
	victim := int32(4)
	for id, n := range leads {
		if n > leads[victim] {
			victim = id
		}
	}
	c.broker(victim).kill9()
	t.Logf("killed broker %d, which led %d of %d partitions", victim, leads[victim], parts)
	time.Sleep(3 * sessionTimeout)
	c.broker(victim).start()
	c.waitBrokerReady(c.broker(victim))
	after := c.waitFullISR("rep", 60*time.Second)
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	for i, p := range after {
		if !slices.Contains(p.isr, victim) {
			t.Errorf("partition %d: restarted broker %d not back in the ISR %v", i, victim, p.isr)
		}
	}

	total := checkExactlyOnceInOrder(t, acked, c.readAll("rep", parts))
	t.Logf("%d records acknowledged; longest gap between acknowledgements %v (session timeout %v)", total, longestGap, sessionTimeout)
	if longestGap > sessionTimeout+5*time.Second {
		t.Errorf("produce unavailable for %v, well beyond the %v session timeout", longestGap, sessionTimeout)
	}
}

// TestRecreatedTopicNeverServesOldRecords: a topic is deleted and recreated under the
// same name while one of its replicas is down. When that broker comes back, its old
// directory (another topic id) is set aside, it replicates the new topic, and once it
// is the only replica left it serves exactly the new topic's records.
func TestRecreatedTopicNeverServesOldRecords(t *testing.T) {
	c := newCluster(t)
	produce := func(values ...string) {
		t.Helper()
		cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second), kgo.DefaultProduceTopic("re"))
		defer cl.Close()
		for _, v := range values {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
	}
	createTopic(t, c.brokers[0].addr, newTopic("re", 1, 3))
	c.waitFullISR("re", 20*time.Second)
	produce("old-1", "old-2", "old-3")
	// Broker 6 holds the old records, then goes away.
	testutil.Eventually(t, 30*time.Second, "broker 6 caught up", func() bool {
		b, err := os.ReadFile(filepath.Join(c.broker(6).dir, "data", "replication-offset-checkpoint"))
		return err == nil && strings.Contains(string(b), "re 0 3")
	})
	c.broker(6).kill9()

	adm := kadm.NewClient(c.kafkaClient())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "topic re gone", func() bool {
		resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
		if err != nil {
			return false
		}
		_, ok := topicState(resp, "re")
		return !ok
	})
	// Recreate it on brokers 4 and 5 (6 is down) and then 6 joins as a replica.
	req := newTopic("re", -1, -1)
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{6, 4, 5}
	req.Topics[0].ReplicaAssignment = append(req.Topics[0].ReplicaAssignment, ra)
	createTopic(t, c.brokers[0].addr, req)
	produce("new-1")

	c.broker(6).start()
	c.waitBrokerReady(c.broker(6))
	c.waitFullISR("re", 60*time.Second)
	entries, _ := os.ReadDir(filepath.Join(c.broker(6).dir, "data"))
	aside := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "re-0.") && strings.HasSuffix(e.Name(), "-delete") {
			aside++
		}
	}
	if aside != 1 {
		t.Errorf("broker 6: want the old re-0 directory set aside, found %d", aside)
	}
	// Leave broker 6 as the only replica: it must serve the new topic only.
	c.broker(4).kill9()
	c.broker(5).kill9()
	testutil.Eventually(t, 30*time.Second, "broker 6 leading re", func() bool {
		resp, err := metadataFrom(context.Background(), c.broker(6).addr)
		if err != nil {
			return false
		}
		ps, ok := topicState(resp, "re")
		return ok && ps[0].leader == 6
	})
	cl := c.kafkaClient(kgo.ConsumeTopics("re"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		pcancel()
	}
	if !slices.Equal(got, []string{"new-1"}) {
		t.Fatalf("broker 6 serves %v, want only [new-1]", got)
	}
}

// produceLoop produces numbered acks=all records to every partition of topic until
// stopped, and reports the longest time without an acknowledgement.
type produceLoop struct {
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	acked      int
	lastAck    time.Time
	longestGap time.Duration
	errs       []error
}

func (c *cluster) startProducing(topic string, parts int) *produceLoop {
	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	ctx, cancel := context.WithCancel(context.Background())
	pl := &produceLoop{cancel: cancel, lastAck: time.Now()}
	for p := range parts {
		pl.wg.Add(1)
		go func() {
			defer pl.wg.Done()
			for ctx.Err() == nil {
				err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("x")}).FirstErr()
				pl.mu.Lock()
				if err != nil {
					pl.errs = append(pl.errs, err)
				} else {
					pl.acked++
					now := time.Now()
					pl.longestGap = max(pl.longestGap, now.Sub(pl.lastAck))
					pl.lastAck = now
				}
				pl.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return pl
}

func (pl *produceLoop) stop() (acked int, gap time.Duration, errs []error) {
	pl.cancel()
	pl.wg.Wait()
	return pl.acked, pl.longestGap, pl.errs
}

// TestRollingRestartKeepsProducing: every broker in turn gets SIGTERM (a controlled
// shutdown moves its leaderships away first) and comes back; an acks=all producer to an
// RF=3, min.insync.replicas=2 topic is never stalled for long.
func TestRollingRestartKeepsProducing(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, withConfig(newTopic("roll", 3, 3), "min.insync.replicas", "2"))
	c.waitFullISR("roll", 20*time.Second)
	pl := c.startProducing("roll", 3)
	for _, b := range c.brokers {
		time.Sleep(500 * time.Millisecond)
		b.terminate()
		b.start()
		c.waitBrokerReady(b)
		c.waitFullISR("roll", 60*time.Second)
	}
	time.Sleep(500 * time.Millisecond)
	acked, gap, errs := pl.stop()
	t.Logf("rolling restart of 3 brokers: %d records acknowledged, longest gap %v", acked, gap)
	if len(errs) > 0 {
		t.Errorf("%d records failed, first: %v", len(errs), errs[0])
	}
	// Without the controlled shutdown, a partition led by the stopping broker waits for
	// the session timeout; with it, leadership moves before the listener closes.
	if gap >= sessionTimeout {
		t.Errorf("produce stalled for %v during a controlled restart (session timeout %v)", gap, sessionTimeout)
	}
}

// TestDataPlaneSurvivesQuorumLoss: with every controller down, brokers keep serving on
// the metadata they have, as Kafka's do: acks=all produce and consume go on, since
// followers keep fetching and the high watermark keeps moving.
func TestDataPlaneSurvivesQuorumLoss(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, withConfig(newTopic("dp", 3, 3), "min.insync.replicas", "2"))
	c.waitFullISR("dp", 20*time.Second)
	// The producer starts first: its producer id comes from the quorum.
	pl := c.startProducing("dp", 3)
	time.Sleep(500 * time.Millisecond)
	for _, p := range c.controllers {
		p.kill9()
	}
	time.Sleep(3 * sessionTimeout) // well past every broker's lease
	acked, gap, errs := pl.stop()
	t.Logf("without a controller quorum: %d records acknowledged, longest gap %v", acked, gap)
	if gap > time.Second || len(errs) > 0 {
		t.Fatalf("produce without the quorum: %d acknowledged, errors %v", acked, errs)
	}
	got := c.readAll("dp", 3)
	n := 0
	for _, p := range got {
		n += len(p)
	}
	if n < acked {
		t.Fatalf("consumed %d records, %d were acknowledged", n, acked)
	}
	for _, p := range c.controllers {
		p.start()
	}
	c.activeController(30 * time.Second)
	c.waitFullISR("dp", 30*time.Second)
}
