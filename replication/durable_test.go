package replication_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// TestAcksAllFsyncAcknowledgesOnlyFlushedRecords: three brokers, a topic with
// acks.all.fsync=true and producers on several goroutines. Every acks=all answer comes
// only once every ISR member has fsynced the record: when the answer arrives, each
// replica's flushed offset is past it (a follower reports only what it flushed, and the
// leader counts its own flushed offset), and no replica's high watermark passes its own
// flushed offset's ISR bound.
func TestAcksAllFsyncAcknowledgesOnlyFlushedRecords(t *testing.T) {
	_, rs := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res := rs[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "d", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{1, 2, 3}}, Configs: map[string]string{"min.insync.replicas": "3", "acks.all.fsync": "true"}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	testutil.Eventually(t, 30*time.Second, "every replica of d open", func() bool {
		for _, r := range rs {
			if r.m.Replica("d", 0) == nil {
				return false
			}
		}
		return true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(rs[0].addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("d"),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const producers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, producers*each)
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%d-%d", g, i))}).First()
				if err != nil {
					errs <- fmt.Errorf("acks=all produce: %w", err)
					return
				}
				for _, rep := range rs {
					p := rep.m.Replica("d", 0)
					if p == nil {
						errs <- fmt.Errorf("broker %d has no replica of d", rep.id)
						return
					}
					// min.insync.replicas=3: every replica is in the ISR at the answer.
					if f := p.FlushedOffset(); f <= r.Offset {
						errs <- fmt.Errorf("offset %d acknowledged while broker %d has flushed only below %d", r.Offset, rep.id, f)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, rep := range rs {
		p := rep.m.Replica("d", 0)
		if !p.DurableAcks() {
			t.Errorf("broker %d: acks.all.fsync did not reach the replica", rep.id)
		}
	}
}

// lateBackground runs each log's background work (the group commit among it) a little
// later than asked, so that an answer that does not wait for the fsync shows.
type lateBackground struct{}

func (lateBackground) Go(fn func()) { time.AfterFunc(30*time.Millisecond, fn) }

// TestFlushMessagesOneAcks1WaitsForTheFsync: under flush.messages=1 Kafka fsyncs every
// append before it answers, whatever the acks. The group commit runs apart from the
// request, so an acks=1 answer must wait for it: when the answer arrives, the leader's
// flushed offset is past the record.
func TestFlushMessagesOneAcks1WaitsForTheFsync(t *testing.T) {
	_, rs := startClusterTuned(t, func(_ int32, cfg *replication.Config) { cfg.LogBackground = lateBackground{} })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res := rs[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "f", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{1}}, Configs: map[string]string{"flush.messages": "1"}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	testutil.Eventually(t, 30*time.Second, "the replica of f open", func() bool { return rs[0].m.Replica("f", 0) != nil })
	cl, err := kgo.NewClient(kgo.SeedBrokers(rs[0].addr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.DefaultProduceTopic("f"), kgo.RecordDeliveryTimeout(60*time.Second), kgo.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 20 {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).First()
		if err != nil {
			t.Fatalf("acks=1 produce: %v", err)
		}
		if f := rs[0].m.Replica("f", 0).FlushedOffset(); f <= r.Offset {
			t.Fatalf("offset %d acknowledged (acks=1, flush.messages=1) while the leader has flushed only below %d", r.Offset, f)
		}
	}
}
