package protocol_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
)

// shaleNode is one `shale serve` process of a three-node cluster (each node a broker and
// a controller voter).
type shaleNode struct {
	id   int32
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func (n *shaleNode) kill() {
	// done, not cmd.ProcessState: the Wait goroutine writes that field.
	select {
	case <-n.done:
	default:
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
	}
}

// startShaleCluster builds cmd/shale and starts three nodes on loopback, with extra
// flags for every node.
func startShaleCluster(t *testing.T, extra ...string) []*shaleNode {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", bin, "github.com/shalelog/shale/cmd/shale")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build shale: %v\n%s", err, out)
	}
	// The processes bind these ports a while after they are chosen: testutil.FreePort
	// keeps them out of the kernel's ephemeral range and away from other test binaries.
	var ports []int
	for range 9 {
		ports = append(ports, testutil.FreePort(t))
	}
	var voters []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[3+i]))
	}
	var nodes []*shaleNode
	for i := 0; i < 3; i++ {
		n := &shaleNode{id: int32(i + 1), addr: fmt.Sprintf("127.0.0.1:%d", ports[i]), done: make(chan struct{}), log: filepath.Join(dir, fmt.Sprintf("node%d.log", i+1))}
		logf, err := os.Create(n.log)
		if err != nil {
			t.Fatal(err)
		}
		n.cmd = exec.Command(bin, "serve",
			fmt.Sprintf("--node.id=%d", n.id),
			"--log.dirs="+filepath.Join(dir, fmt.Sprintf("data%d", n.id)),
			fmt.Sprintf("--listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d", n.addr, ports[3+i]),
			"--advertised.listeners=PLAINTEXT://"+n.addr,
			"--schema.registry.listener=", "--rest.proxy.listener=", fmt.Sprintf("--http.listener=127.0.0.1:%d", ports[6+i]),
			"--controller.quorum.voters="+strings.Join(voters, ","),
			"--group.initial.rebalance.delay.ms=0",
			"--group.min.session.timeout.ms=500",
			"--broker.session.timeout.ms=3000",
			"--broker.heartbeat.interval.ms=500",
		)
		n.cmd.Args = append(n.cmd.Args, extra...)
		n.cmd.Stdout, n.cmd.Stderr = logf, logf
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { n.cmd.Wait(); logf.Close(); close(n.done) }()
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill()
		}
		if t.Failed() {
			for _, n := range nodes {
				b, _ := os.ReadFile(n.log)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				var keep []string
				for _, l := range lines {
					if strings.Contains(l, "fence") || strings.Contains(l, "group") || strings.Contains(l, "WARN") || strings.Contains(l, "leader") {
						keep = append(keep, l)
					}
				}
				t.Logf("node %d log:\n%s", n.id, strings.Join(keep[max(0, len(keep)-40):], "\n"))
			}
		}
	})
	return nodes
}

// TestConsumerGroupCoordinatorFailover: a franz-go group consumes a topic whose
// partitions live on two brokers of a three-node cluster; the third broker coordinates
// the group and is killed with SIGKILL. Another broker takes the group over, the members
// rejoin it, and consumption continues from the offsets committed through the controller
// quorum: nothing consumed before is consumed again and nothing is missed.
func TestConsumerGroupCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a three-node cluster")
	}
	nodes := startShaleCluster(t)
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.addr)
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for {
		bs, err := adm.ListBrokers(ctx)
		if err == nil && len(bs) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster never listed 3 brokers: %v %v", bs, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	const groupID = "failover"
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = groupID
	resp, err := req.RequestWith(ctx, admCl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %+v", err, resp)
	}
	coord := resp.NodeID
	var others []int32
	var liveSeeds []string
	for _, n := range nodes {
		if n.id != coord {
			others = append(others, n.id)
			liveSeeds = append(liveSeeds, n.addr)
		}
	}
	// Partitions only on the brokers that survive (Shale has no follower replication
	// yet, so a partition on the killed broker would be offline).
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fo", -1, -1
	for p := int32(0); p < groupTestPartitions; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{others[p%2]}
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	creq.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	creq.TimeoutMillis = 10000
	if cresp, err := creq.RequestWith(ctx, admCl); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, cresp)
	}

	liveCl := mustClient(t, kgo.SeedBrokers(liveSeeds...))
	s := &groupScenario{t: t, topic: "fo", group: groupID, seen: newSeen(), seeds: liveSeeds}
	s.prod = mustClient(t, kgo.SeedBrokers(liveSeeds...), kgo.DefaultProduceTopic("fo"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("m%d", i)
		opts := append(kgoGroupOpts(seeds[0], groupID, "fo", kgo.CooperativeStickyBalancer()), kgo.SeedBrokers(seeds...))
		cl := mustClient(t, opts...)
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			consumeKgo(cctx, cl, func(v string) { s.seen.add(id, v) })
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	s.waitStable(3)
	s.produce(600, 0)
	snap := s.settle(nil)

	for _, n := range nodes {
		if n.id == coord {
			n.kill()
		}
	}
	s.produce(600, 2*time.Second)
	s.waitStable(3)
	s.settle(snap)

	req = kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = groupID
	if resp, err := req.RequestWith(ctx, liveCl); err != nil || resp.ErrorCode != 0 || resp.NodeID == coord {
		t.Fatalf("coordinator after the kill: %v %+v (was %d)", err, resp, coord)
	}
}

func mustClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
