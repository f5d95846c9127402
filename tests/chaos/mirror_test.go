package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/tests/netns"
)

const (
	restPort    = 8082 // each namespace has its own ports, so every node can use the same
	metricsPort = 9644
	mirrorRate  = 300 // records a second on the source
)

// TestChaosMirrorLinkCut: two clusters of three combined nodes, RF=3 on both, on one
// bridge; a mirror topic on the destination copies a topic that an acks=all idempotent
// producer writes to the whole time. The network between the clusters is cut (every
// source node from every destination node; the test client still reaches both) and then
// healed. Afterwards every record the source acknowledged is on the destination at the
// same offset with the same key, value, timestamp and producer id, the two logs are equal
// up to the source's end, and the mirror's lag (its own metrics) returns to ~0 while the
// producer goes on. SHALE_CHAOS=full cuts for 60 s and kills a partition leader on each
// side during the cut; the short run cuts for 8 s.
func TestChaosMirrorLinkCut(t *testing.T) {
	cut, kills := 8*time.Second, false
	if fullRun() || os.Getenv("SHALE_CHAOS") == "mirror" {
		cut, kills = 60*time.Second, true
	}
	started := time.Now()
	nw := netns.New(t, 6)
	src := newClusterOn(t, combined, nw, nw.Nodes[:3], nil, func(*node) []string { return nil })
	dst := newClusterOn(t, combined, nw, nw.Nodes[3:], nil, func(n *node) []string {
		return []string{
			fmt.Sprintf("--rest.proxy.listener=%s:%d", n.net.IP, restPort),
			fmt.Sprintf("--http.listener=%s:%d", n.net.IP, metricsPort),
		}
	})
	t.Logf("two clusters up in %v", time.Since(started).Round(time.Millisecond))
	const topic = "mirrored"
	if err := createTopic(src, topic); err != nil {
		t.Fatal(err)
	}
	rest := fmt.Sprintf("--rest-url=http://%s:%d", dst.nodes[0].net.IP, restPort)
	runCLI(t, "link", "create", rest, "--link", "src", "--config", "bootstrap.servers="+strings.Join(src.seeds(), ","))
	runCLI(t, "link", "mirror", rest, "--link", "src", "--source-topic", topic)
	if err := createTopicWith(src, rdkTopic, rdkParts, nil); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "link", "mirror", rest, "--link", "src", "--source-topic", rdkTopic)
	rdk := startKcat(t, src.seeds())
	defer rdk.stop()

	const rate = mirrorRate
	w, err := startWorkload(src, topic, "cg", false, rate)
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop(fullWaits.drain)
	ackedAtLeast := func(n int, timeout time.Duration) {
		t.Helper()
		waitFor(t, timeout, fmt.Sprintf("%d records acknowledged by the source", n), func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.acked) >= n
		})
	}
	ackedAtLeast(rate, 60*time.Second)
	waitFor(t, 120*time.Second, "the mirror caught up before the cut", func() bool {
		ok, _ := mirrorCaughtUp(dst, topic, 5)
		return ok
	})

	// The cut: every node of one cluster from every node of the other, both ways.
	cutAt := time.Now()
	for _, a := range src.nodes {
		for _, b := range dst.nodes {
			if err := nw.Cut(a.net, b.net); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.mu.Lock()
	ackedAtCut := len(w.acked)
	w.mu.Unlock()
	if kills {
		// A leader on each side dies and comes back while the link is down: the source
		// elects from its ISR and the producer goes on; the destination's new leader has
		// no source to copy from until the heal.
		time.Sleep(cut / 6)
		for i, side := range []*cluster{src, dst} {
			leader, err := side.leaderOf(topic, 0, 60*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("killing the %s's %v (leader of %s-0) at cut+%v", []string{"source", "destination"}[i], leader, topic, time.Since(cutAt).Round(time.Second))
			if err := leader.kill9(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * sessionTimeout)
			if err := leader.start(); err != nil {
				t.Fatal(err)
			}
			if err := side.waitBrokerReady(leader, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if took, ok, why := side.waitHealed(topic, 90*time.Second); !ok {
				t.Fatalf("not healed %v after restarting %v: %s", took, leader, why)
			}
		}
	}
	if d := cut - time.Since(cutAt); d > 0 {
		time.Sleep(d)
	}
	w.mu.Lock()
	ackedDuringCut := len(w.acked) - ackedAtCut
	w.mu.Unlock()
	// The check that the lag is back to ~0 must be able to fail: during the cut it does.
	waitFor(t, 60*time.Second, "the mirror's metrics showing the cut", func() bool {
		ok, _ := mirrorCaughtUp(dst, topic, 2)
		return !ok
	})
	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	t.Logf("link cut for %v; the source acknowledged %d records meanwhile", healedAt.Sub(cutAt).Round(time.Second), ackedDuringCut)
	if ackedDuringCut == 0 {
		t.Fatal("the source acknowledged nothing during the cut: the producer did not run through it")
	}

	// The producer is still running: the mirror must catch up with a moving source.
	var why string
	waitFor(t, 180*time.Second, "the mirror's lag back to ~0 after the heal", func() bool {
		var ok bool
		ok, why = mirrorCaughtUp(dst, topic, 2)
		return ok
	})
	t.Logf("mirror lag back to ~0 %v after the heal (%s)", time.Since(healedAt).Round(100*time.Millisecond), why)
	ackedAtLeast(len(w.snapshot().acked)+rate, 60*time.Second)
	w.stop(fullWaits.drain)
	snap := w.snapshot()

	srcLog, srcEnds, dstLog := sameLogs(t, src, dst, topic, partitions, snap.minEnd())
	at := map[int32]map[int64][]byte{}
	for p, recs := range dstLog {
		at[p] = map[int64][]byte{}
		for _, r := range recs {
			at[p][r.Offset] = r.Value
		}
	}
	for _, a := range snap.acked {
		if v, ok := at[a.part][a.offset]; !ok || string(v) != strconv.FormatInt(a.seq, 10) {
			t.Fatalf("record %d, acknowledged at %d/%d, is %q on the destination", a.seq, a.part, a.offset, v)
		}
	}
	t.Logf("%d acknowledged records, %d partitions: every one on the destination at its offset, both logs identical up to the source's ends %v", len(snap.acked), len(srcLog), srcEnds)

	// librdkafka's producer wrote to the source through the same cut.
	rdk.stop()
	rdkSrc, rdkEnds, _ := sameLogs(t, src, dst, rdkTopic, rdkParts, nil)
	onSource := map[string]bool{}
	for _, recs := range rdkSrc {
		for _, r := range recs {
			onSource[string(r.Value)] = true
		}
	}
	acked, runs, failed, lastOut := rdk.result()
	if len(acked) == 0 {
		t.Fatal("kcat acknowledged nothing")
	}
	for _, v := range acked {
		if !onSource[v] {
			t.Fatalf("%s, acknowledged to kcat, is not in the source's log", v)
		}
	}
	// And librdkafka's consumer reads on the destination what the source holds.
	got := kcatRead(t, dst, rdkTopic, rdkEnds)
	n := 0
	for p, recs := range rdkSrc {
		for i, r := range recs {
			if i >= len(got[p]) {
				t.Fatalf("%s-%d: kcat read %d records on the destination, the source has %d", rdkTopic, p, len(got[p]), len(recs))
			}
			g := got[p][i]
			if g.Offset != r.Offset || fromNullable(g.Key) != string(r.Key) || fromNullable(g.Payload) != string(r.Value) || g.Ts != r.Timestamp.UnixMilli() {
				t.Fatalf("%s-%d: kcat read %+v on the destination, the source has %s", rdkTopic, p, g, describe(r))
			}
			n++
		}
	}
	t.Logf("kcat: %d of %d runs acknowledged (%d records); kcat -C on the destination read the source's %d records at their offsets", runs-failed, runs, len(acked), n)
	if failed > 0 {
		t.Logf("the last failed kcat run: %s", lastOut)
	}
}

const (
	rdkTopic = "mirrored-rdk"
	rdkParts = 3
)

// sameLogs reads topic on both clusters, the source up to its ends (at least minEnd), the
// destination once it has reached them, and fails unless the two are the same records at
// the same offsets.
func sameLogs(t *testing.T, src, dst *cluster, topic string, parts int, minEnd map[int32]int64) (srcLog map[int32][]*kgo.Record, srcEnds map[int32]int64, dstLog map[int32][]*kgo.Record) {
	t.Helper()
	srcLog, srcEnds = readRecords(t, src, topic, parts, minEnd)
	waitFor(t, 120*time.Second, "the destination's ends of "+topic+" reached the source's", func() bool {
		ends, err := endOffsets(dst, topic, parts)
		if err != nil {
			return false
		}
		for p, e := range srcEnds {
			if ends[p] < e {
				return false
			}
		}
		return true
	})
	dstLog, _ = readRecords(t, dst, topic, parts, srcEnds)
	for p, recs := range srcLog {
		if len(dstLog[p]) < len(recs) {
			t.Fatalf("%s-%d: the destination has %d records below %d, the source %d", topic, p, len(dstLog[p]), srcEnds[p], len(recs))
		}
		for i, r := range recs {
			if d := dstLog[p][i]; !sameRecord(r, d) {
				t.Fatalf("%s-%d record %d: source %s, destination %s", topic, p, i, describe(r), describe(d))
			}
		}
	}
	return srcLog, srcEnds, dstLog
}

// kcatProducer runs kcat -P (librdkafka, acks=all, idempotent) against the source over and
// over, 100 records a run, until stopped. A run that exits 0 had every record delivered.
type kcatProducer struct {
	seeds  []string
	cancel context.CancelFunc
	done   chan struct{}

	mu           sync.Mutex
	acked        []string
	runs, failed int
	lastOut      string
}

func startKcat(t *testing.T, seeds []string) *kcatProducer {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat (librdkafka) is not on PATH: tests/deps.sh installs it")
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kcatProducer{seeds: seeds, cancel: cancel, done: make(chan struct{})}
	go k.run(ctx)
	return k
}

func (k *kcatProducer) run(ctx context.Context) {
	defer close(k.done)
	for run := 0; ctx.Err() == nil; run++ {
		var in bytes.Buffer
		var vals []string
		for i := range 100 {
			v := fmt.Sprintf("rdk-%d-%d", run, i)
			vals = append(vals, v)
			fmt.Fprintf(&in, "k%d\t%s\n", i%7, v)
		}
		// Not tied to ctx: a run that is cut short would count as failed for no reason.
		cmd := exec.Command("kcat", "-P", "-q", "-b", strings.Join(k.seeds, ","), "-t", rdkTopic, "-K", `\t`,
			"-X", "request.required.acks=-1", "-X", "enable.idempotence=true", "-X", "linger.ms=5",
			"-X", "message.timeout.ms=60000", "-X", "client.id=shale-chaos-mirror")
		cmd.Stdin = &in
		out, err := cmd.CombinedOutput()
		k.mu.Lock()
		k.runs++
		if err != nil {
			k.failed++
			k.lastOut = fmt.Sprintf("%v: %s", err, out)
		} else {
			k.acked = append(k.acked, vals...)
		}
		k.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (k *kcatProducer) stop() {
	k.cancel()
	<-k.done
}

func (k *kcatProducer) result() (acked []string, runs, failed int, lastOut string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.acked), k.runs, k.failed, k.lastOut
}

// kcatRecord is one record of `kcat -C -J`.
type kcatRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Ts        int64   `json:"ts"`
	Key       *string `json:"key"`
	Payload   *string `json:"payload"`
}

func fromNullable(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// kcatRead reads each partition of topic on c with kcat -C (librdkafka's consumer) from
// its start up to ends.
func kcatRead(t *testing.T, c *cluster, topic string, ends map[int32]int64) map[int32][]kcatRecord {
	t.Helper()
	out := map[int32][]kcatRecord{}
	for p, end := range ends {
		if end == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		res, err := exec.CommandContext(ctx, "kcat", "-C", "-J", "-q", "-b", strings.Join(c.seeds(), ","), "-t", topic,
			"-p", strconv.Itoa(int(p)), "-o", "beginning", "-c", strconv.FormatInt(end, 10), "-e").Output()
		cancel()
		if err != nil {
			t.Fatalf("kcat -C %s-%d: %v", topic, p, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(res)), "\n") {
			var r kcatRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("kcat -C %s-%d: %q: %v", topic, p, line, err)
			}
			out[p] = append(out[p], r)
		}
	}
	return out
}

// runCLI runs the shale binary (from the root namespace) and fails the test on an error.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out []byte
	var err error
	// The REST proxy may still be starting on the broker it names.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err = exec.Command(shaleBin, args...).CombinedOutput()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatalf("shale %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitFor polls cond every 200 ms until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mirrorCaughtUp reads the mirror's metrics from every running destination broker: each
// of the topic's partitions must be reported by its leader with a lag of at most
// maxSeconds and, as records, at most what the source takes in that time.
func mirrorCaughtUp(dst *cluster, topic string, maxSeconds float64) (bool, string) {
	lagSec := map[string]float64{}
	lagRec := map[string]float64{}
	since := map[string]float64{}
	cl := http.Client{Timeout: 2 * time.Second}
	for _, b := range dst.brokers {
		if !b.running() {
			continue
		}
		resp, err := cl.Get(fmt.Sprintf("http://%s:%d/metrics", b.net.IP, metricsPort))
		if err != nil {
			return false, err.Error()
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var into map[string]float64
			switch {
			case strings.HasPrefix(line, "shale_mirror_partition_lag_seconds{"):
				into = lagSec
			case strings.HasPrefix(line, "shale_mirror_partition_lag_records{"):
				into = lagRec
			case strings.HasPrefix(line, "shale_mirror_partition_seconds_since_fetch{"):
				into = since
			default:
				continue
			}
			if !strings.Contains(line, `topic="`+topic+`"`) {
				continue
			}
			labels, val, ok := strings.Cut(line[strings.Index(line, "{"):], "} ")
			if !ok {
				continue
			}
			_, part, _ := strings.Cut(labels, `partition="`)
			part, _, _ = strings.Cut(part, `"`)
			v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err == nil {
				into[part] = max(into[part], v)
			}
		}
		resp.Body.Close()
	}
	worstSec, worstRec, worstSince := 0.0, 0.0, 0.0
	for p := range partitions {
		s, ok1 := lagSec[strconv.Itoa(p)]
		r, ok2 := lagRec[strconv.Itoa(p)]
		f, ok3 := since[strconv.Itoa(p)]
		if !ok1 || !ok2 || !ok3 {
			return false, fmt.Sprintf("no leader reports the lag of p%d", p)
		}
		worstSec, worstRec, worstSince = max(worstSec, s), max(worstRec, r), max(worstSince, f)
	}
	why := fmt.Sprintf("worst partition lag %.1f s, %.0f records, %.1f s since its last fetch", worstSec, worstRec, worstSince)
	// The lag figures are as of the last fetch, so they are only current when that fetch
	// is recent: a cut link leaves them where they were and shows in seconds_since_fetch.
	return worstSec <= maxSeconds && worstRec <= maxSeconds*mirrorRate && worstSince <= maxSeconds, why
}

func endOffsets(c *cluster, topic string, parts int) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	if len(out) != parts {
		return nil, fmt.Errorf("%d of %d partitions answered", len(out), parts)
	}
	return out, nil
}

// readRecords reads every partition from 0 to its end offset, waiting (bounded) for each
// end to reach minEnd; it returns the records, whole, and the ends it read to.
func readRecords(t *testing.T, c *cluster, topic string, parts int, minEnd map[int32]int64) (map[int32][]*kgo.Record, map[int32]int64) {
	t.Helper()
	var ends map[int32]int64
	waitFor(t, 60*time.Second, "end offsets of "+topic, func() bool {
		var err error
		ends, err = endOffsets(c, topic, parts)
		if err != nil {
			return false
		}
		for p, e := range minEnd {
			if ends[p] < e {
				return false
			}
		}
		return true
	})
	want := map[int32]kgo.Offset{}
	for p, e := range ends {
		if e > 0 {
			want[p] = kgo.NewOffset().At(0)
		}
	}
	out := map[int32][]*kgo.Record{}
	if len(want) == 0 {
		return out, ends
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.DialTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d partitions unfinished", topic, len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
			if r.Offset+1 >= ends[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out, ends
}

// sameRecord compares what a mirror must keep: offset, key, value, headers, timestamp
// and the producer id, producer epoch and leader epoch (which come from the batch header,
// so equal ones mean the batch was copied, not produced again).
func sameRecord(a, b *kgo.Record) bool {
	if a.Offset != b.Offset || !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) ||
		!a.Timestamp.Equal(b.Timestamp) || a.ProducerID != b.ProducerID || a.ProducerEpoch != b.ProducerEpoch ||
		a.LeaderEpoch != b.LeaderEpoch || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func describe(r *kgo.Record) string {
	return fmt.Sprintf("offset %d key %q value %q ts %v pid %d/%d epoch %d", r.Offset, r.Key, r.Value, r.Timestamp, r.ProducerID, r.ProducerEpoch, r.LeaderEpoch)
}
