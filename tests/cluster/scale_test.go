package cluster

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
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

	prod := startAckedProducer(c, "scale", 1000)

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
	want := prod.stopAndReadBack(t)
	t.Logf("%d records acknowledged through the scale-out and drain, all read back", want)
}
