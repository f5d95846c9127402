package brokertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
)

// A broker with every coordinator takes a transactional write, and the record is there
// after the broker and its quorum restart on the same directories; a reopened second
// broker serves again on its address.
func TestBrokerServesAndRestarts(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Protocol = protocol.Config{DefaultReplicationFactor: 1}
		o.Groups = &group.Config{}
		o.Txn = &txn.Config{}
	}))
	if b.Groups() == nil || b.Txn() == nil || b.Shares() != nil {
		t.Fatalf("coordinators: groups %v, txn %v, shares %v", b.Groups() != nil, b.Txn() != nil, b.Shares() != nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if res := b.Store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "t", NumPartitions: 1, ReplicationFactor: 1}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	b.WaitApplied("topic t", func(im *metadata.Image) bool { return im.Topic("t") != nil && b.Replicas().Replica("t", 0) != nil })
	cl := b.Client(kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	b2 := b.AddBroker(2)
	b.WaitApplied("broker 2", func(im *metadata.Image) bool { br, ok := im.Brokers[2]; return ok && !br.Fenced })
	addr := b2.Addr
	b2 = b2.Reopen()
	if b2.Addr != addr {
		t.Fatalf("reopened on %s, want %s", b2.Addr, addr)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}

	b = b.Restart()
	cons := b.Client(kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	fs := cons.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("after restart: %d records, want the committed one", len(recs))
	}
}
