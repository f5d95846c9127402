package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// sarama's default partitioner is NewHashPartitioner: FNV-1a over the key, null keys
// random, empty keys hashed.
var saramaCaps = clientCaps{
	perRecordHeaders:   true,
	explicitTimestamps: true,
	nullKey:            true,
	emptyKey:           true,
	nullValue:          true,
	emptyValue:         true,
	emptyKeyHashed:     true,
	partitioner:        saramaPartition,
	partitionerName:    "sarama's NewHashPartitioner (FNV-1a)",
}

func TestSarama(t *testing.T) {
	runClientMatrix(t, clientDriver{name: "sarama", caps: saramaCaps, run: runSaramaCell})
}

func saramaCodec(codec string) (sarama.CompressionCodec, error) {
	switch codec {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("unknown codec %q", codec)
}

// saramaConfig is sarama as a user gets it, with its default protocol version
// (V2_8_0_0 in v1.61), plus delivery reports, acks=all and idempotence.
func saramaConfig(codec sarama.CompressionCodec) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "shale-interop-sarama"
	cfg.Producer.Compression = codec
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	// Idempotent (which needs one open request per broker): what keeps a partition's
	// order across retries.
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Messages = 40
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 250 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

func saramaBytes(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}

func runSaramaCell(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error) {
	codec, err := saramaCodec(spec.Codec)
	if err != nil {
		return nil, err
	}
	cfg := saramaConfig(codec)
	admin, err := sarama.NewClusterAdmin(target.seeds, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama admin: %w", err)
	}
	err = admin.CreateTopic(spec.Topic, &sarama.TopicDetail{NumPartitions: partitionCount, ReplicationFactor: 1}, false)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("sarama CreateTopic: %w", err)
	}

	out := &cellOutput{ProduceStart: time.Now()}
	producer, err := sarama.NewAsyncProducer(target.seeds, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama producer: %w", err)
	}
	go func() {
		for _, r := range spec.Records {
			msg := &sarama.ProducerMessage{
				Topic:     spec.Topic,
				Key:       saramaBytes(r.Key),
				Value:     saramaBytes(r.Value),
				Timestamp: r.Timestamp,
				Metadata:  r.Index,
			}
			for _, h := range r.Headers {
				msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
			}
			select {
			case producer.Input() <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	var prodErr error
	for acks := 0; acks < len(spec.Records); acks++ {
		select {
		case m := <-producer.Successes():
			out.Produced = append(out.Produced, producedRecord{Index: m.Metadata.(int), Partition: m.Partition, Offset: m.Offset})
		case pe := <-producer.Errors():
			prodErr = errors.Join(prodErr, fmt.Errorf("record #%v: %w", pe.Msg.Metadata, pe.Err))
		case <-ctx.Done():
			producer.AsyncClose()
			return nil, fmt.Errorf("%d of %d records acknowledged before %w", acks, len(spec.Records), ctx.Err())
		}
	}
	if err := producer.Close(); err != nil {
		prodErr = errors.Join(prodErr, err)
	}
	out.ProduceEnd = time.Now()
	if prodErr != nil {
		return nil, fmt.Errorf("produce: %w", prodErr)
	}

	// sarama's partition consumers, one per partition from the oldest offset.
	consumer, err := sarama.NewConsumer(target.seeds, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama consumer: %w", err)
	}
	defer consumer.Close()
	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, partitionCount)
	for p := range int32(partitionCount) {
		pc, err := consumer.ConsumePartition(spec.Topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("ConsumePartition %d: %w", p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case msgs <- m:
					case <-ctx.Done():
						return
					}
				case e, ok := <-pc.Errors():
					if ok {
						select {
						case errs <- e:
						default:
						}
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for len(out.Consumed) < len(spec.Records) {
		select {
		case m := <-msgs:
			c := consumedRecord{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
			for _, h := range m.Headers {
				c.Headers = append(c.Headers, header{Key: string(h.Key), Value: h.Value})
			}
			out.Consumed = append(out.Consumed, c)
		case err := <-errs:
			return nil, fmt.Errorf("consuming: %w", err)
		case <-ctx.Done():
			return nil, fmt.Errorf("consumed %d of %d records before %w", len(out.Consumed), len(spec.Records), ctx.Err())
		}
	}
	return out, nil
}
