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

	out, err := franzProduce(ctx, spec, codec)
	if err != nil {
		return nil, err
	}

	// Read back with direct partition consumption (no group; TestConsumerGroups covers
	// franz-go's group consumer): the same read the suite uses as its reference.
	recs, err := referenceRead(ctx, spec)
	if err != nil {
		return nil, err
	}
	out.Consumed = recs
	return out, nil
}

// franzProduce writes spec.Records to spec.Topic with franz-go's default producer
// (idempotent, default partitioner) and returns the acknowledgements.
func franzProduce(ctx context.Context, spec *cellSpec, codec kgo.CompressionCodec) (*cellOutput, error) {
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
	return out, nil

}
