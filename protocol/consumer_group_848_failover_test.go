package protocol_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupKIP848CoordinatorFailover: franz-go KIP-848 consumers of a topic on
// two brokers of a three-node cluster; the third broker coordinates the group and is
// killed with SIGKILL. The broker that takes over loads the group from the quorum: the
// members carry on at the same group epoch with the same member ids (no rejoin, no
// reassignment), no partition is owned twice, and every record is consumed.
func TestConsumerGroupKIP848CoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a three-node cluster")
	}
	nodes := startShaleCluster(t, "--group.consumer.min.heartbeat.interval.ms=100", "--group.consumer.heartbeat.interval.ms=200")
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.addr)
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	admCl := mustClient(t, kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(admCl)
	for {
		bs, err := adm.ListBrokers(ctx)
		if err == nil && len(bs) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster never listed 3 brokers: %v %v", bs, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	const groupID, topic, parts = "failover848", "fo848", 6
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = groupID
	resp, err := req.RequestWith(ctx, admCl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %+v", err, resp)
	}
	coord := resp.NodeID
	var others []int32
	var liveSeeds []string
	for _, n := range nodes {
		if n.id != coord {
			others = append(others, n.id)
			liveSeeds = append(liveSeeds, n.addr)
		}
	}
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	for p := int32(0); p < parts; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{others[p%2]}
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	creq.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	creq.TimeoutMillis = 10000
	if cresp, err := creq.RequestWith(ctx, admCl); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, cresp)
	}

	own := newOwnership()
	for i := range 3 {
		name := fmt.Sprintf("m%d", i)
		cl := mustClient(t, append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
			kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100 * time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		}, own.callbacks(name)...)...)
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			consumeKgo(cctx, cl, own.record)
		}()
		t.Cleanup(func() { cancel(); <-done })
	}

	// A new client for each describe: a raw request's client keeps a coordinator it
	// found (the killed broker, asked just after the kill) through dial errors.
	describe := func(seeds []string) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		defer cl.Close()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{groupID}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, cl)
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		return resp.Groups[0], nil
	}
	stable := func(seeds []string) kmsg.ConsumerGroupDescribeResponseGroup {
		t.Helper()
		var last kmsg.ConsumerGroupDescribeResponseGroup
		for {
			g, err := describe(seeds)
			if err == nil {
				last = g
			}
			total := 0
			for _, m := range g.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					total += len(tp.Partitions)
				}
			}
			if err == nil && g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == 3 && total == parts {
				return g
			}
			if ctx.Err() != nil {
				t.Fatalf("group never stable with 3 members: %+v %v", last, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	prod := mustClient(t, kgo.SeedBrokers(liveSeeds...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produced := 0
	produce := func(n int) {
		t.Helper()
		for range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "f%05d", produced)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			produced++
		}
	}
	consumed := func() {
		t.Helper()
		for own.count() < produced {
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records", own.count(), produced)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	before := stable(seeds)
	produce(300)
	consumed()
	for _, n := range nodes {
		if n.id == coord {
			n.kill()
		}
	}
	produce(300)
	consumed()
	after := stable(liveSeeds)
	ids := func(g kmsg.ConsumerGroupDescribeResponseGroup) []string {
		var out []string
		for _, m := range g.Members {
			out = append(out, m.MemberID)
		}
		slices.Sort(out)
		return out
	}
	if after.Epoch != before.Epoch || !slices.Equal(ids(after), ids(before)) {
		t.Fatalf("after the failover: epoch %d members %v; before: epoch %d members %v (the members rejoined instead of continuing)",
			after.Epoch, ids(after), before.Epoch, ids(before))
	}
	own.check(t, "f%05d", produced)
}
