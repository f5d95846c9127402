package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeCounter counts the requests a client writes, by key.
type writeCounter struct {
	mu sync.Mutex
	n  map[int16]int
}

func (c *writeCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n == nil {
			c.n = map[int16]int{}
		}
		c.n[key]++
	}
}

func (c *writeCounter) count(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key.Int16()]
}

// TestTransactionsV2AcrossBrokers: consume-transform-produce under transactions v2 (the
// default transaction.version 2) with the group and the transactional id coordinated by
// different brokers and the output partitions led by several: Produce v12's partitions
// join the transaction through AddPartitionsToTxn v5 from their leaders, TxnOffsetCommit
// v5's group through one from the group's coordinator (as its __consumer_offsets
// partition), and the output holds every input record once.
func TestTransactionsV2AcrossBrokers(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, newTopic("v2-in", 3, 3))
	createTopic(t, c.brokers[0].addr, newTopic("v2-out", 3, 3))
	c.waitTopicEverywhere("v2-in")
	c.waitTopicEverywhere("v2-out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const group = "v2-group"
	adm := kadm.NewClient(c.kafkaClient())
	gco := adm.FindGroupCoordinators(ctx, group)[group]
	if gco.Err != nil {
		t.Fatal(gco.Err)
	}
	id := ""
	for i := range 100 {
		cand := fmt.Sprintf("v2-txn-%d", i)
		if c.txnCoordinator(cand) != gco.NodeID {
			id = cand
			break
		}
	}
	if id == "" {
		t.Fatal("no transactional id coordinated away from the group's coordinator")
	}
	t.Logf("group coordinated by broker %d, transactional id %q by broker %d", gco.NodeID, id, c.txnCoordinator(id))

	const n = 300
	in := c.kafkaClient(kgo.DefaultProduceTopic("v2-in"))
	for i := range n {
		in.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := in.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var reqs writeCounter
	var seeds []string
	for _, b := range c.brokers {
		seeds = append(seeds, b.addr)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.WithHooks(&reqs),
		kgo.TransactionalID(id), kgo.TransactionTimeout(60*time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics("v2-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic("v2-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	seen := 0
	for round := 0; seen < n; round++ {
		if round > 1000 || ctx.Err() != nil {
			t.Fatalf("only %d of %d records transformed", seen, n)
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollFetches(pctx)
		pcancel()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		batch := 0
		fs.EachRecord(func(r *kgo.Record) {
			batch++
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if committed {
			seen += batch
		}
	}
	if a, o := reqs.count(kmsg.AddPartitionsToTxn), reqs.count(kmsg.AddOffsetsToTxn); a != 0 || o != 0 || reqs.count(kmsg.EndTxn) == 0 {
		t.Errorf("the session sent %d AddPartitionsToTxn, %d AddOffsetsToTxn, %d EndTxn: it did not use transactions v2",
			a, o, reqs.count(kmsg.EndTxn))
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("out-%d", i)
	}
	checkCommittedOnce(t, c.readCommitted("v2-out", n), want)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != n {
		t.Fatalf("group committed %d offsets in all, want %d", total, n)
	}
}
