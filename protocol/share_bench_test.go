package protocol_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/replication/share"
)

// BenchmarkShareConsume measures how fast franz-go share consumers drain records with
// per-record acknowledgement (accept), against the in-process broker: 1, 4 and 16
// members on one partition, beside a classic consumer group of 4 members on 16
// partitions (which acknowledges nothing per record). Each iteration drains one record;
// records/s is the figure to compare.
func BenchmarkShareConsume(b *testing.B) {
	for _, members := range []int{1, 4, 16} {
		b.Run("share/partitions=1/members="+strconv.Itoa(members), func(b *testing.B) {
			benchConsume(b, 1, members, func(id string) []kgo.Opt {
				return []kgo.Opt{kgo.ShareGroup(id), kgo.ShareMaxRecords(500)}
			})
		})
	}
	b.Run("classic/partitions=16/members=4", func(b *testing.B) {
		benchConsume(b, 16, 4, func(id string) []kgo.Opt {
			return []kgo.Opt{kgo.ConsumerGroup(id), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond)}
		})
	})
}

func benchConsume(b *testing.B, partitions int32, members int, opts func(group string) []kgo.Opt) {
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	sgcfg := &sharegroup.Config{NodeID: 1, Logger: quietLogger(), SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second}
	scfg := &share.Config{AutoOffsetReset: "earliest", Logger: quietLogger()}
	tb := launchShareGroups(b, b.TempDir(), nil, brokerConfig(), &gcfg, sgcfg, scfg)
	tb.createTopic("bench", partitions, nil)
	prod := tb.client(kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(5*time.Millisecond))
	value := make([]byte, 100)
	var perr atomic.Value
	var pwg sync.WaitGroup
	for range b.N {
		pwg.Add(1)
		prod.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			pwg.Done()
		})
	}
	pwg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range members {
		cl := tb.client(append(opts("bench-group"), kgo.ConsumeTopics("bench"))...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && got.Load() < int64(b.N) {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
				if got.Add(int64(fs.NumRecords())) >= int64(b.N) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if got.Load() < int64(b.N) {
		b.Fatalf("drained %d of %d records", got.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
