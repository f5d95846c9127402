package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9KeepsAcknowledged produces with acks=all while the broker is killed with
// SIGKILL, restarts it, and checks that every acknowledged record is there, once, in
// order. The default flush policy leaves fsync to the OS, as Kafka does: a killed
// process loses nothing the kernel has, while surviving power loss needs
// flush.messages=1 (or replication).
func TestKill9KeepsAcknowledged(t *testing.T) {
	n := newNode(t)
	n.start()
	const topic = "durable"
	adm := kadm.NewClient(mustClient(t, n.addr()))
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// One mutex for every round: franz-go may still run a closed client's promises on
	// its own goroutines after Close returns, concurrently with the next round.
	var mu sync.Mutex
	acked := map[string]bool{}
	for round := 0; round < 3; round++ {
		cl := mustClient(t, n.addr(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0), kgo.RequestTimeoutOverhead(2*time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					v := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 10)), Value: []byte(v)}, func(r *kgo.Record, err error) {
						if err == nil {
							mu.Lock()
							acked[string(r.Value)] = true
							mu.Unlock()
						}
					})
					if i%64 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}()
		}
		time.Sleep(1500 * time.Millisecond)
		n.kill9()
		cancel()
		wg.Wait()
		cl.Close()
		mu.Lock()
		t.Logf("round %d: %d records acknowledged so far", round, len(acked))
		mu.Unlock()
		n.start()
	}
	mu.Lock()
	final := maps.Clone(acked)
	mu.Unlock()
	if len(final) < 1000 {
		t.Fatalf("only %d records acknowledged: the test did not exercise the broker", len(final))
	}

	cons := mustClient(t, n.addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	end, err := kadm.NewClient(cons).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	end.Each(func(o kadm.ListedOffset) { want += o.Offset })
	seen := map[string]int{}
	next := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for got := int64(0); got < want; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if r.Offset != next[r.Partition] {
				t.Errorf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition] = r.Offset + 1
			seen[string(r.Value)]++
		})
	}
	missing := 0
	for v := range final {
		if seen[v] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records lost", missing, len(final))
	}
	for v, c := range seen {
		if c > 1 && final[v] {
			// Retries off: a record appears twice only if the broker duplicated it.
			t.Errorf("record %s appears %d times", v, c)
		}
	}
	t.Logf("%d acknowledged records all present among %d in the log", len(final), want)
}

// recoveryLine is what the log package logs when it opens a log that was not closed
// cleanly.
const recoveryLine = "recovering log after an unclean shutdown"

// TestSigtermCleanShutdown: SIGTERM exits 0 and the restart needs no recovery; a SIGKILL
// after a write does (which shows that the check can fail).
func TestSigtermCleanShutdown(t *testing.T) {
	n := newNode(t)
	n.start()
	cl := mustClient(t, n.addr(), kgo.DefaultProduceTopic("clean"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := n.terminate(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, n.log())
	}
	n.start()
	end, err := kadm.NewClient(mustClient(t, n.addr())).ListEndOffsets(ctx, "clean")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	end.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 100 {
		t.Fatalf("%d records after restart, want 100", total)
	}
	if strings.Contains(n.log(), recoveryLine) {
		t.Fatalf("the restart after SIGTERM recovered a log:\n%s", n.log())
	}

	cl = mustClient(t, n.addr(), kgo.DefaultProduceTopic("clean"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("last")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	n.kill9()
	n.start()
	if !strings.Contains(n.log(), recoveryLine) {
		t.Fatalf("no recovery logged after SIGKILL:\n%s", n.log())
	}
}

func mustClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
