package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
)

// TestCompactedTopicSurvivesLeaderKill: keyed records and tombstones go with acks=all
// (idempotent producer) to a compacted RF=3 topic; every replica compacts its own log;
// the leader is killed with SIGKILL and comes back. A new consumer then reads, from
// the new leader's compacted log, each key's latest value and no deleted key.
func TestCompactedTopicSurvivesLeaderKill(t *testing.T) {
	c := newCluster(t, "--log.cleaner.backoff.ms=100")
	req := withConfig(newTopic("table", 1, 3), "min.insync.replicas", "2")
	for _, kv := range [][2]string{{"cleanup.policy", "compact"}, {"segment.bytes", "2048"}, {"min.cleanable.dirty.ratio", "0.01"}, {"delete.retention.ms", "0"}} {
		req = withConfig(req, kv[0], kv[1])
	}
	createTopic(t, c.brokers[0].addr, req)
	before := c.waitFullISR("table", 20*time.Second)

	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(60*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	want := map[string]string{}
	produced := 0
	produce := func(round int) {
		for k := range 20 {
			key := fmt.Sprintf("key-%02d", k)
			r := &kgo.Record{Topic: "table", Key: []byte(key), Value: fmt.Appendf(nil, "v%d", round)}
			if round%10 == 9 && k%4 == 0 {
				r.Value = nil
				delete(want, key)
			} else {
				want[key] = string(r.Value)
			}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			produced++
		}
	}
	for round := range 30 {
		produce(round)
	}
	victim := before[0].leader
	c.broker(victim).kill9()
	time.Sleep(3 * sessionTimeout)
	for round := 30; round < 40; round++ {
		produce(round)
	}
	c.broker(victim).start()
	c.waitBrokerReady(c.broker(victim))
	c.waitFullISR("table", 60*time.Second)

	var got map[string]string
	var read int
	testutil.Eventually(t, 60*time.Second, "a compacted read", func() bool {
		got, read = c.readTable(ctx, "table")
		return read < produced/2
	})
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s: read %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v != "" {
			t.Errorf("deleted key %s reads %q", k, v)
		}
	}
	t.Logf("produced %d records; a new consumer reads %d", produced, read)
}

// readTable reads partition 0 of topic from its start to its end offset: key -> value
// (a tombstone reads as "") and how many records.
func (c *cluster) readTable(ctx context.Context, topic string) (map[string]string, int) {
	c.t.Helper()
	adm := kadm.NewClient(c.kafkaClient())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		c.t.Fatal(err)
	}
	end := ends[topic][0].Offset
	cl := c.kafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	table := map[string]string{}
	n := 0
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			table[string(r.Key)] = string(r.Value)
			n++
			last = r.Offset
		})
		if last >= end-1 || fctx.Err() != nil {
			return table, n
		}
	}
}
