package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
)

// TestTransactionSurvivesPartitionLeaderKill: a transaction is aborted, and the next one
// is left open while the partition's leader is killed with SIGKILL. The new leader built
// the same producer state from the batches it replicated (the open transaction and the
// aborted one's index entry), so the commit's marker ends the open transaction there,
// and a read_committed consumer sees each committed record once and no aborted one.
func TestTransactionSurvivesPartitionLeaderKill(t *testing.T) {
	c := newCluster(t)
	createTopic(t, c.brokers[0].addr, withConfig(newTopic("txnp", 1, 3), "min.insync.replicas", "2"))
	c.waitTopicEverywhere("txnp")
	leader := c.waitFullISR("txnp", 30*time.Second)[0].leader
	var seeds []string
	for _, b := range c.brokers {
		if b.id != leader {
			seeds = append(seeds, b.addr)
		}
	}
	cl := c.kafkaClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("leader-kill"), kgo.TransactionTimeout(60*time.Second),
		kgo.DefaultProduceTopic("txnp"), kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryTimeout(60*time.Second), kgo.RequestRetries(600), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("aborted", 10)
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("committed", 10)
	t.Logf("killing partition leader %d with the transaction open", leader)
	c.broker(leader).kill9()
	// The new leader holds read_committed consumers at the open transaction's first
	// offset (10 aborted records and their marker come before it).
	lc := c.liveClient()
	latest := func(iso int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID, req.IsolationLevel = -1, iso
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "txnp"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		resp, err := req.RequestWith(ctx, lc)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			return -1
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	testutil.Eventually(t, 30*time.Second, "a new leader with every record committed", func() bool { return latest(0) == 21 })
	if lso := latest(1); lso != 11 {
		t.Fatalf("the new leader's last stable offset is %d, want 11, where the open transaction began", lso)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the leader's death: %v", err)
	}
	checkCommittedOnce(t, c.readCommitted("txnp", 10), numbered("committed", 10))
}
