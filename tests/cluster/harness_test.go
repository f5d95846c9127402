package cluster

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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/shalelog/shale/controller/proto"
	"github.com/shalelog/shale/internal/testutil"
)

// Short leases so that failures show within seconds.
const (
	sessionTimeout    = 2 * time.Second
	heartbeatInterval = 250 * time.Millisecond
)

// proc is one `shale serve` process, restartable on the same ports and data.
type proc struct {
	t       *testing.T
	id      int32
	addr    string // CONTROLLER listener of a controller, PLAINTEXT of a broker
	args    []string
	dir     string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	starts  int
}

func (p *proc) start() {
	p.t.Helper()
	p.starts++
	p.cmd = exec.Command(shaleBin, p.args...)
	p.logPath = filepath.Join(p.dir, fmt.Sprintf("node-%d.%d.log", p.id, p.starts))
	f, err := os.Create(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	f.Close()
	p.done = make(chan struct{})
	cmd, done := p.cmd, p.done
	go func() {
		cmd.Wait()
		close(done)
	}()
}

func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to node %d: %v", sig, p.id, err)
	}
}

func (p *proc) kill9() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	<-p.done
}

// terminate stops the process with SIGTERM and waits for a clean exit.
func (p *proc) terminate() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if !p.cmd.ProcessState.Success() {
			p.t.Fatalf("node %d exited with %v after SIGTERM; log:\n%s", p.id, p.cmd.ProcessState, p.log())
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		p.t.Fatalf("node %d did not stop on SIGTERM; log:\n%s", p.id, p.log())
	}
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// cluster is three controllers (ids 1-3) and three brokers (ids 4-6).
type cluster struct {
	t           *testing.T
	controllers []*proc
	brokers     []*proc
	voters      string
}

// newCluster starts the cluster; extra are further settings for every node.
func newCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	return newClusterWith(t, nil, extra...)
}

// newClusterWith is newCluster with brokerExtra settings for each broker (after the
// common ones: the last of a repeated setting wins), such as a listener of its own.
func newClusterWith(t *testing.T, brokerExtra func(id int32) []string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t}
	var voters []string
	for id := int32(1); id <= 3; id++ {
		p := &proc{t: t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), dir: t.TempDir()}
		c.controllers = append(c.controllers, p)
		voters = append(voters, fmt.Sprintf("%d@%s", id, p.addr))
	}
	c.voters = strings.Join(voters, ",")
	common := []string{
		"--controller.quorum.voters=" + c.voters,
		"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
		"--broker.session.timeout.ms=" + strconv.Itoa(int(sessionTimeout.Milliseconds())),
		"--broker.heartbeat.interval.ms=" + strconv.Itoa(int(heartbeatInterval.Milliseconds())),
		"--default.replication.factor=3",
		"--num.partitions=3",
		"--auto.create.topics.enable=false",
	}
	common = append(common, extra...)
	for _, p := range c.controllers {
		p.args = append([]string{"serve", "--node.id=" + strconv.Itoa(int(p.id)), "--process.roles=controller",
			"--listeners=CONTROLLER://" + p.addr, "--log.dirs=" + filepath.Join(p.dir, "data")}, common...)
	}
	for id := int32(4); id <= 6; id++ {
		p := &proc{t: t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), dir: t.TempDir()}
		p.args = append([]string{"serve", "--node.id=" + strconv.Itoa(int(id)), "--process.roles=broker",
			"--listeners=PLAINTEXT://" + p.addr, "--log.dirs=" + filepath.Join(p.dir, "data")}, common...)
		if brokerExtra != nil {
			p.args = append(p.args, brokerExtra(id)...)
		}
		c.brokers = append(c.brokers, p)
	}
	t.Cleanup(func() {
		for _, p := range append(slices.Clone(c.brokers), c.controllers...) {
			if p.running() {
				p.cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			for _, p := range append(slices.Clone(c.controllers), c.brokers...) {
				t.Logf("---- node %d log (last start):\n%s", p.id, tail(p.log(), 60))
			}
		}
	})
	for _, p := range c.controllers {
		p.start()
	}
	for _, p := range c.brokers {
		p.start()
	}
	for _, p := range c.brokers {
		c.waitBrokerReady(p)
	}
	return c
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func (c *cluster) broker(id int32) *proc { return c.brokers[id-4] }

// kafkaClient is a client that knows only the given brokers.
func (c *cluster) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, b := range c.brokers {
		seeds = append(seeds, b.addr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// metadataFrom asks one broker for the whole cluster's metadata.
func metadataFrom(ctx context.Context, addr string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Straight to the seed: the broker answers from its own cache.
	return req.RequestWith(rctx, cl)
}

func (c *cluster) waitBrokerReady(p *proc) {
	c.t.Helper()
	testutil.Eventually(c.t, 60*time.Second, fmt.Sprintf("broker %d ready", p.id), func() bool {
		if !p.running() {
			c.t.Fatalf("broker %d exited; log:\n%s", p.id, p.log())
		}
		resp, err := metadataFrom(context.Background(), p.addr)
		if err != nil {
			return false
		}
		for _, b := range resp.Brokers {
			if b.NodeID == p.id {
				return true
			}
		}
		return false
	})
}

// partitionState is one partition as a broker's metadata shows it.
type partitionState struct {
	leader, epoch int32
	replicas, isr []int32
	err           int16
}

func topicState(resp *kmsg.MetadataResponse, topic string) ([]partitionState, bool) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic || t.ErrorCode != 0 {
			continue
		}
		out := make([]partitionState, len(t.Partitions))
		for _, p := range t.Partitions {
			if int(p.Partition) < len(out) {
				out[p.Partition] = partitionState{leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.ISR, err: p.ErrorCode}
			}
		}
		return out, true
	}
	return nil, false
}

// controllerClient dials one controller's gRPC service (the CONTROLLER port it shares
// with Raft).
func controllerClient(t *testing.T, addr string) pb.ControllerClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewControllerClient(cc)
}

// activeController returns the index of the controller that serves the quorum's
// requests, waiting for one.
func (c *cluster) activeController(timeout time.Duration) int {
	c.t.Helper()
	idx := -1
	testutil.Eventually(c.t, timeout, "an active controller", func() bool {
		for i, p := range c.controllers {
			if !p.running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			_, err := controllerClient(c.t, p.addr).ListOffsetGroups(ctx, &pb.ListOffsetGroupsRequest{})
			cancel()
			if err == nil {
				idx = i
				return true
			}
			if status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
				c.t.Fatalf("controller %d: %v", p.id, err)
			}
		}
		return false
	})
	return idx
}

// callActive runs fn against the active controller, retrying through elections.
func (c *cluster) callActive(what string, fn func(context.Context, pb.ControllerClient) error) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		i := c.activeController(30 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fn(ctx, controllerClient(c.t, c.controllers[i].addr))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTopic creates a topic through one broker, retrying retriable errors (a broker
// forwarding to a controller that is being replaced answers with one).
func createTopic(t *testing.T, brokerAddr string, req *kmsg.CreateTopicsRequest) time.Duration {
	t.Helper()
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req.TimeoutMillis = 10000
	deadline := time.Now().Add(60 * time.Second)
	// An attempt that timed out, lost its answer or was refused as retriable may still
	// have created its topics (or some of them): the controller commits a creation the
	// broker stopped waiting for. The topics are new to the test, so on a later attempt
	// TOPIC_ALREADY_EXISTS for such a topic means that attempt created it.
	mayExist := map[string]bool{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err != nil {
			for _, rt := range req.Topics {
				mayExist[rt.Topic] = true
			}
		} else {
			var failed error
			for _, r := range resp.Topics {
				e := kerrCode(r.ErrorCode)
				if e == nil || (mayExist[r.Topic] && errors.Is(e, kerr.TopicAlreadyExists)) {
					mayExist[r.Topic] = true
					continue
				}
				if kerr.IsRetriable(e) {
					mayExist[r.Topic] = true
				}
				failed = fmt.Errorf("topic %s: %w", r.Topic, e)
			}
			if failed == nil {
				return time.Since(start)
			}
			err = failed
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topics through %s: %v", brokerAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newTopic(name string, partitions int32, rf int16) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	return req
}
