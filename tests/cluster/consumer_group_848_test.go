package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupLedger tracks, from the members' callbacks, who owns each partition and which
// records each ownership consumed.
type groupLedger struct {
	mu        sync.Mutex
	owner     map[int32]string
	handovers map[int32]int // ownerships of each partition so far
	conflicts []string
	consumed  map[string][]int // record -> the ownerships (handover numbers) that read it
	dups      []string
}

func (l *groupLedger) assigned(member string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		if cur, ok := l.owner[p]; ok && cur != member {
			l.conflicts = append(l.conflicts, fmt.Sprintf("partition %d given to %s while %s owns it", p, member, cur))
		}
		l.owner[p] = member
		l.handovers[p]++
	}
}

func (l *groupLedger) released(member string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		if l.owner[p] == member {
			delete(l.owner, p)
		}
	}
}

// record notes a consumed record. Consumed again within the same ownership of its
// partition, it is a duplicate at-least-once does not allow: only a handover (to a
// member that starts from the last commit) may deliver a record again.
func (l *groupLedger) record(member string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.handovers[r.Partition]
	v := string(r.Value)
	for _, prev := range l.consumed[v] {
		if prev == h {
			l.dups = append(l.dups, fmt.Sprintf("%s (partition %d offset %d) read twice by ownership %d (%s)", v, r.Partition, r.Offset, h, member))
		}
	}
	l.consumed[v] = append(l.consumed[v], h)
}

func (l *groupLedger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.consumed)
}

// TestConsumerGroupKIP848ManyMembers runs 50 franz-go KIP-848 members (10 with -short)
// in one group of a three-broker cluster, joining and leaving while a producer writes:
// no partition is owned by two members at once, every acknowledged record is consumed,
// and none is consumed twice except across a handover (members commit on revocation,
// so even that should be rare).
func TestConsumerGroupKIP848ManyMembers(t *testing.T) {
	members := 50
	if testing.Short() {
		members = 10
	}
	c := newCluster(t, "--group.consumer.heartbeat.interval.ms=500", "--group.consumer.min.heartbeat.interval.ms=500")
	const topic, group = "kip848many", "many"
	createTopic(t, c.broker(4).addr, newTopic(topic, 64, 3))
	c.waitTopicEverywhere(topic)

	ledger := &groupLedger{owner: map[int32]string{}, handovers: map[int32]int{}, consumed: map[string][]int{}}
	type member struct {
		cl     *kgo.Client
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(name string) *member {
		var seeds []string
		for _, b := range c.brokers {
			seeds = append(seeds, b.addr)
		}
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.AutoCommitMarks(), kgo.AutoCommitInterval(500*time.Millisecond), kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { ledger.assigned(name, ps[topic]) }),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
				// Commit what was processed before letting the partitions go, so that
				// the next owner starts after it.
				if err := cl.CommitMarkedOffsets(ctx); err != nil {
					t.Logf("%s: commit on revoke: %v", name, err)
				}
				ledger.released(name, ps[topic])
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { ledger.released(name, ps[topic]) }),
		)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m := &member{cl: cl, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() {
					return
				}
				var recs []*kgo.Record
				fs.EachRecord(func(r *kgo.Record) {
					ledger.record(name, r)
					recs = append(recs, r)
				})
				cl.MarkCommitRecords(recs...)
				cl.AllowRebalance()
			}
		}()
		return m
	}
	stop := func(m *member) {
		m.cancel()
		<-m.done
		m.cl.Close() // revokes (committing), then leaves
	}

	// The producer writes throughout; acked counts what the cluster acknowledged.
	producer := c.kafkaClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var acked sync.Map
	var nAcked, nFailed atomic.Int64
	prodCtx, stopProducing := context.WithCancel(context.Background())
	var prodWG sync.WaitGroup
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		for i := 0; prodCtx.Err() == nil; i++ {
			v := fmt.Sprintf("r%07d", i)
			producer.Produce(prodCtx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					nFailed.Add(1)
					return
				}
				acked.Store(v, true)
				nAcked.Add(1)
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()

	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var live []*member
	for i := range members {
		live = append(live, start(fmt.Sprintf("m%02d", i)))
		if i%10 == 9 {
			time.Sleep(time.Second)
		}
	}
	time.Sleep(5 * time.Second)
	// A fifth of the members leave, and as many new ones join, twice.
	next := members
	for range 2 {
		var wg sync.WaitGroup
		for range members / 5 {
			i := rng.IntN(len(live))
			m := live[i]
			live = append(live[:i], live[i+1:]...)
			wg.Add(1)
			go func() { defer wg.Done(); stop(m) }()
		}
		for range members / 5 {
			live = append(live, start(fmt.Sprintf("m%02d", next)))
			next++
		}
		wg.Wait()
		time.Sleep(3 * time.Second)
	}
	stopProducing()
	prodWG.Wait()
	producer.Flush(context.Background())

	deadline := time.Now().Add(90 * time.Second)
	for {
		missing := 0
		acked.Range(func(k, _ any) bool {
			ledger.mu.Lock()
			if len(ledger.consumed[k.(string)]) == 0 {
				missing++
			}
			ledger.mu.Unlock()
			return true
		})
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged records never consumed", missing, nAcked.Load())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for _, m := range live {
		wg.Add(1)
		go func() { defer wg.Done(); stop(m) }()
	}
	wg.Wait()

	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	handovers := 0
	for _, n := range ledger.handovers {
		handovers += n
	}
	t.Logf("%d members in all, %d records acknowledged (%d failed), %d consumed, %d partition handovers", next, nAcked.Load(), nFailed.Load(), len(ledger.consumed), handovers)
	if len(ledger.conflicts) > 0 {
		t.Fatalf("partitions owned twice: %v", ledger.conflicts)
	}
	if len(ledger.dups) > 0 {
		t.Fatalf("%d records consumed twice within one ownership, first: %v", len(ledger.dups), ledger.dups[0])
	}
}
