package server

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The console's own cost at scale (bench/RESULTS.md, "Web console"): each page's load
// time with 2,000 partitions (100 topics of 20) and 200 groups, and the process's CPU
// while 10 viewers refresh the overview and the groups page every 10 s. Run with
// SHALE_CONSOLE_SCALE=1; it takes a few minutes.
func TestConsoleScale(t *testing.T) {
	if os.Getenv("SHALE_CONSOLE_SCALE") == "" {
		t.Skip("set SHALE_CONSOLE_SCALE=1 to measure the console at 2,000 partitions and 200 groups")
	}
	n := startConsoleNode(t, "--offsets.topic.num.partitions=1")
	ctx := ctxFor(t, 15*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var topics []string
	for i := range 100 {
		topics = append(topics, fmt.Sprintf("t%03d", i))
	}
	created, err := adm.CreateTopics(ctx, 20, 1, nil, topics...)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		for p := range int32(20) {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for g := range 200 {
		// Each group commits offset 0 on every partition of one topic: 20 lag rows.
		offsets := kadm.Offsets{}
		for p := range int32(20) {
			offsets.Add(kadm.Offset{Topic: topics[g%100], Partition: p, At: 0})
		}
		if err := adm.CommitAllOffsets(ctx, fmt.Sprintf("group-%03d", g), offsets); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, "http://"+n.http)
	if _, body := b.get("/"); !strings.Contains(body, "101 topics · 2001 partitions") {
		t.Fatalf("the overview does not show 2,000 partitions (and __consumer_offsets):\n%s", body)
	}
	if _, body := b.get("/groups"); strings.Count(body, "data-group=") != 200 {
		t.Fatalf("the groups page does not show 200 groups:\n%s", body)
	}
	pages := []string{"/", "/topics", "/topic?name=t050", "/groups", "/group?id=group-050", "/messages?topic=t050&partition=3", "/security"}
	var report strings.Builder
	fmt.Fprintf(&report, "| page | median | min | max |\n|---|---|---|---|\n")
	for _, p := range pages {
		var ds []time.Duration
		for range 11 {
			start := time.Now()
			code, body := b.get(p)
			ds = append(ds, time.Since(start))
			if code != 200 || strings.Contains(body, `class="error"`) && p != "/security" && p != "/topics" {
				t.Fatalf("%s: %d\n%s", p, code, body)
			}
		}
		slices.Sort(ds)
		fmt.Fprintf(&report, "| `%s` | %s | %s | %s |\n", p, ds[5].Round(time.Millisecond), ds[0].Round(time.Millisecond), ds[10].Round(time.Millisecond))
	}
	// CPU: first idle (the node and its console's sampler alone), then with 10 viewers
	// loading the overview and the groups page every 10 s.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const window = 60 * time.Second
	c0 := cpu()
	time.Sleep(window)
	idle := cpu() - c0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for v := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			viewer := newBrowser(t, "http://"+n.http)
			time.Sleep(time.Duration(v) * time.Second) // spread over the 10 s
			for {
				viewer.get("/")
				viewer.get("/groups")
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Second):
				}
			}
		}()
	}
	c1 := cpu()
	time.Sleep(window)
	busy := cpu() - c1
	close(stop)
	wg.Wait()
	fmt.Fprintf(&report, "\nprocess CPU over %s: idle %.1f%% of a core, with 10 viewers %.1f%% of a core\n",
		window, 100*idle.Seconds()/window.Seconds(), 100*busy.Seconds()/window.Seconds())
	t.Logf("console at 2,000 partitions and 200 groups:\n%s", report.String())
}
