package protocol_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduce compares producing through franz-go to an in-process Shale broker
// (persisting to mmap'd segments) and to franz-go's in-memory kfake, in the same run.
// b.N is the number of records.
func BenchmarkProduce(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, parts := range []int32{1, 8} {
			for _, acks := range []kgo.Acks{kgo.LeaderAck(), kgo.AllISRAcks()} {
				name := fmt.Sprintf("size=%d/partitions=%d/acks=%d", size, parts, acksInt(acks))
				b.Run(name+"/shale", func(b *testing.B) {
					tb := startBroker(b)
					tb.createTopic("bench", parts, nil)
					benchProduce(b, tb.addr, size, acks)
				})
				b.Run(name+"/kfake", func(b *testing.B) {
					c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "bench"))
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					benchProduce(b, c.ListenAddrs()[0], size, acks)
				})
			}
		}
	}
}

func acksInt(a kgo.Acks) int {
	switch a {
	case kgo.AllISRAcks():
		return -1
	case kgo.NoAck():
		return 0
	}
	return 1
}

func benchProduce(b *testing.B, addr string, size int, acks kgo.Acks) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(acks), kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	// Incompressible values, as real payloads mostly are not runs of zeros.
	value := make([]byte, size)
	rand.Read(value)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
