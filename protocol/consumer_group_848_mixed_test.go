package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// TestConsumerGroupKIP848MixedProtocols runs classic franz-go consumers
// (cooperative-sticky) and KIP-848 ones (ServerSideBalancer) in one group while a
// producer writes: the live classic group is upgraded when the first KIP-848 member
// joins, its classic members are assigned by the server, and it is downgraded when the
// last KIP-848 member leaves. No partition is owned by two members at once, and every
// record is consumed.
func TestConsumerGroupKIP848MixedProtocols(t *testing.T) {
	gcfg := &group.Config{NodeID: 1, ConsumerHeartbeatInterval: 100 * time.Millisecond, ConsumerSessionTimeout: 10 * time.Second}
	tb := launch(t, t.TempDir(), nil, brokerConfig(), gcfg)
	const topic, groupID, parts = "mixed848", "gmixed", 12
	tb.createTopic(topic, parts, nil)

	own := &ownership{owner: map[int32]string{}, seen: map[string]int{}}
	var gotMu sync.Mutex
	got := map[string]bool{} // members ever assigned a partition
	type member struct {
		cl     *kgo.Client
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(name string, serverSide bool) *member {
		opts := []kgo.Opt{
			kgo.SeedBrokers(tb.addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(10 * time.Second),
			kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100 * time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				own.assigned(name, ps)
				if len(ps[topic]) > 0 {
					gotMu.Lock()
					got[name] = true
					gotMu.Unlock()
				}
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
				cl.CommitMarkedOffsets(ctx)
				own.released(name, ps)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(name, ps) }),
		}
		if serverSide {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
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
		m.cl.Close()
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
	groupType := func() string {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), tb.client())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range resp.Groups {
			if g.Group == groupID {
				return g.GroupType
			}
		}
		return ""
	}
	waitType := func(want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for groupType() != want {
			if time.Now().After(deadline) {
				t.Fatalf("group type %q, want %q", groupType(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	classic1 := start("classic1", false)
	produce(200)
	waitConsumed()
	if typ := groupType(); typ != "classic" {
		t.Fatalf("group type %q with only a classic member, want classic", typ)
	}
	kip1 := start("kip1", true)
	waitType("consumer")
	produce(200)
	classic2 := start("classic2", false)
	kip2 := start("kip2", true)
	produce(200)
	waitConsumed()
	// Every member, classic or not, has been given partitions by the server.
	deadline := time.Now().Add(60 * time.Second)
	for {
		gotMu.Lock()
		all := got["classic1"] && got["classic2"] && got["kip1"] && got["kip2"]
		gotMu.Unlock()
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members assigned partitions: %v, want all four", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if typ := groupType(); typ != "consumer" {
		t.Fatalf("group type %q with KIP-848 members, want consumer", typ)
	}

	// Both KIP-848 members leave under load: the group goes back to classic.
	stop(kip1)
	produce(100)
	stop(kip2)
	waitType("classic")
	produce(200)
	waitConsumed()
	stop(classic1)
	produce(100)
	waitConsumed()
	stop(classic2)

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
}
