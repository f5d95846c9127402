package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// BenchmarkOffsetCommits measures consumer-group offset commits through a three-controller
// Raft quorum on loopback, from 8, 64 and 512 concurrent committers: gathered into shared records
// (what CommitOffsets does) against one record per commit, and end to end through a
// broker's gRPC client. Compare commits/s within one run.
func BenchmarkOffsetCommits(b *testing.B) {
	q := newTestQuorum(b, 3, nil)
	s := q.servers[q.leader()]
	bc := q.broker(1, "")
	mustCreateTopic(b, bc, "t", 64, 1)
	run := func(b *testing.B, workers int, commit func(ctx context.Context, w, i int) error) {
		ctx := context.Background()
		records := s.AppliedIndex()
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		b.ResetTimer()
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1))
					if i > b.N {
						return
					}
					if err := commit(ctx, w, i); err != nil {
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
		b.ReportMetric(float64(b.N)/float64(max(1, s.AppliedIndex()-records)), "commits/record")
	}
	op := func(w, i int) *pb.OffsetOp {
		return &pb.OffsetOp{Group: fmt.Sprintf("g%d", w), Commits: []*pb.OffsetEntry{{Topic: "t", Partition: int32(w % 64), Offset: int64(i), CommitTimeMs: 1}}}
	}
	for _, workers := range []int{8, 64, 512} {
		b.Run(fmt.Sprintf("batched/committers=%d", workers), func(b *testing.B) {
			run(b, workers, func(ctx context.Context, w, i int) error { return s.committer.submit(ctx, op(w, i)) })
		})
		b.Run(fmt.Sprintf("unbatched/committers=%d", workers), func(b *testing.B) {
			run(b, workers, func(ctx context.Context, w, i int) error { return s.commitUnbatched(ctx, op(w, i)) })
		})
	}
	b.Run("grpc-batched/committers=64", func(b *testing.B) {
		run(b, 64, func(ctx context.Context, w, i int) error {
			g := fmt.Sprintf("g%d", w)
			return bc.CommitOffsets(ctx, g, bc.Current().GroupFence(g), []metadata.CommittedOffset{{Topic: "t", Partition: int32(w % 64), Offset: int64(i)}})
		})
	})
}

// BenchmarkBrokerFailover measures the time from a broker's death (no shutdown notice) to
// every partition it led having a new leader in another broker's cache, and how much of
// it is beyond the session timeout.
func BenchmarkBrokerFailover(b *testing.B) {
	q := newTestQuorum(b, 3, nil)
	q.leader()
	b1 := q.broker(1, "")
	q.broker(3, "")
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		victim := q.broker(2, "")
		name := fmt.Sprintf("t%d", i)
		mustCreateTopic(b, b1, name, 12, 3)
		waitImage(b, b1, "topic", func(im *metadata.Image) bool { return im.Topic(name) != nil })
		waitImage(b, victim, "topic", func(im *metadata.Image) bool { return im.Topic(name) != nil })
		b.StartTimer()
		victim.silentClose.Store(true)
		victim.Close()
		died := time.Now()
		waitImage(b, b1, "new leaders", func(im *metadata.Image) bool {
			for _, p := range im.Topic(name).Partitions {
				if p.Leader == 2 || p.Leader < 0 {
					return false
				}
			}
			return true
		})
		total += time.Since(died)
	}
	avg := total / time.Duration(b.N)
	b.ReportMetric(float64(avg.Milliseconds()), "ms-to-new-leaders")
	b.ReportMetric(float64((avg - testSessionTimeout).Milliseconds()), "ms-beyond-session-timeout")
}

// BenchmarkControllerFailover measures the time from the active controller stopping to a
// broker's write succeeding through its successor.
func BenchmarkControllerFailover(b *testing.B) {
	q := newTestQuorum(b, 3, nil)
	bc := q.broker(1, "")
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		lead := q.leader()
		mustCreateTopic(b, bc, fmt.Sprintf("before%d", i), 1, 1)
		b.StartTimer()
		start := time.Now()
		q.stop(lead)
		mustCreateTopic(b, bc, fmt.Sprintf("after%d", i), 1, 1)
		total += time.Since(start)
		b.StopTimer()
		q.restart(lead)
		b.StartTimer()
	}
	b.ReportMetric(float64((total / time.Duration(b.N)).Milliseconds()), "ms-to-first-write")
}
