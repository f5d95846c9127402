package cluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/internal/testutil"
)

// cli runs the shale binary's admin command against broker addr.
func cli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := exec.Command(shaleBin, append(args, "--bootstrap-server="+addr)...).CombinedOutput()
	if err != nil {
		t.Fatalf("shale %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// joinController starts controller id outside the voters: it waits to be added.
func (c *cluster) joinController(id int32) *proc {
	c.t.Helper()
	p := &proc{t: c.t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(c.t)), dir: c.t.TempDir()}
	p.args = []string{"serve", "--node.id=" + strconv.Itoa(int(id)), "--process.roles=controller",
		"--listeners=CONTROLLER://" + p.addr, "--log.dirs=" + filepath.Join(p.dir, "data"),
		"--controller.quorum.voters=" + c.voters, "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener="}
	c.controllers = append(c.controllers, p)
	p.start()
	return p
}

func quorumOf(t *testing.T, addr string) client.Quorum {
	t.Helper()
	cl, err := client.New(client.Options{Brokers: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q, err := cl.DescribeQuorum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func replicaIDs(rs []client.QuorumReplica) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// TestControllerSwap replaces all three controllers of a running cluster (add 7, remove
// 1, add 8, remove 2, add 9, remove 3) with `shale controller add|remove`, while a
// producer writes with acks=all. Each removed controller stops serving and says so; the
// brokers, configured with controllers 1-3 only, keep working against 7-9; nothing
// acknowledged is lost. DescribeQuorum (what kadm-based tools send) describes the quorum
// at each step.
func TestControllerSwap(t *testing.T) {
	c := newCluster(t)
	b := c.broker(4).addr
	createTopic(t, b, newTopic("swap", 3, 3))

	q := quorumOf(t, b)
	if got := replicaIDs(q.Voters); !slices.Equal(got, []int32{1, 2, 3}) || q.LeaderID < 1 || q.LeaderID > 3 || q.HighWatermark <= 0 {
		t.Fatalf("quorum before the swap: %+v", q)
	}
	if got := replicaIDs(q.Observers); !slices.Equal(got, []int32{4, 5, 6}) {
		t.Fatalf("observers: %v", got)
	}

	// A producer runs through the whole swap.
	prod := startAckedProducer(c, "swap", 100)

	for _, st := range []struct{ add, remove int32 }{{7, 1}, {8, 2}, {9, 3}} {
		n := c.joinController(st.add)
		cli(t, b, "controller", "add", "--node", strconv.Itoa(int(st.add)), "--address", n.addr)
		cli(t, b, "controller", "remove", "--node", strconv.Itoa(int(st.remove)))
		old := c.controllers[st.remove-1]
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("controller %d stopped serving", st.remove), func() bool {
			return strings.Contains(old.log(), "was removed from the controller quorum")
		})
		if conn, err := net.DialTimeout("tcp", old.addr, time.Second); err == nil {
			conn.Close()
			t.Fatalf("controller %d still accepts connections after its removal", st.remove)
		}
	}
	q = quorumOf(t, c.broker(5).addr)
	if got := replicaIDs(q.Voters); !slices.Equal(got, []int32{7, 8, 9}) {
		t.Fatalf("voters after the swap: %+v", q)
	}
	listed := cli(t, b, "controller", "list")
	for _, want := range []string{"leader", "observer", c.controllers[3].addr /* controller 7 */} {
		if !strings.Contains(listed, want) {
			t.Fatalf("controller list lacks %q:\n%s", want, listed)
		}
	}
	// The brokers reach the new quorum: metadata changes still go through.
	createTopic(t, c.broker(6).addr, newTopic("after-swap", 1, 3))
	time.Sleep(500 * time.Millisecond)
	want := prod.stopAndReadBack(t)
	t.Logf("%d records acknowledged during the swap, all read back", want)
}
