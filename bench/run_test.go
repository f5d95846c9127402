package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/twmb/franz-go/pkg/kmsg"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

// small is a quick workload for tests against kfake.
func small(mode Mode, topic string) Workload {
	w := DefaultWorkload(mode)
	w.Topic = topic
	w.Partitions = 3
	w.RecordSize = 256
	w.Warmup = 0
	w.Duration = 0
	w.BufferBytes = 1 << 20
	return w
}

func mustRun(t *testing.T, w Workload, bootstrap []string) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, w, RunOptions{Bootstrap: bootstrap, Target: "kfake"})
	if err != nil {
		t.Fatalf("%s: %v", w.Name, err)
	}
	for _, r := range rep.Roles {
		if r.Errors != 0 {
			t.Errorf("%s %s: %d errors: %s", w.Name, r.Role, r.Errors, r.FirstError)
		}
	}
	return rep
}

func TestRunProduceRecords(t *testing.T) {
	addr := startKfake(t)
	w := small(ModeProduce, "p-records")
	w.Records = 501
	w.Producers = 2
	w.Keys = KeyDist{Kind: KeysRandom}
	rep := mustRun(t, w, addr)
	p := rep.Role("produce")
	if p.Records != 501 || p.Bytes != 501*(256+keySize) {
		t.Errorf("produced %d records, %d bytes; want 501, %d", p.Records, p.Bytes, 501*(256+keySize))
	}
	if p.Latency == nil || p.Latency.Count != 501 || p.LatencyKind != "send→ack" || p.RecordsPerSec <= 0 {
		t.Errorf("produce stats %+v", p)
	}
}

func TestRunProduceOpenLoop(t *testing.T) {
	addr := startKfake(t)
	w := small(ModeProduce, "p-rate")
	w.Rate = 400
	w.Duration = 500 * time.Millisecond
	w.Producers = 2
	w.Acks = 1
	w.Compression = "lz4"
	rep := mustRun(t, w, addr)
	// Open loop sends exactly the records due in the window, however fast
	// the cluster is: 400/s for 0.5 s.
	if p := rep.Role("produce"); p.Records != 200 {
		t.Errorf("open loop at 400/s for 0.5s produced %d records, want 200", p.Records)
	}
	if rep.Rate != 400 {
		t.Errorf("report rate %v", rep.Rate)
	}
}

func TestRunConsume(t *testing.T) {
	addr := startKfake(t)
	for _, group := range []string{"", "bench-test"} {
		w := small(ModeConsume, "c-"+group)
		w.Records = 300
		w.Producers, w.Consumers = 2, 2
		w.Group = group
		w.Keys = KeyDist{Kind: KeysFixed, Count: 10}
		rep := mustRun(t, w, addr)
		pre, c := rep.Role("preload"), rep.Role("consume")
		if pre.Records != 300 || c.Records != 300 || c.Bytes != pre.Bytes {
			t.Errorf("group %q: preloaded %d (%d B), consumed %d (%d B)", group, pre.Records, pre.Bytes, c.Records, c.Bytes)
		}
		if c.Latency != nil {
			t.Errorf("consume of a preloaded topic has no meaningful latency, got %+v", c.Latency)
		}
		// A second run on the same topic reads only what it preloaded.
		rep = mustRun(t, w, addr)
		if c := rep.Role("consume"); c.Records != 300 {
			t.Errorf("group %q second run consumed %d, want 300", group, c.Records)
		}
	}

	// Without a preload the consumers read what is there and stop.
	w := small(ModeConsume, "c-")
	w.Preload = false
	w.Duration = 30 * time.Second
	rep := mustRun(t, w, addr)
	if c := rep.Role("consume"); c.Records != 600 || c.Seconds > 20 {
		t.Errorf("reading the existing 600 records: got %d in %.1fs", c.Records, c.Seconds)
	}
	if len(rep.Roles) != 1 {
		t.Errorf("roles %v", rep.Roles)
	}
}

func TestRunE2E(t *testing.T) {
	addr := startKfake(t)
	for _, group := range []string{"", "bench-e2e"} {
		w := small(ModeE2E, "e2e-"+group)
		w.Rate = 600
		w.Duration = 500 * time.Millisecond
		w.Producers, w.Consumers = 2, 2
		w.Group = group
		rep := mustRun(t, w, addr)
		p, c := rep.Role("produce"), rep.Role("consume")
		if p.Records != 300 || c.Records != 300 || rep.Lost != 0 {
			t.Errorf("group %q: produced %d consumed %d lost %d, want 300/300/0; notes %v", group, p.Records, c.Records, rep.Lost, rep.Notes)
		}
		if c.Latency == nil || c.Latency.Count != 300 || c.LatencyKind != "send→receive" {
			t.Errorf("group %q: e2e latency %+v", group, c)
		}
		// Receipt follows acknowledgement's send: e2e p50 is not below zero
		// and the histograms agree on counts.
		if p.Latency == nil || p.Latency.Count != 300 {
			t.Errorf("group %q: produce latency %+v", group, p.Latency)
		}
	}
}

func TestRunWarmupExcluded(t *testing.T) {
	addr := startKfake(t)
	w := small(ModeE2E, "e2e-warm")
	w.Rate = 1000
	w.Warmup = 200 * time.Millisecond
	w.Duration = 300 * time.Millisecond
	rep := mustRun(t, w, addr)
	p, c := rep.Role("produce"), rep.Role("consume")
	// 500 records are sent; only those due after the warm-up have
	// latencies (300), and the counts cover what completed in the window.
	if p.Latency == nil || p.Latency.Count != 300 || c.Latency == nil || c.Latency.Count != 300 {
		t.Errorf("latency counts produce %+v consume %+v, want 300 each", p.Latency, c.Latency)
	}
	if p.Records < 300 || p.Records > 500 || rep.Lost != 0 {
		t.Errorf("window records %d lost %d", p.Records, rep.Lost)
	}
}

func TestRunRateOfPeak(t *testing.T) {
	addr := startKfake(t)
	w := small(ModeE2E, "e2e-peak")
	w.Duration = 300 * time.Millisecond
	w.RateOfPeak = 0.5
	rep := mustRun(t, w, addr)
	if rep.Peak == nil || rep.PeakRate <= 0 {
		t.Fatalf("no peak measured: %+v", rep)
	}
	if got := min(rep.Peak.Role("produce").RecordsPerSec, rep.Peak.Role("consume").RecordsPerSec); math.Abs(got-rep.PeakRate) > 1e-9 {
		t.Errorf("peak rate %v, peak run %v", rep.PeakRate, got)
	}
	if math.Abs(rep.Rate-rep.PeakRate/2) > 1e-6 {
		t.Errorf("rate %v, want half of %v", rep.Rate, rep.PeakRate)
	}
	want := int64(rep.Rate * 0.3)
	if p := rep.Role("produce"); p.Records < want-2 || p.Records > want+2 {
		t.Errorf("at %v rec/s for 0.3s produced %d, want about %d", rep.Rate, p.Records, want)
	}
	// With a peak given, none is measured.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, w, RunOptions{Bootstrap: addr, Peak: 1000})
	if err != nil || rep.Peak != nil || rep.Rate != 500 {
		t.Errorf("given peak: err %v peak %v rate %v", err, rep.Peak, rep.Rate)
	}
}

func TestMainRunCommands(t *testing.T) {
	addr := startKfake(t)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, mode := range []string{"produce", "consume", "e2e"} {
		var out, errb bytes.Buffer
		args := []string{mode, "--bootstrap-server", addr, "--topic", "main-" + mode, "--records", "120",
			"--duration", "0", "--warmup", "0", "--record-size", "64", "--json"}
		if code := mainWith(ctx, args, &out, &errb, selfBinary{}); code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, errb.String())
		}
		var rep Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out.String())
		}
		role := "produce"
		if mode != "produce" {
			role = "consume"
		}
		if rep.Role(role).Records != 120 {
			t.Errorf("%s: %s records %d", mode, role, rep.Role(role).Records)
		}
	}
	// A table and progress lines.
	var out, errb bytes.Buffer
	code := mainWith(ctx, []string{"produce", "--bootstrap-server", addr, "--topic", "main-table", "--duration", "1200ms",
		"--warmup", "0", "--rate", "100"}, &out, &errb, selfBinary{})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "p99.9 ms") || !strings.Contains(out.String(), "offered rate: 100 rec/s") {
		t.Errorf("table:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "[custom @ "+addr+"]") {
		t.Errorf("no progress line on stderr: %q", errb.String())
	}
}

func TestMainUsage(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: shale bench"},
		{[]string{"help"}, 0, "usage: shale bench"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"produce", "--acks", "7"}, 2, "unknown acks"},
		{[]string{"produce", "-h"}, 0, "-record-size"},
		{[]string{"compare", "--preset", "nope"}, 2, "unknown preset"},
		{[]string{"compare", "-h"}, 0, "-shale-binary"},
		{[]string{"presets"}, 0, "omb-1k"},
		{[]string{"kfake-serve", "--listen", "nonsense"}, 1, "--listen"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := mainWith(ctx, c.args, &out, &errb, selfBinary{})
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d and %q", c.args, code, out.String()+errb.String(), c.code, c.want)
		}
	}
	// Help reads like the other shale commands': --name, and a readable
	// name for every value.
	for _, cmd := range []string{"produce", "consume", "e2e", "compare", "presets"} {
		var out, errb bytes.Buffer
		if code := mainWith(ctx, []string{cmd, "-h"}, &out, &errb, selfBinary{}); code != 0 || errb.Len() > 0 {
			t.Errorf("%s -h: exit %d, stderr %q", cmd, code, errb.String())
		}
		help := out.String()
		if !strings.HasPrefix(help, "Usage: shale bench "+cmd) || !strings.Contains(help, "\n  --") {
			t.Errorf("%s -h:\n%s", cmd, help)
		}
		for _, line := range strings.Split(help, "\n") {
			if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") || strings.HasSuffix(line, " value") || strings.Contains(line, "default -1") {
				t.Errorf("%s -h: line %q", cmd, line)
			}
		}
	}
	var help bytes.Buffer
	mainWith(ctx, []string{"produce", "-h"}, &help, io.Discard, selfBinary{})
	for _, want := range []string{"\n  --acks all|1|0\n", "\n  --record-size size\n", "(default 32MiB)", "\n  --preset name\n"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("produce -h lacks %q:\n%s", want, help.String())
		}
	}
	var out bytes.Buffer
	if code := mainWith(ctx, []string{"presets", "--json"}, &out, &out, selfBinary{}); code != 0 {
		t.Fatal(code)
	}
	var ps []Preset
	if err := json.Unmarshal(out.Bytes(), &ps); err != nil || len(ps) != len(presetOrder) {
		t.Errorf("presets JSON: %v, %d presets", err, len(ps))
	}
}

// An unreachable cluster ends in an error when the context ends, not a hang.
func TestRunUnreachable(t *testing.T) {
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	addr := "127.0.0.1:" + itoa(ports[0])
	start := time.Now()
	code := mainWith(ctx, []string{"produce", "--bootstrap-server", addr, "--records", "10", "--progress=false"}, &out, &errb, selfBinary{})
	if code != 1 || !strings.Contains(errb.String(), "create topic") {
		t.Errorf("exit %d stderr %q", code, errb.String())
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %v to give up", time.Since(start))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A cluster without consumer groups still runs a group workload, with the
// partitions assigned directly, and the report says so.
func TestRunGroupFallback(t *testing.T) {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(11, -1) // no JoinGroup
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.MaxVersions(vs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := small(ModeE2E, "fallback")
	w.Group = "g"
	w.Rate = 400
	w.Duration = 250 * time.Millisecond
	rep := mustRun(t, w, c.ListenAddrs())
	if !rep.GroupFallback || !strings.Contains(strings.Join(rep.Notes, " "), "no JoinGroup") {
		t.Errorf("fallback not reported: %+v", rep.Notes)
	}
	if p, c := rep.Role("produce"), rep.Role("consume"); p.Records != 100 || c.Records != 100 {
		t.Errorf("produced %d consumed %d, want 100 each", p.Records, c.Records)
	}
}

// A closed loop that runs out of time abandons what it still has buffered
// instead of draining it, and counts it.
func TestRunClosedLoopAbandons(t *testing.T) {
	// A broker that takes 200 ms per Produce, so that the buffer cannot drain before the
	// loop ends whatever the machine's speed.
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		time.Sleep(200 * time.Millisecond)
		return nil, nil, false
	})
	addr := c.ListenAddrs()
	w := small(ModeProduce, "abandon")
	// The warm-up takes the connection set-up, so that a few 200 ms answers
	// land in the window however loaded the machine.
	w.Warmup = time.Second
	w.Duration = time.Second
	w.BufferBytes = 32 << 20
	w.Linger = 50 * time.Millisecond
	rep := mustRun(t, w, addr)
	p := rep.Role("produce")
	if p.Records == 0 || p.Errors != 0 {
		t.Fatalf("produce %+v", p)
	}
	// 50000 records of 256 B fill the buffer far faster than the slowed broker
	// takes them, so some are always left at the end.
	if p.Abandoned == 0 || !strings.Contains(strings.Join(rep.Notes, " "), "abandoned") {
		t.Errorf("abandoned %d, notes %v, produce %+v", p.Abandoned, rep.Notes, p)
	}
	if p.Latency == nil || p.Latency.Count != p.Records {
		t.Errorf("latency count %v, records %d", p.Latency, p.Records)
	}
}

// Every goroutine a run starts is gone once it returns and its cluster is
// closed.
func TestRunNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w := small(ModeE2E, "leak")
		w.Group = "g"
		w.Rate, w.Duration = 500, 200*time.Millisecond
		mustRun(t, w, c.ListenAddrs())
		w = small(ModeConsume, "leak-c")
		w.Records = 100
		mustRun(t, w, c.ListenAddrs())
		w = small(ModeProduce, "leak-p")
		w.Duration = 200 * time.Millisecond
		var progress bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := Run(ctx, w, RunOptions{Bootstrap: c.ListenAddrs(), Progress: &progress}); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// A cluster that acknowledges nothing keeps every slot of a closed loop
// taken; the loop still ends with its window, abandoning what it holds,
// instead of waiting out the delivery timeout or the run's cap.
func TestRunEndsWhenNothingIsAcknowledged(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := small(ModeProduce, "unacknowledged")
	w.Duration = 300 * time.Millisecond
	w.Warmup = 0
	w.BufferBytes = 64 << 10
	c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// What a leader waiting for replicas that never fetch answers:
		// REQUEST_TIMED_OUT, retriable, so the client keeps every record.
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.RequestTimedOut.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	defer func(d time.Duration) { flushTimeout = d }(flushTimeout)
	flushTimeout = time.Second
	// Well below deliveryTimeout, so that a loop still waiting for a slot
	// after its window is cut off here and fails.
	ctx, cancel := context.WithTimeout(context.Background(), deliveryTimeout/2)
	defer cancel()
	rep, err := Run(ctx, w, RunOptions{Bootstrap: c.ListenAddrs()})
	if ctx.Err() != nil {
		t.Fatalf("the run (a 300ms window) was still going after %v: %v", deliveryTimeout/2, err)
	}
	p := rep.Role("produce")
	// Idempotent (acks=all): the records sent stay unacknowledged, which
	// the run reports; those never sent are abandoned.
	if p.Records != 0 || err == nil || !strings.Contains(err.Error(), "unacknowledged") {
		t.Errorf("produce %+v, err %v", p, err)
	}
}

// --records counts records measured: those of the warm-up come on top, so
// a warm-up long enough to send the whole count leaves it intact.
func TestRunRecordsAfterWarmup(t *testing.T) {
	addr := startKfake(t)
	for _, rate := range []float64{0, 2000} {
		w := small(ModeProduce, "records-warm")
		w.Records = 301
		w.Producers = 2
		w.Rate = rate
		// At 2000/s an open loop sends 1000 records in the warm-up, and a
		// closed loop against kfake far more: either way more than 301.
		w.Warmup = 500 * time.Millisecond
		w.Duration = time.Minute
		rep := mustRun(t, w, addr)
		p := rep.Role("produce")
		if p.Records != 301 || p.Seconds < 0 || (rate == 0 && (p.Latency == nil || p.Latency.Count != 301)) {
			t.Errorf("rate %v: measured %d records in %.3fs (latencies %v), want 301; warm-up records %d, notes %v",
				rate, p.Records, p.Seconds, p.Latency, p.WarmupRecords, rep.Notes)
		}
		if p.WarmupRecords > 0 && !strings.Contains(strings.Join(rep.Notes, " "), "warm-up") {
			t.Errorf("rate %v: %d warm-up records not in the notes %v", rate, p.WarmupRecords, rep.Notes)
		}
	}
}
