package cluster

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ackedProducer writes numbered records with acks=all, one at a time, through whatever a
// test does to the cluster, and remembers which were acknowledged.
type ackedProducer struct {
	c     *cluster
	topic string
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	acked map[string]bool
}

func startAckedProducer(c *cluster, topic string, retries int) *ackedProducer {
	p := &ackedProducer{c: c, topic: topic, acked: map[string]bool{}}
	prod := c.kafkaClient(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(retries))
	ctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			if err := prod.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err == nil {
				p.mu.Lock()
				p.acked[v] = true
				p.mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return p
}

// stopAndReadBack stops the producer and fails the test unless something was
// acknowledged and every acknowledged record reads back; it returns how many there were.
func (p *ackedProducer) stopAndReadBack(t *testing.T) int {
	t.Helper()
	p.stop()
	p.wg.Wait()
	want := len(p.acked)
	if want == 0 {
		t.Fatal("nothing was acknowledged")
	}
	cons := p.c.kafkaClient(kgo.ConsumeTopics(p.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < want && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if p.acked[string(r.Value)] {
				seen[string(r.Value)] = true
			}
		})
	}
	if len(seen) != want {
		var missing []string
		for v := range p.acked {
			if !seen[v] {
				missing = append(missing, v)
			}
		}
		slices.Sort(missing)
		t.Fatalf("%d of %d acknowledged records read back; missing %v", len(seen), want, missing[:min(len(missing), 20)])
	}
	return want
}
