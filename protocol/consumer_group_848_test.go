package protocol_test

import (
	"context"
	"fmt"
	"maps"
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
	given     map[string]bool // members ever given a partition
}

func newOwnership() *ownership {
	return &ownership{owner: map[int32]string{}, seen: map[string]int{}, given: map[string]bool{}}
}

// callbacks are the options by which franz-go member name reports its partitions to o.
func (o *ownership) callbacks(name string) []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			// Commit what was processed before letting the partitions go, so the
			// next owner starts after it.
			cl.CommitMarkedOffsets(ctx)
			o.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.released(name, ps) }),
	}
}

// startMember starts franz-go member name of groupID, consuming topic from its start
// and committing its marked offsets, and reporting its partitions and records to o;
// extra are its balancer and timing options.
func (o *ownership) startMember(t *testing.T, addr, groupID, topic, name string, extra ...kgo.Opt) *kgoMember {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
	}, o.callbacks(name)...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kgoMember{id: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		consumeKgo(ctx, cl, o.record)
	}()
	return m
}

func (o *ownership) assigned(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, parts := range ps {
		if len(parts) > 0 {
			o.given[member] = true
		}
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

// everGiven is a copy of the set of members that have been given a partition.
func (o *ownership) everGiven() map[string]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.given)
}

// waitConsumed waits until o has seen n distinct records.
func (o *ownership) waitConsumed(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for o.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d distinct records of %d", o.count(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check fails t if a partition was given to a member while another owned it, or if a
// record of value fmt.Sprintf(format, i), i < n, was never consumed.
func (o *ownership) check(t *testing.T, format string, n int) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.conflicts) > 0 {
		t.Fatalf("partitions owned twice: %v", o.conflicts)
	}
	for i := range n {
		if v := fmt.Sprintf(format, i); o.seen[v] == 0 {
			t.Fatalf("record %s never consumed", v)
		}
	}
}

// numberedValue is the value of record i from a numberedProducer.
const numberedValue = "r%06d"

// numberedProducer produces records r000000, r000001, ... one at a time; n counts them.
type numberedProducer struct {
	cl *kgo.Client
	n  int
}

func (p *numberedProducer) produce(t *testing.T, n int) {
	t.Helper()
	for range n {
		rec := &kgo.Record{Value: fmt.Appendf(nil, numberedValue, p.n)}
		p.n++
		if err := p.cl.ProduceSync(ctxTimeout(t, 30*time.Second), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsumerGroupKIP848 runs franz-go consumers with ServerSideBalancer (KIP-848)
// joining and leaving while a producer writes: no partition is owned by two members at
// once, and every record is consumed.
func TestConsumerGroupKIP848(t *testing.T) {
	gcfg := &group.Config{NodeID: 1, ConsumerHeartbeatInterval: 100 * time.Millisecond, ConsumerSessionTimeout: 10 * time.Second}
	tb := launch(t, t.TempDir(), nil, brokerConfig(), gcfg)
	const topic, groupID, parts = "kip848", "g848", 12
	tb.createTopic(topic, parts, nil)

	own := newOwnership()
	start := func(name string) *kgoMember {
		return own.startMember(t, tb.addr, groupID, topic, name, kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())
	}

	prod := &numberedProducer{cl: tb.client(kgo.DefaultProduceTopic(topic))}
	defer prod.cl.Close()

	ms := []*kgoMember{start("a"), start("b")}
	prod.produce(t, 300)
	ms = append(ms, start("c"), start("d"))
	prod.produce(t, 300)
	own.waitConsumed(t, prod.n)

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
		ms[0].leave() // revokes (committing), then leaves with epoch -1
		ms[1].leave()
	}()
	prod.produce(t, 200)
	wg.Wait()
	ms = append(ms[2:], start("e"))
	prod.produce(t, 200)
	own.waitConsumed(t, prod.n)
	for _, m := range ms {
		m.leave()
	}
	own.check(t, numberedValue, prod.n)
	// Committed offsets cover everything: a new member of the group reads nothing.
	offs, err := adm.FetchOffsets(ctxTimeout(t, 10*time.Second), groupID)
	if err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != int64(prod.n) {
		t.Fatalf("committed offsets sum to %d, want %d", committed, prod.n)
	}
}
