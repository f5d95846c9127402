package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go's default partitioner (UniformBytes with keys) hashes keys, empty ones
// included, with Kafka's murmur2; it produces idempotently by default.
var franzCaps = clientCaps{
	perRecordHeaders:   true,
	explicitTimestamps: true,
	nullKey:            true,
	emptyKey:           true,
	nullValue:          true,
	emptyValue:         true,
	emptyKeyHashed:     true,
	partitioner:        javaPartition,
	partitionerName:    "franz-go's default partitioner (murmur2)",
}

func TestFranzGo(t *testing.T) {
	runClientMatrix(t, clientDriver{name: "franz-go", caps: franzCaps, run: runFranzCell})
}

func franzCodec(codec string) (kgo.CompressionCodec, error) {
	switch codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown codec %q", codec)
}

func runFranzCell(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error) {
	codec, err := franzCodec(spec.Codec)
	if err != nil {
		return nil, err
	}
	// The topic is created by franz-go's own admin client, separate from the suite's.
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(target.seeds...))
	if err != nil {
		return nil, err
	}
	created, err := kadm.NewClient(adminCl).CreateTopic(ctx, partitionCount, 1, nil, spec.Topic)
	adminCl.Close()
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return nil, fmt.Errorf("kadm CreateTopic: %w", err)
	}

	out := &cellOutput{ProduceStart: time.Now()}
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(target.seeds...),
		kgo.DefaultProduceTopic(spec.Topic),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(5*time.Millisecond),
		// Small batches, so that each partition gets several.
		kgo.ProducerBatchMaxBytes(16<<10),
	)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		prodErr error
		wg      sync.WaitGroup
	)
	for _, r := range spec.Records {
		rec := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		wg.Add(1)
		producer.Produce(ctx, rec, func(rec *kgo.Record, err error) {
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
	producer.Close()
	out.ProduceEnd = time.Now()
	if prodErr != nil {
		return nil, fmt.Errorf("produce: %w", prodErr)
	}

	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(target.seeds...),
		kgo.ConsumerGroup(spec.Group),
		kgo.ConsumeTopics(spec.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	for len(out.Consumed) < len(spec.Records) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("consumed %d of %d records before %w", len(out.Consumed), len(spec.Records), ctx.Err())
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			fetchErr = errors.Join(fetchErr, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
		})
		if fetchErr != nil {
			return nil, fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			c := consumedRecord{
				Partition: r.Partition,
				Offset:    r.Offset,
				Key:       r.Key,
				Value:     r.Value,
				Timestamp: r.Timestamp,
			}
			switch r.Attrs.TimestampType() {
			case 0:
				c.TimestampType = "create"
			case 1:
				c.TimestampType = "append"
			}
			for _, h := range r.Headers {
				c.Headers = append(c.Headers, header{Key: h.Key, Value: h.Value})
			}
			out.Consumed = append(out.Consumed, c)
		})
	}
	// Committing exercises OffsetCommit; a failure is a broker bug worth reporting.
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		return nil, fmt.Errorf("committing offsets: %w", err)
	}
	return out, nil
}
