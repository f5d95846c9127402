package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoIdempotentRetries produces through a proxy that loses Produce responses
// after the broker has appended the batches, so that franz-go's idempotent producer must
// retry them with their original sequence numbers. The broker has to recognise the
// retries: every record must be stored exactly once, in order, with no gaps, at the
// offset the producer was finally acknowledged with.
func TestFranzGoIdempotentRetries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		records int
		policy  faultPolicy
		opts    []kgo.Opt
	}{{
		// Connections cut at every 5th Produce response: all in-flight requests on the
		// connection (up to 5 per broker) are lost at once.
		name:    "cut-connections",
		records: 3000,
		policy:  faultPolicy{cutEvery: 5, maxFaults: 12},
	}, {
		// Every 7th Produce response held past the client's request deadline: franz-go
		// gives up on the connection and retries while the broker's answer is in flight.
		name:    "request-timeouts",
		records: 1500,
		policy:  faultPolicy{stallEvery: 7, stallFor: 2500 * time.Millisecond, maxFaults: 3},
		opts: []kgo.Opt{
			kgo.ProduceRequestTimeout(time.Second),
			kgo.RequestTimeoutOverhead(500 * time.Millisecond),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			dialer := newProxyDialer(tc.policy)
			defer dialer.Close()
			spec, out, err := produceIdempotently(ctx, dialer, tc.name, tc.records, tc.opts...)
			produces, cuts, stalls := dialer.stats()
			summary := fmt.Sprintf("%d records, %d Produce responses through the proxy, %d connections cut, %d responses stalled",
				tc.records, produces, cuts, stalls)
			t.Log(summary)
			if err != nil {
				results.recordExtra(fmt.Sprintf("- franz-go idempotent producer, %s: FAIL: %s", tc.name, firstLine(err.Error())))
				t.Fatal(err)
			}
			var problems []string
			if cuts+stalls == 0 {
				problems = append(problems, "the proxy injected no fault, so nothing was retried: the test proved nothing")
			}
			problems = append(problems, checkStored(ctx, spec, out)...)
			if len(problems) > 0 {
				results.recordExtra(fmt.Sprintf("- franz-go idempotent producer, %s: FAIL: %s (%s)", tc.name, problems[0], summary))
				for i, p := range problems {
					if i == 25 {
						t.Errorf("... and %d more", len(problems)-25)
						break
					}
					t.Error(p)
				}
				return
			}
			results.recordExtra(fmt.Sprintf("- franz-go idempotent producer, %s: pass (%s; no duplicates, no gaps)", tc.name, summary))
		})
	}
}

// produceIdempotently writes n records (keyed, small) through dialer with franz-go's
// default idempotent producer and returns what it was acknowledged with.
func produceIdempotently(ctx context.Context, dialer *proxyDialer, name string, n int, opts ...kgo.Opt) (*cellSpec, *cellOutput, error) {
	spec := &cellSpec{
		Client: "franz-go-idempotent",
		Codec:  "none",
		Topic:  fmt.Sprintf("interop-idempotent-%s-%d", name, time.Now().UnixNano()%1_000_000_000),
		Caps:   franzCaps,
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range n {
		spec.Records = append(spec.Records, specRecord{
			Index:     i,
			Key:       fmt.Appendf(nil, "key-%02d", i%distinctKeys),
			Value:     fmt.Appendf(nil, "idempotent %s #%05d", name, i),
			Headers:   []header{{Key: "seq", Value: fmt.Appendf(nil, "%d", i)}},
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		})
	}
	if err := createTopicWithAdmin(ctx, spec.Topic); err != nil {
		return nil, nil, err
	}
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(target.seeds...),
		kgo.Dialer(dialer.DialContext),
		kgo.DefaultProduceTopic(spec.Topic),
		kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// Small batches: many Produce requests, several in flight per connection.
		kgo.ProducerBatchMaxBytes(2 << 10),
		// No RecordDeliveryTimeout: franz-go measures it from each record's Timestamp,
		// which is an hour old here. ctx bounds the produce instead.
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()

	out := &cellOutput{ProduceStart: time.Now()}
	var (
		mu      sync.Mutex
		prodErr error
		wg      sync.WaitGroup
	)
	for _, r := range spec.Records {
		rec := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
			Headers: []kgo.RecordHeader{{Key: r.Headers[0].Key, Value: r.Headers[0].Value}}}
		wg.Add(1)
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				prodErr = errors.Join(prodErr, fmt.Errorf("record #%d: %w", r.Index, err))
				return
			}
			out.Produced = append(out.Produced, producedRecord{Index: r.Index, Partition: rec.Partition, Offset: rec.Offset})
		})
	}
	wg.Wait()
	out.ProduceEnd = time.Now()
	if prodErr != nil {
		return nil, nil, fmt.Errorf("idempotent produce: %w", prodErr)
	}
	return spec, out, nil
}
