package group

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/internal/metadata"
)

// raftStore is a one-controller Raft quorum on loopback and a broker's client of it: the
// store production brokers use, with offset commits batched into Raft records.
func raftStore(b *testing.B) metadata.Store {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctl, err := controller.NewServer(controller.Config{
		NodeID: 1, Voters: []controller.Voter{{ID: 1, Addr: ln.Addr().String()}}, Listener: ln,
		DataDir: b.TempDir(), Logger: testConfig().Logger,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := ctl.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bc, err := controller.NewBrokerClient(ctx, controller.BrokerConfig{
		NodeID: 1, Host: "127.0.0.1", Port: 9092, ControllerAddrs: []string{ln.Addr().String()}, Logger: testConfig().Logger,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	for _, r := range bc.CreateTopics(ctx, []metadata.TopicSpec{{Name: "t", NumPartitions: 64, ReplicationFactor: 1}}, false) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	for bc.Current().Topic("t") == nil {
		time.Sleep(5 * time.Millisecond)
	}
	return bc
}

// BenchmarkCommitOffsets measures OffsetCommit through the coordinator (validation, then
// the store): each commit is one group's offsets for 4 partitions, from 1, 16 and 256
// concurrent committers (each its own group, as consumers of different groups commit
// concurrently), against the in-memory store and against a Raft controller that batches
// concurrent commits into shared records. Compare commits/s within one run.
func BenchmarkCommitOffsets(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) metadata.Store
	}{
		{"memstore", func(b *testing.B) metadata.Store {
			s := newTestStore(b)
			ctx := context.Background()
			s.CreateTopics(ctx, []metadata.TopicSpec{{Name: "t64", NumPartitions: 64, ReplicationFactor: 1}}, false)
			return s
		}},
		{"raft", raftStore},
	}
	for _, st := range stores {
		store := st.open(b)
		topic := "t"
		if st.name == "memstore" {
			topic = "t64"
		}
		c := New(testConfig(), store)
		b.Cleanup(func() { c.Close() })
		for _, committers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("store=%s/committers=%d", st.name, committers), func(b *testing.B) {
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
								req.Offsets = append(req.Offsets, metadata.CommittedOffset{Topic: topic, Partition: int32((w*4 + p) % 64), Offset: i, LeaderEpoch: -1})
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
