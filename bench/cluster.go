package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterTargetName is the replicated target's name in --targets.
const clusterTargetName = "shale-cluster"

// clusterNodes is the size of the cluster compare starts: the smallest that
// takes RF=3 with min.insync.replicas=2.
const clusterNodes = 3

// clusterTarget is a Shale cluster on loopback: n `shale serve` processes,
// each a broker and a controller voter (combined roles, as in README.md "A
// 3-node cluster on one machine"), with data directories of their own under
// one temporary directory. Like every target it is started afresh for each
// workload.
type clusterTarget struct {
	label string
	path  string
	nodes int
	extra []string
	env   []string
}

func shaleClusterTarget(binary string, extra []string) *clusterTarget {
	return &clusterTarget{label: clusterTargetName, path: binary, nodes: clusterNodes, extra: extra}
}

func (t *clusterTarget) name() string { return t.label }
func (t *clusterTarget) brokers() int { return t.nodes }
func (t *clusterTarget) describe() string {
	return fmt.Sprintf("Shale %d-node cluster, combined broker and controller roles (%s serve x%d)", t.nodes, t.path, t.nodes)
}

// nodeArgs is node i's (0-based) command line; ports holds three per node:
// Kafka, controller, HTTP.
func (t *clusterTarget) nodeArgs(i int, ports []int, root string) []string {
	var voters []string
	for j := range t.nodes {
		voters = append(voters, strconv.Itoa(j+1)+"@127.0.0.1:"+strconv.Itoa(ports[3*j+1]))
	}
	a := []string{
		"serve",
		"--node.id=" + strconv.Itoa(i+1),
		"--log.dirs=" + filepath.Join(root, "n"+strconv.Itoa(i+1)),
		"--controller.quorum.voters=" + strings.Join(voters, ","),
		"--listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(ports[3*i]) + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(ports[3*i+1]),
		"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=127.0.0.1:" + strconv.Itoa(ports[3*i+2]),
	}
	return append(a, t.extra...)
}

func (t *clusterTarget) start(ctx context.Context) (*runningTarget, error) {
	ports, err := freePorts(3 * t.nodes)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "shale-bench-"+t.label+"-")
	if err != nil {
		return nil, fmt.Errorf("%s data dir: %w", t.label, err)
	}
	var procs []*process
	stop := func() error {
		// Concurrently: a node stopping alone may wait on a quorum that its
		// peers, stopping one after the other, no longer make up.
		errs := make([]error, len(procs))
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = p.stop()
			}()
		}
		wg.Wait()
		os.RemoveAll(root)
		return errors.Join(errs...)
	}
	var addrs []string
	for i := range t.nodes {
		if err := os.MkdirAll(filepath.Join(root, "n"+strconv.Itoa(i+1)), 0o755); err != nil {
			_ = stop()
			return nil, fmt.Errorf("%s data dir: %w", t.label, err)
		}
		p, err := startProcess(fmt.Sprintf("%s node %d", t.label, i+1), t.path, t.nodeArgs(i, ports, root), t.env)
		if err != nil {
			_ = stop()
			return nil, err
		}
		procs = append(procs, p)
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(ports[3*i]))
	}
	died := make(chan struct{})
	var dieOnce sync.Once
	for _, p := range procs {
		// Each returns when its process exits, at the latest in stop.
		go func() {
			<-p.died
			dieOnce.Do(func() { close(died) })
		}()
	}
	fail := func(err error) (*runningTarget, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %v", t.label, err)
		for i, p := range procs {
			fmt.Fprintf(&b, "\nnode %d (%s %s) output:\n%s", i+1, t.path, strings.Join(t.nodeArgs(i, ports, root), " "), firstLines(p.logs.String(), 20))
		}
		_ = stop()
		return nil, errors.New(b.String())
	}
	for _, a := range addrs {
		if err := waitReady(ctx, a, died); err != nil {
			return fail(err)
		}
	}
	if err := waitBrokers(ctx, addrs, t.nodes, died); err != nil {
		return fail(err)
	}
	return &runningTarget{bootstrap: addrs, died: died, stop: stop, pid: procs[0].cmd.Process.Pid, dataDir: root}, nil
}

// waitBrokers waits until every address answers Metadata listing n
// brokers: until then a topic with n replicas cannot be created, and a
// client seeded with a broker that lags would see a smaller cluster.
func waitBrokers(ctx context.Context, addrs []string, n int, died <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	for _, a := range addrs {
		var last error
		for {
			got, err := metadataBrokers(ctx, a)
			if err == nil && got >= n {
				break
			}
			last = err
			if err == nil {
				last = fmt.Errorf("Metadata lists %d of %d brokers", got, n)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: cluster not formed within %v: %w", a, readyWait, last)
			case <-died:
				return errors.New("a node exited before the cluster formed")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// metadataBrokers asks addr itself (not whichever broker a client picks)
// how many brokers the cluster has.
func metadataBrokers(ctx context.Context, addr string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("shale-bench-ready"),
		kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return 0, errors.New("no seed broker")
	}
	resp, err := seeds[0].Request(rctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return 0, err
	}
	return len(resp.(*kmsg.MetadataResponse).Brokers), nil
}
