package interop

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupConsumer consumes a filled topic through a consumer group, from the earliest
// offset, and commits what it consumed.
type groupConsumer func(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error)

// TestConsumerGroups has each client consume a topic (filled by franz-go) through the
// consumer-group protocol: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch,
// Fetch, OffsetCommit, LeaveGroup, each client at its own versions. It checks the
// records as the cells do, then that the group's committed offsets are the end offsets.
// The codec cells read by partition assignment where the client can, so that a broker
// without groups fails here and not there; kafkajs, which can only consume in a group,
// goes through groups in its cells too.
func TestConsumerGroups(t *testing.T) {
	t.Parallel()
	nodeDir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	clients := []struct {
		name     string
		caps     clientCaps
		missing  func() string
		consumer groupConsumer
	}{
		{"franz-go", franzCaps, nil, franzGroupConsume},
		{"sarama", saramaCaps, nil, saramaGroupConsume},
		{"kafka-go", kafkaGoCaps, nil, kafkaGoGroupConsume},
		{"confluent-kafka-python", confluentCaps, pythonModuleMissing("confluent_kafka"), pythonScript("confluent_cell.py", modeGroup)},
		{"kafka-python", kafkaPythonCaps, pythonModuleMissing("kafka"), pythonScript("kafkapython_cell.py", modeGroup)},
		{"kafkajs", kafkajsCaps, kafkajsMissing(nodeDir), kafkajsScript(nodeDir, modeGroup)},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			problems, err := runGroupCheck(t, c.name, c.caps, c.missing, c.consumer)
			switch {
			case err != nil:
				results.recordExtra(fmt.Sprintf("- consumer group, %s: FAIL: %s", c.name, firstLine(err.Error())))
				t.Fatal(err)
			case len(problems) > 0:
				results.recordExtra(fmt.Sprintf("- consumer group, %s: FAIL: %s (%d problems)", c.name, problems[0], len(problems)))
				for i, p := range problems {
					if i == 25 {
						t.Errorf("... and %d more", len(problems)-25)
						break
					}
					t.Error(p)
				}
			default:
				results.recordExtra(fmt.Sprintf("- consumer group, %s: pass (%d records consumed, offsets committed)", c.name, recordsPerCell))
			}
		})
	}
}

func runGroupCheck(t *testing.T, name string, consumerCaps clientCaps, missing func() string, consume groupConsumer) ([]string, error) {
	if missing != nil {
		if why := missing(); why != "" {
			return nil, fmt.Errorf("%s is not installed: %s (run `bash tests/deps.sh`)", name, why)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// franz-go writes the records, so they are placed by murmur2; only what the
	// consumer can tell apart comes from its own caps.
	caps := franzCaps
	caps.readsEmptyAsNull = consumerCaps.readsEmptyAsNull
	spec := newCellSpec(name+"-group", "none", caps, time.Now())
	t.Logf("topic %s, group %s", spec.Topic, spec.Group)
	if err := createTopicWithAdmin(ctx, spec.Topic); err != nil {
		return nil, err
	}
	produced, err := franzProduce(ctx, spec, kgo.NoCompression())
	if err != nil {
		return nil, fmt.Errorf("filling the topic with franz-go: %w", err)
	}
	out, err := consume(ctx, t, spec)
	if err != nil {
		return nil, fmt.Errorf("%s group consumer: %w", name, err)
	}
	out.Produced = produced.Produced
	out.ProduceStart, out.ProduceEnd = produced.ProduceStart, produced.ProduceEnd
	problems := checkCell(spec, out)
	return append(problems, checkCommitted(ctx, spec)...), nil
}

// checkCommitted checks that the group committed the end offset of every partition.
func checkCommitted(ctx context.Context, spec *cellSpec) []string {
	ends, err := target.admin.ListEndOffsets(ctx, spec.Topic)
	if err != nil {
		return []string{fmt.Sprintf("listing end offsets: %v", err)}
	}
	committed, err := target.admin.FetchOffsets(ctx, spec.Group)
	if err != nil {
		return []string{fmt.Sprintf("fetching the group's committed offsets: %v", err)}
	}
	var problems []string
	for p := range int32(partitionCount) {
		end, ok := ends.Lookup(spec.Topic, p)
		if !ok {
			problems = append(problems, fmt.Sprintf("no end offset for partition %d", p))
			continue
		}
		c, ok := committed.Lookup(spec.Topic, p)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("group %s committed nothing for partition %d (end offset %d)", spec.Group, p, end.Offset))
		case c.Err != nil:
			problems = append(problems, fmt.Sprintf("group %s offset for partition %d: %v", spec.Group, p, c.Err))
		case c.At != end.Offset:
			problems = append(problems, fmt.Sprintf("group %s committed %d for partition %d, want the end offset %d", spec.Group, c.At, p, end.Offset))
		}
	}
	return problems
}

func franzGroupConsume(ctx context.Context, _ *testing.T, spec *cellSpec) (*cellOutput, error) {
	cl, err := kgo.NewClient(
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
	defer cl.Close()
	out := &cellOutput{}
	for len(out.Consumed) < len(spec.Records) {
		fetches := cl.PollFetches(ctx)
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
			c := consumedRecord{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
			for _, h := range r.Headers {
				c.Headers = append(c.Headers, header{Key: h.Key, Value: h.Value})
			}
			out.Consumed = append(out.Consumed, c)
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return nil, fmt.Errorf("committing offsets: %w", err)
	}
	return out, nil
}

// saramaGroupHandler hands every claimed message to the test and commits the session's
// marks once the last expected message is marked.
type saramaGroupHandler struct {
	want int64
	seen atomic.Int64
	msgs chan<- *sarama.ConsumerMessage
	done chan struct{}
	once sync.Once
}

func (h *saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		sess.MarkMessage(m, "")
		select {
		case h.msgs <- m:
		case <-sess.Context().Done():
			return nil
		}
		if h.seen.Add(1) == h.want {
			sess.Commit()
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func saramaGroupConsume(ctx context.Context, _ *testing.T, spec *cellSpec) (*cellOutput, error) {
	cfg := saramaConfig(sarama.CompressionNone)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	group, err := sarama.NewConsumerGroup(target.seeds, spec.Group, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama consumer group: %w", err)
	}
	msgs := make(chan *sarama.ConsumerMessage)
	h := &saramaGroupHandler{want: int64(len(spec.Records)), msgs: msgs, done: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	consumeErr := make(chan error, 1)
	go func() {
		// Consume returns at each rebalance; loop until told to stop.
		for runCtx.Err() == nil {
			if err := group.Consume(runCtx, []string{spec.Topic}, h); err != nil {
				consumeErr <- err
				return
			}
		}
		consumeErr <- nil
	}()
	finish := func() error {
		stop()
		err := <-consumeErr
		return errors.Join(err, group.Close())
	}
	out := &cellOutput{}
	for len(out.Consumed) < len(spec.Records) {
		select {
		case m := <-msgs:
			c := consumedRecord{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
			for _, hd := range m.Headers {
				c.Headers = append(c.Headers, header{Key: string(hd.Key), Value: hd.Value})
			}
			out.Consumed = append(out.Consumed, c)
		case err := <-consumeErr:
			stop()
			group.Close()
			return nil, fmt.Errorf("consumed %d of %d records, then: %w", len(out.Consumed), len(spec.Records), err)
		case <-ctx.Done():
			finish()
			return nil, fmt.Errorf("consumed %d of %d records before %w", len(out.Consumed), len(spec.Records), ctx.Err())
		}
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		finish()
		return nil, fmt.Errorf("commit never ran: %w", ctx.Err())
	}
	if err := finish(); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		return nil, fmt.Errorf("closing the group: %w", err)
	}
	return out, nil
}

func kafkaGoGroupConsume(ctx context.Context, _ *testing.T, spec *cellSpec) (*cellOutput, error) {
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           target.seeds,
		GroupID:           spec.Group,
		Topic:             spec.Topic,
		MinBytes:          1,
		MaxBytes:          4 << 20,
		MaxWait:           250 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		HeartbeatInterval: time.Second,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
	})
	defer reader.Close()
	out := &cellOutput{}
	var last []kafka.Message
	for len(out.Consumed) < len(spec.Records) {
		m, err := reader.FetchMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("consumed %d of %d records, then: %w", len(out.Consumed), len(spec.Records), err)
		}
		c := consumedRecord{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Time}
		for _, h := range m.Headers {
			c.Headers = append(c.Headers, header{Key: h.Key, Value: h.Value})
		}
		out.Consumed = append(out.Consumed, c)
		last = append(last, m)
	}
	if err := reader.CommitMessages(ctx, last...); err != nil {
		return nil, fmt.Errorf("committing offsets: %w", err)
	}
	return out, nil
}
