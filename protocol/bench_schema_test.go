package protocol_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSchemaValidationProduce measures what broker-side schema ID validation
// (confluent.value.schema.validation) costs a producer: one in-process broker, two
// one-partition topics, "plain" with validation off and "checked" with it on (the
// value's schema registered under checked-value), and the same wire-format values
// (magic byte, schema id, random bytes) produced to each by its own franz-go client
// (acks=1, 1 ms linger, batches as large as the linger allows). The two alternate in
// rounds of b.N/rounds records, so load from anything else on the machine falls on both
// alike; records/s of each and their ratio (on/off) are reported, with ns/op and MB/s
// over both topics' records. b.N is the number of
// records per topic.
func BenchmarkSchemaValidationProduce(b *testing.B) {
	const rounds = 10
	for _, size := range []int{100, 1024} {
		for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression()} {
			b.Run(fmt.Sprintf("size=%d/codec=%s", size, codecName(codec)), func(b *testing.B) {
				tb := startBroker(b, withoutAutoCreate())
				tb.createTopic("plain", 1, nil)
				tb.createTopic("checked", 1, map[string]*string{"confluent.value.schema.validation": strPtr("true")})
				id := registerSchema(b, tb, "checked-value", `{"type":"record","name":"Blob","fields":[{"name":"b","type":"bytes"}]}`)
				payload := make([]byte, size-5)
				rand.Read(payload)
				value := confluentWire(id, string(payload))

				newProducer := func(topic string) *kgo.Client {
					cl := tb.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
						kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchCompression(codec))
					if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value}).FirstErr(); err != nil {
						b.Fatalf("produce to %s: %v", topic, err)
					}
					return cl
				}
				off, on := newProducer("plain"), newProducer("checked")
				// run produces n records through cl and returns how long they took.
				run := func(cl *kgo.Client, n int) time.Duration {
					ctx := context.Background()
					start := time.Now()
					for range n {
						cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
							if err != nil {
								b.Error(err)
							}
						})
					}
					if err := cl.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
				b.SetBytes(int64(2 * size))
				b.ResetTimer()
				var tOff, tOn time.Duration
				for r := range rounds {
					n := b.N / rounds
					if r < b.N%rounds {
						n++
					}
					if n == 0 {
						continue
					}
					// Each goes first in every other round, so neither always meets
					// what the other left behind (the log's dirty pages, the GC's debt).
					if r%2 == 0 {
						tOff += run(off, n)
						tOn += run(on, n)
					} else {
						tOn += run(on, n)
						tOff += run(off, n)
					}
				}
				offRate, onRate := float64(b.N)/tOff.Seconds(), float64(b.N)/tOn.Seconds()
				b.ReportMetric(offRate, "off-records/s")
				b.ReportMetric(onRate, "on-records/s")
				b.ReportMetric(onRate/offRate, "on/off")
			})
		}
	}
}

func codecName(c kgo.CompressionCodec) string {
	switch c {
	case kgo.Lz4Compression():
		return "lz4"
	case kgo.NoCompression():
		return "none"
	}
	return "other"
}
