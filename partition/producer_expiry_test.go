package partition

import (
	"testing"
	"time"
)

// ExpireProducers forgets a producer once its newest batch is at least
// producer.id.expiration.ms old, as Kafka's ProducerStateManager does (>=).
func TestExpireProducers(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.UnixMilli(10_000_000)
	for pid, ts := range map[int64]int64{1: now.UnixMilli() - 1000, 2: now.UnixMilli() - 999} {
		h := hdr(pid, 0, 0, 1, pid)
		h.MaxTimestamp = ts
		p.producers.record(h)
	}
	if n := p.ExpireProducers(now, time.Second); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	if _, ok := p.producers.producers[1]; ok {
		t.Fatal("producer idle for exactly the expiration kept")
	}
	if _, ok := p.producers.producers[2]; !ok {
		t.Fatal("producer idle for less than the expiration forgotten")
	}
}
