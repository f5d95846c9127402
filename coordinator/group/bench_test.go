package group

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

// BenchmarkCommitOffsets measures OffsetCommit through the coordinator (validation, then
// the store): each commit is one group's offsets for 4 partitions, from 1, 16 and 256
// concurrent committers (each its own group, as consumers of different groups commit
// concurrently), against a one-voter controller quorum that batches concurrent commits
// into shared Raft records. Compare commits/s within one run.
func BenchmarkCommitOffsets(b *testing.B) {
	node := newTestNode(b)
	store := node.Store()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "t64", NumPartitions: 64, ReplicationFactor: 1}}, false) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	controllertest.WaitFor(b, store, "topic t64", func(im *metadata.Image) bool { return im.Topic("t64") != nil })
	c := New(testConfig(), store)
	b.Cleanup(func() { c.Close() })
	for _, committers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("committers=%d", committers), func(b *testing.B) {
			ctx := context.Background()
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < committers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := CommitRequest{Group: fmt.Sprintf("bench-%d", w), Generation: -1}
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						req.Offsets = req.Offsets[:0]
						for p := 0; p < 4; p++ {
							req.Offsets = append(req.Offsets, metadata.CommittedOffset{Topic: "t64", Partition: int32((w*4 + p) % 64), Offset: i, LeaderEpoch: -1})
						}
						errs, err := c.CommitOffsets(ctx, req)
						if err == nil {
							for _, e := range errs {
								err = e
							}
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
			b.ReportMetric(4*float64(b.N)/elapsed.Seconds(), "offsets/s")
		})
	}
}

// BenchmarkRebalance10Members measures the coordinator's side of a rebalance of a Stable
// 10-member group: from the JoinGroup that starts it (the leader's) through every
// member's rejoin and SyncGroup to Stable. Clients add their own heartbeat interval
// (how soon they learn of the rebalance) on top; protocol's BenchmarkGroupRebalance
// measures it with franz-go over the wire.
func BenchmarkRebalance10Members(b *testing.B) {
	c := New(testConfig(), newTestStore(b))
	b.Cleanup(func() { c.Close() })
	const n = 10
	ids := make([]string, n)
	for i := range ids {
		req := joinReq("g", "")
		req.RequireKnownMemberID = false
		call := c.Join(req)
		if i == 0 {
			r := call.Wait(context.Background())
			ids[0] = r.MemberID
			continue
		}
		c.mu.Lock()
		ids[i] = call.m.id
		c.mu.Unlock()
	}
	rebalance := func() {
		calls := make([]*JoinCall, n)
		for i, id := range ids {
			calls[i] = c.Join(joinReq("g", id))
		}
		var leader JoinResult
		results := make([]JoinResult, n)
		for i, call := range calls {
			results[i] = call.Wait(context.Background())
			if results[i].Err != nil {
				b.Fatal(results[i].Err)
			}
			if results[i].MemberID == results[i].Leader {
				leader = results[i]
			}
		}
		plan := map[string][]byte{}
		for _, m := range leader.Members {
			plan[m.MemberID] = []byte("a")
		}
		var syncs []*SyncCall
		for _, r := range results {
			req := SyncRequest{Group: "g", MemberID: r.MemberID, Generation: r.Generation}
			if r.MemberID == leader.MemberID {
				req.Assignments = plan
			}
			syncs = append(syncs, c.Sync(req))
		}
		for _, s := range syncs {
			if r := s.Wait(context.Background()); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	rebalance() // the group forms
	b.ResetTimer()
	for b.Loop() {
		rebalance()
	}
	if st, _, members := c.stateOf("g"); st != Stable || members != n {
		b.Fatalf("%v with %d members", st, members)
	}
}
