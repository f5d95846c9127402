package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// ownership tracks which member owns each partition from the clients' callbacks: a
// member is given a partition only after its previous owner's revocation callback has
// run (the broker waits for the revoking heartbeat, which franz-go sends after it).
type ownership struct {
	mu        sync.Mutex
	owner     map[int32]string
	conflicts []string
	seen      map[string]int
}

func (o *ownership) assigned(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, parts := range ps {
		for _, p := range parts {
			if cur, ok := o.owner[p]; ok && cur != member {
				o.conflicts = append(o.conflicts, fmt.Sprintf("partition %d given to %s while %s owns it", p, member, cur))
			}
			o.owner[p] = member
		}
	}
}

func (o *ownership) released(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, parts := range ps {
		for _, p := range parts {
			if o.owner[p] == member {
				delete(o.owner, p)
			}
		}
	}
}

func (o *ownership) record(v string) {
	o.mu.Lock()
	o.seen[v]++
	o.mu.Unlock()
}

func (o *ownership) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// TestConsumerGroupKIP848 runs franz-go consumers with ServerSideBalancer (KIP-848)
// joining and leaving while a producer writes: no partition is owned by two members at
// once, and every record is consumed.
func TestConsumerGroupKIP848(t *testing.T) {
	gcfg := &group.Config{NodeID: 1, ConsumerHeartbeatInterval: 100 * time.Millisecond, ConsumerSessionTimeout: 10 * time.Second}
	tb := launch(t, t.TempDir(), nil, brokerConfig(), gcfg)
	const topic, groupID, parts = "kip848", "g848", 12
	tb.createTopic(topic, parts, nil)

	own := &ownership{owner: map[int32]string{}, seen: map[string]int{}}
	type member struct {
		cl     *kgo.Client
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(name string, balancer kgo.GroupBalancer) *member {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(tb.addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.Balancers(balancer), kgo.ServerSideBalancer(),
			kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assigned(name, ps) }),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
				// Commit what was processed before letting the partitions go, so the
				// next owner starts after it.
				cl.CommitMarkedOffsets(ctx)
				own.released(name, ps)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(name, ps) }),
		)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m := &member{cl: cl, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			consumeKgo(ctx, cl, own.record)
		}()
		return m
	}
	stop := func(m *member) {
		m.cancel()
		<-m.done
		m.cl.Close() // revokes (committing), then leaves with epoch -1
	}

	producer := tb.client(kgo.DefaultProduceTopic(topic))
	defer producer.Close()
	produced := 0
	produce := func(n int) {
		t.Helper()
		for range n {
			rec := &kgo.Record{Value: fmt.Appendf(nil, "r%06d", produced)}
			produced++
			if err := producer.ProduceSync(ctxTimeout(t, 30*time.Second), rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitConsumed := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for own.count() < produced {
			if time.Now().After(deadline) {
				t.Fatalf("consumed %d distinct records of %d", own.count(), produced)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	ms := []*member{start("a", kgo.CooperativeStickyBalancer()), start("b", kgo.CooperativeStickyBalancer())}
	produce(300)
	ms = append(ms, start("c", kgo.CooperativeStickyBalancer()), start("d", kgo.CooperativeStickyBalancer()))
	produce(300)
	waitConsumed()

	// The group is a consumer group with every partition assigned once.
	adm := kadm.NewClient(tb.client())
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{groupID}
		resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), tb.client())
		if err != nil {
			t.Fatal(err)
		}
		g := resp.Groups[0]
		total := 0
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				total += len(tp.Partitions)
			}
		}
		if g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == 4 && total == parts && g.AssignorName == group.UniformAssignor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never settled: %+v", g)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// DescribeGroups (classic, v0-v5) reports a consumer group Dead without an error,
	// as Kafka does before v6.
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{groupID}
	dresp, err := dreq.RequestWith(ctxTimeout(t, 10*time.Second), tb.client())
	if err != nil || dresp.Groups[0].ErrorCode != 0 || dresp.Groups[0].State != "Dead" || len(dresp.Groups[0].Members) != 0 {
		t.Fatalf("DescribeGroups of a consumer group: %v %+v", err, dresp)
	}
	listed, err := adm.ListGroups(ctxTimeout(t, 10*time.Second), "Stable")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed[groupID]; !ok || l.ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", listed)
	}

	// Members leave and join while records keep coming.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stop(ms[0])
		stop(ms[1])
	}()
	produce(200)
	wg.Wait()
	ms = append(ms[2:], start("e", kgo.CooperativeStickyBalancer()))
	produce(200)
	waitConsumed()
	for _, m := range ms {
		stop(m)
	}

	own.mu.Lock()
	defer own.mu.Unlock()
	if len(own.conflicts) > 0 {
		t.Fatalf("partitions owned twice: %v", own.conflicts)
	}
	for i := range produced {
		if own.seen[fmt.Sprintf("r%06d", i)] == 0 {
			t.Fatalf("record r%06d never consumed", i)
		}
	}
	// Committed offsets cover everything: a new member of the group reads nothing.
	offs, err := adm.FetchOffsets(ctxTimeout(t, 10*time.Second), groupID)
	if err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != int64(produced) {
		t.Fatalf("committed offsets sum to %d, want %d", committed, produced)
	}
}
