package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeClock's tickers fire only when the test says.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	c   chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), c: make(chan time.Time)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTicker(time.Duration) Ticker { return fakeTicker{f.c} }

// tick advances the clock by d and fires the ticker (blocking until Run takes it).
func (f *fakeClock) tick(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	f.mu.Unlock()
	f.c <- now
}

type fakeTicker struct{ c chan time.Time }

func (t fakeTicker) C() <-chan time.Time { return t.c }
func (fakeTicker) Stop()                 {}

func TestHistoryIsBounded(t *testing.T) {
	h := NewHistory(time.Hour, 10*time.Second, 3)
	start := time.Unix(1_000_000, 0)
	for i := range 1000 {
		h.Add("a", start.Add(time.Duration(i)*10*time.Second), float64(i))
	}
	s := h.Snapshot("a")
	if len(s) != 1 || len(s[0].Points) != 360 {
		t.Fatalf("kept %d series, %d points; want 1 hour at one per 10 s (360)", len(s), len(s[0].Points))
	}
	if first, last := s[0].Points[0], s[0].Points[359]; first.V != 640 || last.V != 999 || first.T >= last.T {
		t.Fatalf("kept %v .. %v; want the newest 360 oldest first", first, last)
	}
	h.Add("b", start, 1)
	h.Add("c", start, 1)
	if h.Add("d", start, 1) || h.Len() != 3 {
		t.Fatalf("a fourth series was kept beyond the bound of 3 (%d series)", h.Len())
	}
	// "a" was last sampled at 999*10 s; b and c at start: an hour later only a is left.
	h.Prune(start.Add(999*10*time.Second + 30*time.Minute))
	if h.Len() != 1 || len(h.Snapshot("b")) != 0 {
		t.Fatalf("series gone quiet for over the window were kept: %d", h.Len())
	}
}

func TestMergeAveragesNodesPerInterval(t *testing.T) {
	a := []Series{{Name: "in/t", Points: []Point{{T: 10_000, V: 2}, {T: 20_000, V: 4}}}}
	b := []Series{{Name: "in/t", Points: []Point{{T: 12_000, V: 4}, {T: 30_000, V: 6}}}, {Name: "in/u", Points: []Point{{T: 10_000, V: 1}}}}
	m := Merge(10*time.Second, a, b)
	if len(m) != 2 || m[0].Name != "in/t" || m[1].Name != "in/u" {
		t.Fatalf("merged series: %+v", m)
	}
	want := []Point{{T: 10_000, V: 3}, {T: 20_000, V: 4}, {T: 30_000, V: 6}}
	if fmt.Sprint(m[0].Points) != fmt.Sprint(want) {
		t.Fatalf("merged points %v, want %v", m[0].Points, want)
	}
}

// The sampler runs on the clock's ticks: rates come from the end offsets' change over
// the clock's time, and Run returns when its context ends.
func TestSamplerFollowsTheClock(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addr := kc.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(n int) {
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock := newFakeClock()
	c, err := New(Options{Kafka: Kafka{Addr: addr}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sample := func(d time.Duration) {
		clock.mu.Lock()
		clock.now = clock.now.Add(d)
		clock.mu.Unlock()
		if err := c.SampleNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(10)
	sample(10 * time.Second) // the first sample: no rate yet
	produce(50)
	sample(10 * time.Second) // 50 records in 10 s of the clock's time
	sample(10 * time.Second) // nothing since
	pts := c.History().Snapshot("in/t")[0].Points
	if len(pts) != 2 || pts[0].V != 5 || pts[1].V != 0 || pts[1].T-pts[0].T != 10_000 {
		t.Fatalf("in/t = %v; want 5/s then 0/s, 10 s apart", pts)
	}

	// Run samples on each of the clock's ticks, and returns when its context ends.
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(rctx); close(done) }()
	produce(20)
	clock.tick(10 * time.Second)
	waitFor(t, func() bool { return len(c.History().Snapshot("in/t")[0].Points) == 3 })
	if pts := c.History().Snapshot("in/t")[0].Points; pts[2].V != 2 {
		t.Fatalf("in/t after a tick = %v; want 2/s last", pts)
	}
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A page merges the peers' histories, fetched with the peer token; without the token a
// history is refused.
func TestPeersHistoryMergedWithToken(t *testing.T) {
	mk := func(peers func() []string) *Console {
		c, err := New(Options{Kafka: Kafka{Addr: "127.0.0.1:1"}, Clock: newFakeClock(), PeerToken: "secret", Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	b := mk(nil)
	srv := httptest.NewServer(b)
	defer srv.Close()
	a := mk(func() []string { return []string{srv.URL, "http://127.0.0.1:1"} })
	at := time.UnixMilli(1_000_000)
	a.History().Add("in/t", at, 2)
	b.History().Add("in/t", at, 4)
	b.History().Add("in/t", at.Add(10*time.Second), 6)
	b.History().Add("lag/g/t/0", at, 1)
	got, asked, answered := a.mergedHistory(context.Background(), "in/")
	if asked != 2 || answered != 1 {
		t.Fatalf("asked %d peers, %d answered; want 2 and 1 (one is down)", asked, answered)
	}
	want := []Point{{T: 1_000_000, V: 3}, {T: 1_010_000, V: 6}}
	if len(got) != 1 || fmt.Sprint(got[0].Points) != fmt.Sprint(want) {
		t.Fatalf("merged %+v, want in/t %v", got, want)
	}
	resp, err := http.Get(srv.URL + "/console/api/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("history without the peer token: %s", resp.Status)
	}
}
