package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafka-go's Writer balances round-robin by default, which places no key; the suite
// configures its Murmur2Balancer, the Java-compatible one (null keys random, empty keys
// hashed).
var kafkaGoCaps = clientCaps{
	perRecordHeaders:   true,
	explicitTimestamps: true,
	nullKey:            true,
	emptyKey:           true,
	nullValue:          true,
	emptyValue:         true,
	emptyKeyHashed:     true,
	readsEmptyAsNull:   true,
	partitioner:        javaPartition,
	partitionerName:    "kafka-go's Murmur2Balancer",
}

func TestKafkaGo(t *testing.T) {
	runClientMatrix(t, clientDriver{name: "kafka-go", caps: kafkaGoCaps, run: runKafkaGoCell})
}

func kafkaGoCodec(codec string) (kafka.Compression, error) {
	switch codec {
	case "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("unknown codec %q", codec)
}

func runKafkaGoCell(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error) {
	codec, err := kafkaGoCodec(spec.Codec)
	if err != nil {
		return nil, err
	}
	addr := kafka.TCP(target.seeds...)
	client := &kafka.Client{Addr: addr, Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: spec.Topic, NumPartitions: partitionCount, ReplicationFactor: 1}},
	})
	if err == nil {
		err = resp.Errors[spec.Topic]
	}
	if err != nil {
		return nil, fmt.Errorf("kafka-go CreateTopics: %w", err)
	}

	out := &cellOutput{ProduceStart: time.Now()}
	var (
		mu       sync.Mutex
		complErr error
	)
	writer := &kafka.Writer{
		Addr:         addr,
		Topic:        spec.Topic,
		Balancer:     &kafka.Murmur2Balancer{},
		Compression:  codec,
		RequiredAcks: kafka.RequireAll,
		BatchSize:    40,
		BatchTimeout: 5 * time.Millisecond,
		Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				i, ok := spec.indexOf(m.Key, m.Value)
				if !ok {
					complErr = errors.Join(complErr, fmt.Errorf("completion for a message the suite did not write: key %s", nullable(m.Key)))
					continue
				}
				if err != nil {
					complErr = errors.Join(complErr, fmt.Errorf("record #%d: %w", i, err))
					continue
				}
				out.Produced = append(out.Produced, producedRecord{Index: i, Partition: int32(m.Partition), Offset: m.Offset})
			}
		},
	}
	msgs := make([]kafka.Message, 0, len(spec.Records))
	for _, r := range spec.Records {
		m := kafka.Message{Key: r.Key, Value: r.Value, Time: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		msgs = append(msgs, m)
	}
	writeErr := writer.WriteMessages(ctx, msgs...)
	if err := writer.Close(); err != nil {
		writeErr = errors.Join(writeErr, err)
	}
	out.ProduceEnd = time.Now()
	if err := errors.Join(writeErr, complErr); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}

	// One Reader per partition, without a group (TestConsumerGroups covers kafka-go's
	// group reader).
	recs := make(chan consumedRecord)
	errs := make(chan error, partitionCount)
	var readers sync.WaitGroup
	defer readers.Wait() // runs after stopReading
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	for p := range partitionCount {
		reader := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   target.seeds,
			Topic:     spec.Topic,
			Partition: p,
			MinBytes:  1,
			MaxBytes:  4 << 20,
			MaxWait:   250 * time.Millisecond,
		})
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer reader.Close()
			for {
				m, err := reader.ReadMessage(readCtx)
				if err != nil {
					if readCtx.Err() == nil {
						errs <- fmt.Errorf("partition %d: %w", p, err)
					}
					return
				}
				c := consumedRecord{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Time}
				for _, h := range m.Headers {
					c.Headers = append(c.Headers, header{Key: h.Key, Value: h.Value})
				}
				select {
				case recs <- c:
				case <-readCtx.Done():
					return
				}
			}
		}()
	}
	for len(out.Consumed) < len(spec.Records) {
		select {
		case c := <-recs:
			out.Consumed = append(out.Consumed, c)
		case err := <-errs:
			return nil, fmt.Errorf("consumed %d of %d records, then: %w", len(out.Consumed), len(spec.Records), err)
		case <-ctx.Done():
			return nil, fmt.Errorf("consumed %d of %d records before %w", len(out.Consumed), len(spec.Records), ctx.Err())
		}
	}
	return out, nil
}
