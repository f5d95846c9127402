package e2e

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMemoryBoundedUnderLongProduce produces 2 GiB (SHALE_E2E_MEMORY_BYTES overrides;
// -short uses 256 MiB) into a topic with small segments and byte retention, and checks
// the broker's anonymous RSS stays under 256 MiB: the page cache behind the mmap'd
// segments is the kernel's, not the broker's heap.
func TestMemoryBoundedUnderLongProduce(t *testing.T) {
	total := int64(2 << 30)
	if testing.Short() {
		total = 256 << 20
	}
	if s := os.Getenv("SHALE_E2E_MEMORY_BYTES"); s != "" {
		if _, err := fmt.Sscan(s, &total); err != nil {
			t.Fatal(err)
		}
	}
	n := newNode(t, "--log.segment.bytes=67108864", "--log.retention.bytes=134217728", "--log.retention.check.interval.ms=1000")
	n.start()
	adm := kadm.NewClient(mustClient(t, n.addr()))
	if _, err := adm.CreateTopic(context.Background(), 4, 1, nil, "mem"); err != nil {
		t.Fatal(err)
	}
	cl := mustClient(t, n.addr(), kgo.DefaultProduceTopic("mem"), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(time.Minute))
	value := make([]byte, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var peak int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if r := n.rssAnon(); r > peak {
					peak = r
				}
			}
		}
	}()
	var errs atomic.Int64
	for sent := int64(0); sent < total; sent += int64(len(value)) {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	if e := errs.Load(); e > 0 {
		t.Fatalf("%d produce errors", e)
	}
	t.Logf("produced %d MiB; peak anonymous RSS %d MiB", total>>20, peak>>20)
	if peak <= 0 {
		t.Fatal("could not read the broker's RSS")
	}
	if peak > 256<<20 {
		t.Fatalf("peak anonymous RSS %d MiB exceeds 256 MiB", peak>>20)
	}
}
