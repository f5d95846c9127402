package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCoordinator asks a broker which broker coordinates a transactional id.
func (c *cluster) txnCoordinator(id string) int32 {
	c.t.Helper()
	cl := c.kafkaClient()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = id, 1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		c.t.Fatalf("FindCoordinator %q: %v", id, err)
	}
	return resp.NodeID
}

// liveClient is a client seeded with the running brokers only: franz-go gives up on a
// request it routes to a seed broker it cannot dial, where it retries a dead broker it
// discovered through metadata.
func (c *cluster) liveClient(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, b := range c.brokers {
		if b.running() {
			seeds = append(seeds, b.addr)
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// readCommitted reads topic with read_committed until want records arrived and a second
// passed without more.
func (c *cluster) readCommitted(topic string, want int) []string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cl := c.liveClient(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	var quietUntil time.Time
	for {
		if len(got) >= want && quietUntil.IsZero() {
			quietUntil = time.Now().Add(time.Second)
		}
		if !quietUntil.IsZero() && time.Now().After(quietUntil) {
			return got
		}
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			c.t.Fatalf("read %d of %d committed records of %s: %v", len(got), want, topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
}

// TestTransactionSurvivesCoordinatorKill: a transactional producer writes to every
// partition, then its transaction coordinator is killed with SIGKILL before the commit.
// The coordinator role moves with its coordinator epoch bumped; the new coordinator
// loads the ongoing transaction from the controller quorum and commits it when the
// producer retries its EndTxn, writing the markers to the (possibly new) partition
// leaders. A second transaction is then committed and the coordinator of that one
// killed right after EndTxn answered: whatever markers were left, the next coordinator
// finishes them. read_committed consumers see every committed record exactly once.
func TestTransactionSurvivesCoordinatorKill(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, newTopic("txn", 3, 3))
	c.waitTopicEverywhere("txn")
	const id = "failover-producer"
	opts := []kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(60 * time.Second), kgo.DefaultProduceTopic("txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(60 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.RetryTimeout(60 * time.Second), kgo.RequestRetries(600),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}
	// The coordinator is known before the producer starts: it is seeded with the other
	// brokers (see liveClient).
	first := c.txnCoordinator(id)
	var seeds []string
	for _, b := range c.brokers {
		if b.id != first {
			seeds = append(seeds, b.addr)
		}
	}
	cl := c.kafkaClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(cl *kgo.Client, prefix string, n int) {
		t.Helper()
		for i := range n {
			r := &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
		}
	}

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(cl, "first", 30)
	t.Logf("transaction coordinator of %q: broker %d; killing it before the commit", id, first)
	c.broker(first).kill9()
	start := time.Now()
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the coordinator's death: %v", err)
	}
	t.Logf("commit answered %v after the kill", time.Since(start).Round(time.Millisecond))
	second := c.txnCoordinator(id)
	if second == first {
		t.Fatalf("broker %d still coordinates %q after its death", first, id)
	}

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(cl, "second", 30)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	t.Logf("second transaction committed through broker %d; killing it", second)
	c.broker(second).kill9()
	c.broker(first).start()
	c.waitBrokerReady(c.broker(first))

	checkCommittedOnce(t, c.readCommitted("txn", 60), append(numbered("first", 30), numbered("second", 30)...))

	// After the failovers a producer of the id is fenced by its replacement.
	zombie := c.liveClient(opts...)
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(zombie, "zombie", 3)
	fresh := c.liveClient(opts...)
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("fresh")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie commit: %v, want the producer fenced", err)
	}
	got := c.readCommitted("txn", 61)
	if len(got) != 61 {
		t.Fatalf("read_committed saw %d records after the fenced transaction, want 61", len(got))
	}
}

// TestPreparedTransactionCompletedByNextCoordinator: the commit is decided
// (PrepareCommit committed, EndTxn answered) while one partition's leader is frozen with
// SIGSTOP, so its marker cannot be written; then the coordinator is killed with SIGKILL.
// The broker that takes over the coordinator role finds the transaction in
// PrepareCommit and writes the markers itself, to the partition's new leader once the
// frozen broker is fenced.
func TestPreparedTransactionCompletedByNextCoordinator(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, newTopic("prep", 3, 3))
	c.waitTopicEverywhere("prep")
	const id = "prepared-producer"
	coord := c.txnCoordinator(id)
	resp, err := metadataFrom(context.Background(), c.brokers[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := topicState(resp, "prep")
	frozen := int32(-1)
	for _, p := range parts {
		if p.leader != coord {
			frozen = p.leader
			break
		}
	}
	if frozen < 0 {
		t.Skipf("the coordinator (broker %d) leads every partition", coord)
	}
	var seeds []string
	for _, b := range c.brokers {
		if b.id != coord && b.id != frozen {
			seeds = append(seeds, b.addr)
		}
	}
	cl := c.kafkaClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.DefaultProduceTopic("prep"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(60*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "p-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.broker(frozen).signal(syscall.SIGSTOP)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		c.broker(frozen).signal(syscall.SIGCONT)
		t.Fatalf("commit: %v", err)
	}
	t.Logf("commit decided with broker %d frozen; killing coordinator %d", frozen, coord)
	c.broker(coord).kill9()
	// The frozen broker is fenced after its session timeout and its partitions move.
	time.Sleep(sessionTimeout + time.Second)
	c.broker(frozen).signal(syscall.SIGCONT)

	got := c.readCommitted("prep", 30)
	if len(got) != 30 {
		t.Fatalf("read_committed saw %d records, want 30: %v", len(got), got)
	}
	completedBy := int32(-1)
	for _, b := range c.brokers {
		if b.id != coord && strings.Contains(b.log(), "completing a transaction the previous coordinator left") {
			completedBy = b.id
		}
	}
	if completedBy < 0 {
		t.Fatal("no broker completed the prepared transaction after the coordinator's death")
	}
	t.Logf("broker %d completed the transaction", completedBy)
}
