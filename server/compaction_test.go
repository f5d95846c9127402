package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
)

// A franz-go producer writes keyed records (and tombstones) to a topic with
// cleanup.policy=compact and small segments; the broker's cleaner compacts it; a new
// consumer reading from the earliest offset gets every key's latest value, deleted keys
// stay deleted, and it reads fewer records than were written (offsets have gaps).
func TestCompactedTopicThroughFranzGo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	runNode(t, &logs, "--log.dirs="+dir, "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener="+httpAddr, "--listeners=PLAINTEXT://"+addr,
		"--log.cleaner.backoff.ms=50", "--log.cleaner.dedupe.buffer.size=1048576")
	waitBroker(t, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "compacted"
	seg, dirty, del := "2048", "0.01", "0"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": ptr("compact"), "segment.bytes": &seg,
		"min.cleanable.dirty.ratio": &dirty, "delete.retention.ms": &del,
	}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}

	const keys, rounds = 20, 40
	want := map[string]string{}
	produced := 0
	for r := range rounds {
		for k := range keys {
			key := fmt.Sprintf("key-%02d", k)
			rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: fmt.Appendf(nil, "value-%d-%d", r, k)}
			if r == rounds-1 && k%5 == 0 {
				rec.Value = nil // a tombstone: key deleted
				delete(want, key)
			} else {
				want[key] = string(rec.Value)
			}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			produced++
		}
	}
	// A record without a key is refused on a compacted topic, as in Kafka.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("a record without a key was accepted on a compacted topic")
	}

	var got map[string]string
	var read int
	testutil.Eventually(t, 60*time.Second, "the cleaner compacts the topic", func() bool {
		got, read = consumeAll(t, ctx, addr, topic, produced)
		return read < produced/2
	})
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s: read %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v != "" {
			t.Errorf("deleted key %s reads %q", k, v)
		}
	}
	if !strings.Contains(logs.String(), "log cleaner run") {
		t.Errorf("no cleaner run was logged")
	}
	t.Logf("produced %d records, a new consumer reads %d", produced, read)

	resp2, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	for _, m := range []string{`shale_log_cleaner_dirty_ratio{partition="0",topic="compacted"}`, `shale_log_cleaner_dirty_bytes{partition="0",topic="compacted"}`, `shale_log_cleaner_seconds_since_last_run{partition="0",topic="compacted"}`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

func ptr(s string) *string { return &s }

// consumeAll reads the topic from the earliest offset to its end with a new consumer and
// returns the key -> value table (a tombstone reads as "") and how many records it read.
func consumeAll(t *testing.T, ctx context.Context, addr, topic string, atMost int) (map[string]string, int) {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	adm := kadm.NewClient(c)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := ends[topic][0].Offset
	table := map[string]string{}
	n := 0
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := c.PollFetches(fctx)
		cancel()
		if err := fs.Err0(); err != nil && ctx.Err() == nil && fctx.Err() == nil {
			t.Fatalf("fetch: %v", err)
		}
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			table[string(r.Key)] = string(r.Value)
			n++
			last = r.Offset
		})
		if last >= end-1 || fctx.Err() != nil || n > atMost {
			return table, n
		}
	}
}
