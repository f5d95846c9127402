package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestKeySources(t *testing.T) {
	buf := make([]byte, keySize)
	if k := newKeySource(KeyDist{Kind: KeysNone}, 1).key(buf); k != nil {
		t.Errorf("none gave key %q", k)
	}
	rs := newKeySource(KeyDist{Kind: KeysRandom}, 1)
	seen := map[string]bool{}
	for range 1000 {
		k := rs.key(buf)
		if len(k) != keySize {
			t.Fatalf("random key of %d bytes", len(k))
		}
		seen[string(k)] = true
	}
	if len(seen) != 1000 {
		t.Errorf("1000 random keys, %d distinct", len(seen))
	}
	fs := newKeySource(KeyDist{Kind: KeysFixed, Count: 5}, 1)
	seen = map[string]bool{}
	for range 1000 {
		k := fs.key(buf)
		if len(k) != keySize {
			t.Fatalf("fixed key of %d bytes", len(k))
		}
		seen[string(k)] = true
	}
	if len(seen) != 5 {
		t.Errorf("fixed:5 gave %d distinct keys", len(seen))
	}
	// The same set for every seed, so every target sees the same keys.
	other := newKeySource(KeyDist{Kind: KeysFixed, Count: 5}, 99)
	if !bytes.Equal(other.fixed, fs.fixed) {
		t.Error("fixed key sets differ between sources")
	}
}

func TestE2EHeader(t *testing.T) {
	v := make([]byte, 32)
	putE2EHeader(v, 42, 1234*time.Microsecond)
	if at, ok := readE2EHeader(v, 42); !ok || at != 1234*time.Microsecond {
		t.Errorf("read back %v %v", at, ok)
	}
	if _, ok := readE2EHeader(v, 43); ok {
		t.Error("another run's record accepted")
	}
	if _, ok := readE2EHeader(v[:15], 42); ok {
		t.Error("short value accepted")
	}
}

func TestSlotPool(t *testing.T) {
	pattern := newPattern(100, 1)
	for _, c := range pattern {
		if c < 'A' || c > 'Z' {
			t.Fatalf("pattern byte %q", c)
		}
	}
	p := newSlotPool(context.Background(), 8, 100, pattern)
	if len(p.free) != 8 {
		t.Fatalf("%d free slots", len(p.free))
	}
	a, b := <-p.free, <-p.free
	if len(a.value) != 100 || cap(a.value) != 100 || bytes.Equal(a.value, b.value) {
		t.Error("slot values should be 100 bytes, capped, and differ between slots")
	}
	// Writing one slot's e2e header must not touch its neighbour.
	before := append([]byte(nil), b.value...)
	putE2EHeader(a.value, 1, 1)
	if !bytes.Equal(before, b.value) {
		t.Error("slots share memory")
	}
}

// TestHotLoopAllocationFree checks that refilling a slot for the next send
// (key, e2e header, record) allocates nothing.
func TestHotLoopAllocationFree(t *testing.T) {
	ctx := context.Background()
	p := newSlotPool(ctx, 4, 1024, newPattern(1024, 1))
	for _, dist := range []KeyDist{{Kind: KeysNone}, {Kind: KeysRandom}, {Kind: KeysFixed, Count: 100}} {
		ks := newKeySource(dist, 1)
		allocs := testing.AllocsPerRun(1000, func() {
			s := <-p.free
			putE2EHeader(s.value, 7, time.Millisecond)
			s.rec = kgo.Record{Topic: "t", Key: ks.key(s.key), Value: s.value, Context: s}
			p.free <- s
		})
		if allocs != 0 {
			t.Errorf("keys %s: %v allocations per record", dist, allocs)
		}
	}
}
