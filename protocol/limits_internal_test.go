package protocol

import (
	"context"
	"testing"
	"time"
)

func TestMemoryPoolNonStrict(t *testing.T) {
	p := newMemoryPool(100, NewMetrics(nil).RequestPoolBytes)
	ctx := context.Background()
	stop := make(chan struct{})
	if err := p.reserve(ctx, stop, 60); err != nil {
		t.Fatal(err)
	}
	// Not exhausted yet: a request past the cap still gets in, as in Kafka's pool.
	if err := p.reserve(ctx, stop, 80); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- p.reserve(ctx, stop, 10) }()
	select {
	case err := <-got:
		t.Fatalf("reserved from an exhausted pool (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.release(60) // 80 of 100 used: not exhausted
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if u := p.Used(); u != 90 {
		t.Fatalf("used %d, want 90", u)
	}
	p.release(90)
	cctx, cancel := context.WithCancel(ctx)
	p.reserve(ctx, stop, 100)
	go func() { got <- p.reserve(cctx, stop, 1) }()
	cancel()
	if err := <-got; err == nil {
		t.Fatal("reserve ignored its context")
	}
	close(stop)
	if err := p.reserve(ctx, stop, 1); err == nil {
		t.Fatal("reserve ignored stop")
	}
}

func TestParseConnectionOverrides(t *testing.T) {
	got, err := ParseConnectionOverrides(" 10.0.0.1:5, [2001:db8::1]:0,localhost:7 ,")
	if err != nil {
		t.Fatal(err)
	}
	if got["10.0.0.1"] != 5 || got["2001:db8::1"] != 0 || got["127.0.0.1"] != 7 {
		t.Fatalf("overrides %v", got)
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.1:x", "10.0.0.1:-1", ":3"} {
		if _, err := ParseConnectionOverrides(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
