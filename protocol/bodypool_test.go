package protocol_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceRecycledBodiesKeepData produces many requests over few connections, so
// that request bodies are recycled and reused while earlier batches are being appended
// and answered, with acks=1 and acks=all, and reads everything back: every record must
// come back as it was sent.
func TestProduceRecycledBodiesKeepData(t *testing.T) {
	tb := startBroker(t)
	for name, acks := range map[string]kgo.Acks{"1": kgo.LeaderAck(), "all": kgo.AllISRAcks()} {
		topic := "recycle-acks-" + name
		tb.createTopic(topic, 4, nil)
		// Several connections, so that a buffer one lets go of is soon read into by another.
		var prods []*kgo.Client
		for range 4 {
			prods = append(prods, tb.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(),
				kgo.ProducerLinger(0), kgo.MaxBufferedRecords(500)))
		}
		ctx := ctxTimeout(t, 30*time.Second)
		const n = 3000
		value := func(i int) []byte {
			return bytes.Repeat([]byte(fmt.Sprintf("%06d|", i)), 600+i%300)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for p, prod := range prods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := p; i < n; i += len(prods) {
					wg.Add(1)
					prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: value(i)}, func(_ *kgo.Record, err error) {
						defer wg.Done()
						if err != nil {
							mu.Lock()
							firstErr = err
							mu.Unlock()
						}
					})
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			t.Fatal(firstErr)
		}
		cons := tb.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		seen := make(map[string]bool, n)
		for len(seen) < n {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("acks=%s: consumed %d of %d: %v", name, len(seen), n, err)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
			fs.EachRecord(func(r *kgo.Record) {
				var i int
				if _, err := fmt.Sscan(string(r.Key), &i); err != nil {
					t.Fatalf("key %q: %v", r.Key, err)
				}
				if !bytes.Equal(r.Value, value(i)) {
					t.Fatalf("acks=%s: record %d came back changed", name, i)
				}
				seen[string(r.Key)] = true
			})
		}
	}
}

// TestPipelinedLargeRequests sends two requests in one write, the first a Produce
// larger than the first body chunk and not a power of two in size, so that its body is
// grown (the pool is empty at first) while the second is already buffered: both must be
// answered, in order. (A body grown to its pool class size once read into the next
// request's bytes, and the broker then waited for a request the client had sent whole.)
func TestPipelinedLargeRequests(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	rc := dialRaw(t, tb.addr)
	prod := kmsg.NewPtrProduceRequest()
	prod.Version, prod.Acks, prod.TimeoutMillis = 7, 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = bytes.Repeat([]byte{7}, 100_003)
	rt.Partitions = append(rt.Partitions, rp)
	prod.Topics = append(prod.Topics, rt)
	av := kmsg.NewPtrApiVersionsRequest()
	for round := 0; round < 3; round++ { // the later rounds take the pooled buffer
		var both []byte
		both = append(both, frame(prod, int32(2*round+1))...)
		both = append(both, frame(av, int32(2*round+2))...)
		if _, err := rc.c.Write(both); err != nil {
			t.Fatal(err)
		}
		for want := int32(2*round + 1); want <= int32(2*round+2); want++ {
			got, _, err := rc.readBody()
			if err != nil {
				t.Fatalf("response %d: %v", want, err)
			}
			if got != want {
				t.Fatalf("correlation %d, want %d", got, want)
			}
		}
	}
}
