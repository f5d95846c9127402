package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// BenchmarkGroupRebalance measures how long a 10-member franz-go group takes to
// rebalance when an eleventh member joins and when it leaves again, over the wire
// against the in-process broker: from the change until the group is Stable with every
// member holding its assignment. Members heartbeat every 100ms, which bounds how soon
// they learn of a rebalance (Kafka clients default to 3s); the coordinator's own share is
// group's BenchmarkRebalance10Members.
func BenchmarkGroupRebalance(b *testing.B) {
	for _, bal := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
		b.Run("balancer="+bal.ProtocolName(), func(b *testing.B) {
			gb := startGroupBroker(b)
			gb.createTopic("rb", 20, nil)
			const members = 10
			groupID := "rebalance-" + bal.ProtocolName()
			opts := func() []kgo.Opt {
				return []kgo.Opt{
					kgo.SeedBrokers(gb.addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("rb"), kgo.Balancers(bal),
					kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
					kgo.FetchMaxWait(100 * time.Millisecond),
				}
			}
			var stop []func()
			b.Cleanup(func() {
				for _, s := range stop {
					s()
				}
			})
			startMember := func() func() {
				cl, err := kgo.NewClient(opts()...)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					for ctx.Err() == nil {
						if cl.PollFetches(ctx).IsClientClosed() {
							return
						}
					}
				}()
				return func() { cancel(); <-done; cl.Close() }
			}
			for i := 0; i < members; i++ {
				stop = append(stop, startMember())
			}
			waitGroupStable(b, gb.groups, groupID, members, 20)
			var total time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				leave := startMember()
				waitGroupStable(b, gb.groups, groupID, members+1, 20)
				mid := time.Now()
				leave()
				waitGroupStable(b, gb.groups, groupID, members, 20)
				total += mid.Sub(start) + time.Since(mid)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(2*b.N), "ms/rebalance")
		})
	}
}

// waitGroupStable polls the coordinator until the group is Stable with n members that
// together own all partitions.
func waitGroupStable(b *testing.B, groups *group.Coordinator, id string, n, partitions int) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := groups.DescribeGroups(context.Background(), []string{id})[0]
		if d.State == group.Stable && len(d.Members) == n {
			owned := 0
			for _, m := range d.Members {
				var a kmsg.ConsumerMemberAssignment
				if a.ReadFrom(m.Assignment) == nil {
					for _, t := range a.Topics {
						owned += len(t.Partitions)
					}
				}
			}
			if owned == partitions {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("group %s not stable with %d members: %v, %d members", id, n, d.State, len(d.Members))
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkOffsetCommitWire measures OffsetCommit round trips from franz-go clients
// (4 partitions a commit) through the Kafka listener and the coordinator into the
// controller quorum (one voter), from 1 and 16 concurrent clients, each committing for
// its own group: the controller's batching of concurrent commits into shared Raft
// records sets the pace. group's BenchmarkCommitOffsets measures the store alone.
func BenchmarkOffsetCommitWire(b *testing.B) {
	gb := startGroupBroker(b)
	gb.createTopic("c", 64, nil)
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			cls := make([]*kgo.Client, clients)
			for i := range cls {
				cls[i] = gb.client()
				// Connect before the clock starts.
				if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cls[i]); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w, cl := range cls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Group, req.Generation = fmt.Sprintf("wire-%d", w), -1
					t := kmsg.NewOffsetCommitRequestTopic()
					t.Topic = "c"
					for p := 0; p < 4; p++ {
						pp := kmsg.NewOffsetCommitRequestTopicPartition()
						pp.Partition = int32((w*4 + p) % 64)
						t.Partitions = append(t.Partitions, pp)
					}
					req.Topics = []kmsg.OffsetCommitRequestTopic{t}
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						for p := range req.Topics[0].Partitions {
							req.Topics[0].Partitions[p].Offset = i
						}
						resp, err := req.RequestWith(context.Background(), cl)
						if err == nil {
							err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
						}
						if err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
		})
	}
}
