package cluster

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// replicaCounts counts each broker's replicas of topic as broker addr's metadata shows.
func replicaCounts(t *testing.T, addr, topic string) map[int32]int {
	t.Helper()
	resp, err := metadataFrom(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := topicState(resp, topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	out := map[int32]int{}
	for _, p := range ps {
		for _, r := range p.replicas {
			out[r]++
		}
	}
	return out
}

// shaleCmd runs the shale binary and returns its exit code and output.
func shaleCmd(args ...string) (int, string) {
	out, err := exec.Command(shaleBin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// TestScaleOutAndDrain is an operator's scale-out and scale-down with a producer writing
// with acks=all throughout: a fourth broker joins a three-broker cluster, `shale cluster
// rebalance` moves its share onto it, `shale broker unregister` refuses a broker that
// still holds replicas, `shale broker drain` empties it, and once it is stopped it is
// unregistered. Every acknowledged record is read back; a second rebalance finds nothing
// to move.
func TestScaleOutAndDrain(t *testing.T) {
	c := newCluster(t)
	b := c.broker(4).addr
	createTopic(t, b, newTopic("scale", 6, 3))

	prod := c.kafkaClient(kgo.DefaultProduceTopic("scale"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			if err := prod.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err == nil {
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	if n := c.addBroker(); n.id != 7 {
		t.Fatalf("new broker %d", n.id)
	}
	out := cli(t, b, "cluster", "rebalance", "--dry-run")
	if !strings.Contains(out, "Plan: ") || !strings.Contains(out, "\n7 ") {
		t.Fatalf("dry run:\n%s", out)
	}
	if got := replicaCounts(t, b, "scale")[7]; got != 0 {
		t.Fatalf("the dry run moved %d replicas", got)
	}
	out = cli(t, b, "cluster", "rebalance")
	if !strings.HasSuffix(out, "done\n") {
		t.Fatalf("rebalance:\n%s", out)
	}
	t.Logf("rebalance:\n%s", out)
	counts := replicaCounts(t, b, "scale")
	for _, id := range []int32{4, 5, 6, 7} {
		if n := counts[id]; n < 4 || n > 5 {
			t.Fatalf("after the rebalance broker %d holds %d replicas: %v", id, n, counts)
		}
	}

	code, out := shaleCmd("broker", "unregister", "--node", "5", "--bootstrap-server="+b)
	if code != 1 || !strings.Contains(out, "POLICY_VIOLATION") || !strings.Contains(out, "scale-") {
		t.Fatalf("unregistering a broker with replicas: exit %d\n%s", code, out)
	}
	out = cli(t, b, "broker", "drain", "--node", "5")
	t.Logf("drain:\n%s", out)
	counts = replicaCounts(t, b, "scale")
	if counts[5] != 0 {
		t.Fatalf("broker 5 still holds replicas after the drain: %v", counts)
	}
	for _, id := range []int32{4, 6, 7} {
		if counts[id] != 6 {
			t.Fatalf("after the drain: %v", counts)
		}
	}
	c.broker(5).terminate()
	cli(t, b, "broker", "unregister", "--node", "5")
	if out := cli(t, b, "cluster", "rebalance"); !strings.Contains(out, "nothing to move") {
		t.Fatalf("a second rebalance:\n%s", out)
	}

	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	if want == 0 {
		t.Fatal("nothing acknowledged")
	}
	cons := c.kafkaClient(kgo.ConsumeTopics("scale"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < want && cctx.Err() == nil {
		cons.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
			if acked[string(r.Value)] {
				seen[string(r.Value)] = true
			}
		})
	}
	if len(seen) != want {
		var missing []string
		for v := range acked {
			if !seen[v] {
				missing = append(missing, v)
			}
		}
		slices.Sort(missing)
		t.Fatalf("%d of %d acknowledged records read back; missing %v", len(seen), want, missing[:min(len(missing), 20)])
	}
	t.Logf("%d records acknowledged through the scale-out and drain, all read back", want)
}
