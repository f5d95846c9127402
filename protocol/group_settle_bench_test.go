package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/coordinator/group"
)

// BenchmarkGroupSettle measures how long a 50-member group takes to settle after a 51st
// member joins, with the classic protocol (cooperative-sticky, client-side assignment)
// and with the consumer protocol (KIP-848, server-side uniform assignor), side by side
// in one run on one broker. Settled: every partition has an owner and the newcomer owns
// its share (102 partitions: 2). Both protocols heartbeat every 500 ms. Each iteration
// adds a member, times it, then closes it and lets the group settle again untimed.
//
//	go test -run '^$' -bench BenchmarkGroupSettle -benchtime 5x ./protocol
func BenchmarkGroupSettle(b *testing.B) {
	for _, proto := range []string{"classic", "consumer"} {
		b.Run(proto, func(b *testing.B) { benchGroupSettle(b, proto == "consumer") })
	}
}

func benchGroupSettle(b *testing.B, serverSide bool) {
	const members, parts = 50, 102
	gcfg := &group.Config{NodeID: 1, ConsumerHeartbeatInterval: 500 * time.Millisecond, InitialRebalanceDelay: 100 * time.Millisecond}
	tb := launch(b, b.TempDir(), nil, brokerConfig(), gcfg)
	const topic, groupID = "settle", "settle"
	tb.createTopic(topic, parts, nil)

	var mu sync.Mutex
	owner := map[int32]string{}
	owned := map[string]int{}
	start := func(name string) *kgo.Client {
		opts := []kgo.Opt{
			kgo.SeedBrokers(tb.addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(500 * time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				for _, p := range ps[topic] {
					owner[p] = name
					owned[name]++
				}
				mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				for _, p := range ps[topic] {
					if owner[p] == name {
						delete(owner, p)
						owned[name]--
					}
				}
				mu.Unlock()
			}),
		}
		opts = append(opts, kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			mu.Lock()
			for _, p := range ps[topic] {
				if owner[p] == name {
					delete(owner, p)
					owned[name]--
				}
			}
			mu.Unlock()
		}))
		if serverSide {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	settled := func(who string, share int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(owner) == parts && (who == "" || owned[who] >= share)
		}
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(3 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("%s: not settled", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var cls []*kgo.Client
	for i := range members {
		cls = append(cls, start(fmt.Sprintf("m%02d", i)))
	}
	defer func() {
		for _, cl := range cls {
			cl.Close()
		}
	}()
	waitFor("initial group", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(owner) != parts {
			return false
		}
		for i := range members {
			if owned[fmt.Sprintf("m%02d", i)] < parts/(members+1) {
				return false
			}
		}
		return true
	})
	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		name := fmt.Sprintf("new%d", i)
		t0 := time.Now()
		cl := start(name)
		waitFor(name, settled(name, parts/(members+1)))
		total += time.Since(t0)
		b.StopTimer()
		cl.Close()
		waitFor("after "+name+" left", settled("", 0))
		time.Sleep(2 * time.Second) // let the survivors' last heartbeats land
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "settle-ms/op")
}
