package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/shalelog/shale/controller/proto"
	"github.com/shalelog/shale/tests/netns"
)

// Short leases so that a fault shows within seconds; replica.lag.time.max.ms short too, so
// that a stuck follower leaves the ISR (and acks=all writes go on) within a fault's hold.
const (
	sessionTimeout    = 3 * time.Second
	heartbeatInterval = 500 * time.Millisecond
	replicaLagMax     = 5 * time.Second
	brokerPort        = 9092
	controllerPort    = 9093
)

type layout string

const (
	combined  layout = "combined"  // 3 nodes, each broker and controller
	dedicated layout = "dedicated" // 3 controllers (ids 1-3) and 3 brokers (ids 4-6)
)

// node is one `shale serve` process in its own namespace, restartable on the same
// addresses and data.
type node struct {
	t                  *testing.T
	id                 int32
	broker, controller bool
	net                *netns.Node
	dir                string
	args               []string

	cmd     *exec.Cmd
	done    chan struct{}
	starts  int
	logPath string
	probe   *kgo.Client // Metadata straight to this broker
}

func (n *node) brokerAddr() string     { return fmt.Sprintf("%s:%d", n.net.IP, brokerPort) }
func (n *node) controllerAddr() string { return fmt.Sprintf("%s:%d", n.net.IP, controllerPort) }

func (n *node) String() string {
	switch {
	case n.broker && n.controller:
		return fmt.Sprintf("node %d", n.id)
	case n.broker:
		return fmt.Sprintf("broker %d", n.id)
	default:
		return fmt.Sprintf("controller %d", n.id)
	}
}

// start runs the node with `ip netns exec`, which execs the program: the child's pid is the
// shale process itself, so signals reach it directly (start checks this).
func (n *node) start() error {
	n.starts++
	n.logPath = filepath.Join(n.dir, fmt.Sprintf("node-%d.%d.log", n.id, n.starts))
	f, err := os.Create(n.logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := n.net.Command(shaleBin, n.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// The processes must not outlive a test binary that dies before its cleanups. The
	// death signal follows the thread that forked, not the process, so every start runs
	// on one thread that stays locked for the test binary's life (netns.Spawn).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := netns.Spawn(cmd); err != nil {
		return fmt.Errorf("start %v: %w", n, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	done := n.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	want := filepath.Base(shaleBin)
	if len(want) > 15 {
		want = want[:15]
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if err == nil && strings.TrimSpace(string(comm)) == want {
			return nil
		}
		if err != nil || time.Now().After(deadline) {
			if !n.running() {
				return fmt.Errorf("%v exited at once: %s", n, n.logTail(20))
			}
			return fmt.Errorf("%v: pid %d is %q, not %s: ip netns exec did not exec", n, cmd.Process.Pid, strings.TrimSpace(string(comm)), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

func (n *node) signal(sig syscall.Signal) error {
	if !n.running() {
		return fmt.Errorf("%v is not running", n)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %v: %w", sig, n, err)
	}
	return nil
}

// kill9 kills the node and waits for it to be gone.
func (n *node) kill9() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-n.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%v still running 10s after SIGKILL", n)
	}
}

// terminate sends SIGTERM and waits up to 30 s for a clean exit; past that the node is
// killed and the error says so.
func (n *node) terminate() error {
	if err := n.signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-n.done:
		if !n.cmd.ProcessState.Success() {
			return fmt.Errorf("%v exited with %v after SIGTERM", n, n.cmd.ProcessState)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = n.kill9()
		return fmt.Errorf("%v did not stop within 30s of SIGTERM; killed", n)
	}
}

func (n *node) logTail(lines int) string {
	b, _ := os.ReadFile(n.logPath)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// cluster is one layout's processes on one network.
type cluster struct {
	t           *testing.T
	layout      layout
	net         *netns.Network
	nodes       []*node
	brokers     []*node
	controllers []*node
	// spare is a broker with a namespace and settings of its own that does not start
	// with the cluster: the reassignment fault starts it to move partitions onto.
	spare *node
}

func newCluster(t *testing.T, l layout) *cluster {
	t.Helper()
	return newClusterArgs(t, l, nil)
}

// newClusterArgs is newCluster with extra flags for every node.
func newClusterArgs(t *testing.T, l layout, extra []string) *cluster {
	t.Helper()
	return newClusterNet(t, l, func(*netns.Network) []string { return extra })
}

// newClusterNet is newClusterArgs with the extra flags made once the network exists, for
// flags that name an address on it (a server the test runs on the bridge, say).
func newClusterNet(t *testing.T, l layout, extraFor func(*netns.Network) []string) *cluster {
	t.Helper()
	count := 3
	if l == dedicated {
		count = 6
	}
	nw := netns.New(t, count+1)
	extra := extraFor(nw)
	return newClusterOn(t, l, nw, nw.Nodes[:count], nw.Nodes[count], func(*node) []string { return extra })
}

// newClusterOn builds a cluster of layout l on namespaces of an existing network, so that
// two clusters can share one (the mirror test cuts the links between them). spare, which
// may be nil, is the namespace of the spare broker; extra gives each node's extra flags.
func newClusterOn(t *testing.T, l layout, nw *netns.Network, nodes []*netns.Node, spare *netns.Node, extra func(*node) []string) *cluster {
	t.Helper()
	c := &cluster{t: t, layout: l, net: nw}
	if spare != nil {
		c.spare = &node{t: t, id: int32(len(nodes) + 1), net: spare, dir: t.TempDir(), broker: true}
	}
	for i, nn := range nodes {
		n := &node{t: t, id: int32(i + 1), net: nn, dir: t.TempDir()}
		switch {
		case l == combined:
			n.broker, n.controller = true, true
		case i < 3:
			n.controller = true
		default:
			n.broker = true
		}
		c.nodes = append(c.nodes, n)
		if n.broker {
			c.brokers = append(c.brokers, n)
		}
		if n.controller {
			c.controllers = append(c.controllers, n)
		}
	}
	var voters []string
	for _, n := range c.controllers {
		voters = append(voters, fmt.Sprintf("%d@%s", n.id, n.controllerAddr()))
	}
	all := slices.Clone(c.nodes)
	if c.spare != nil {
		all = append(all, c.spare)
	}
	for _, n := range all {
		var roles, listeners []string
		if n.broker {
			roles = append(roles, "broker")
			listeners = append(listeners, "PLAINTEXT://"+n.brokerAddr())
		}
		if n.controller {
			roles = append(roles, "controller")
			listeners = append(listeners, "CONTROLLER://"+n.controllerAddr())
		}
		n.args = []string{"serve",
			"--node.id=" + strconv.Itoa(int(n.id)),
			"--process.roles=" + strings.Join(roles, ","),
			"--listeners=" + strings.Join(listeners, ","),
			"--controller.quorum.voters=" + strings.Join(voters, ","),
			"--log.dirs=" + filepath.Join(n.dir, "data"),
			"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
			"--broker.session.timeout.ms=" + strconv.FormatInt(sessionTimeout.Milliseconds(), 10),
			"--broker.heartbeat.interval.ms=" + strconv.FormatInt(heartbeatInterval.Milliseconds(), 10),
			"--replica.lag.time.max.ms=" + strconv.FormatInt(replicaLagMax.Milliseconds(), 10),
			"--default.replication.factor=3",
			"--min.insync.replicas=2",
			"--auto.create.topics.enable=false",
			"--unclean.leader.election.enable=false",
			"--group.initial.rebalance.delay.ms=0",
		}
		n.args = append(n.args, extra(n)...)
		if n.broker {
			probe, err := kgo.NewClient(kgo.SeedBrokers(n.brokerAddr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n.probe = probe
		}
	}
	// Registered after the network's, so it runs first: processes die before their
	// namespaces go.
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.running() {
				_ = n.cmd.Process.Signal(syscall.SIGCONT)
				if err := n.kill9(); err != nil {
					t.Log(err)
				}
			}
			if n.probe != nil {
				n.probe.Close()
			}
		}
		if c.spare != nil && !slices.Contains(c.nodes, c.spare) {
			c.spare.probe.Close()
		}
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("---- %v log (start %d, %s), last lines:\n%s", n, n.starts, n.logPath, n.logTail(40))
			}
			// SHALE_CHAOS_KEEP=dir keeps every node's logs of a failed run for diagnosis.
			if keep := os.Getenv("SHALE_CHAOS_KEEP"); keep != "" {
				for _, n := range c.nodes {
					_ = exec.Command("cp", "-r", n.dir, filepath.Join(keep, fmt.Sprintf("node-%d", n.id))).Run()
				}
				t.Logf("node directories copied to %s", keep)
			}
		}
	})
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.brokers {
		if err := c.waitBrokerReady(n, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *cluster) seeds() []string {
	var s []string
	for _, b := range c.brokers {
		s = append(s, b.brokerAddr())
	}
	return s
}

func (c *cluster) byID(id int32) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// metadata asks one broker, and only it, for the whole cluster's metadata.
func (n *node) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	seeds := n.probe.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := seeds[0].Request(rctx, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from %v: %w", n, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// waitBrokerReady waits until the broker runs and its own metadata lists it as live.
func (c *cluster) waitBrokerReady(n *node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !n.running() {
			return fmt.Errorf("%v exited; log:\n%s", n, n.logTail(40))
		}
		if resp, err := n.metadata(context.Background()); err == nil {
			for _, b := range resp.Brokers {
				if b.NodeID == n.id {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v not ready after %v", n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// partState is one partition as a broker's metadata shows it.
type partState struct {
	leader        int32
	replicas, isr []int32
	err           int16
}

func topicState(resp *kmsg.MetadataResponse, topic string) []partState {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic || t.ErrorCode != 0 {
			continue
		}
		out := make([]partState, len(t.Partitions))
		for _, p := range t.Partitions {
			if int(p.Partition) < len(out) {
				out[p.Partition] = partState{leader: p.Leader, replicas: p.Replicas, isr: p.ISR, err: p.ErrorCode}
			}
		}
		return out
	}
	return nil
}

// topicNow is the topic as the first broker that answers sees it.
func (c *cluster) topicNow(topic string) ([]partState, error) {
	var errs []error
	for _, b := range c.brokers {
		if !b.running() {
			continue
		}
		resp, err := b.metadata(context.Background())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ps := topicState(resp, topic); len(ps) > 0 {
			return ps, nil
		}
		errs = append(errs, fmt.Errorf("%v does not know topic %s", b, topic))
	}
	return nil, fmt.Errorf("no broker describes %s: %w", topic, errors.Join(errs...))
}

// leaderOf waits (bounded) for partition p to have a live leader.
func (c *cluster) leaderOf(topic string, p int32, timeout time.Duration) (*node, error) {
	deadline := time.Now().Add(timeout)
	for {
		ps, err := c.topicNow(topic)
		if err == nil && int(p) < len(ps) && ps[p].leader >= 0 {
			if n := c.byID(ps[p].leader); n != nil && n.running() {
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("partition %d has no live leader after %v (last error %v)", p, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// healed reports whether every broker runs, and each one's metadata shows all brokers live
// and every partition of topic with a leader and its full replica set in the ISR; if not,
// why not.
func (c *cluster) healed(topic string) (bool, string) {
	for _, b := range c.brokers {
		if !b.running() {
			return false, fmt.Sprintf("%v is not running", b)
		}
		resp, err := b.metadata(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Brokers) != len(c.brokers) {
			return false, fmt.Sprintf("%v sees %d live brokers", b, len(resp.Brokers))
		}
		ps := topicState(resp, topic)
		if len(ps) == 0 {
			return false, fmt.Sprintf("%v does not know %s", b, topic)
		}
		for i, p := range ps {
			if p.leader < 0 || p.err != 0 || len(p.isr) != len(p.replicas) || len(p.replicas) == 0 {
				return false, fmt.Sprintf("%v: p%d leader %d replicas %v isr %v error %d", b, i, p.leader, p.replicas, p.isr, p.err)
			}
		}
	}
	return true, ""
}

// waitHealed waits up to timeout for healed; it returns how long that took, whether it
// happened, and if not, the last reason.
func (c *cluster) waitHealed(topic string, timeout time.Duration) (time.Duration, bool, string) {
	start := time.Now()
	for {
		ok, why := c.healed(topic)
		if ok {
			return time.Since(start), true, ""
		}
		if time.Since(start) > timeout {
			return time.Since(start), false, why
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// activeController finds the controller that serves the quorum's requests: Shale's
// Metadata and DescribeCluster name the answering broker as the controller (as KRaft
// brokers do), so the harness asks the controllers themselves; a follower answers
// UNAVAILABLE.
func (c *cluster) activeController(timeout time.Duration) (*node, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, n := range c.controllers {
			if !n.running() {
				continue
			}
			if controllerAnswers(n.controllerAddr()) {
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no active controller after %v", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func controllerAnswers(addr string) bool {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = pb.NewControllerClient(cc).ListOffsetGroups(ctx, &pb.ListOffsetGroupsRequest{})
	return err == nil
}

// otherNodes is every node but n.
func (c *cluster) otherNodes(n *node) []*node {
	return slices.DeleteFunc(slices.Clone(c.nodes), func(o *node) bool { return o == n })
}

// isolate cuts n from each of peers, and from the test client when client is set.
func (c *cluster) isolate(n *node, peers []*node, client bool) error {
	for _, p := range peers {
		if err := c.net.Cut(n.net, p.net); err != nil {
			return err
		}
	}
	if client {
		return c.net.Cut(n.net, nil)
	}
	return nil
}
