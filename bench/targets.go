package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shalelog/shale/bench/nullbroker"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// target is a cluster compare can start fresh for each workload. Compare
// runs its workloads against a list of targets.
type target interface {
	name() string
	describe() string
	// brokers is how many brokers the target has, 0 when unknown (an
	// external cluster): presets for one broker run on single-broker
	// targets, replicated presets on clusters (see runsOn).
	brokers() int
	start(ctx context.Context) (*runningTarget, error)
}

// runningTarget is a started cluster.
type runningTarget struct {
	bootstrap []string
	// died is closed if the cluster exits on its own; nil if it cannot.
	died <-chan struct{}
	stop func() error
	// pid and dataDir are a subprocess's, for diagnostics; zero otherwise.
	pid     int
	dataDir string
}

// readyWait bounds how long a started cluster may take to answer
// ApiVersions.
const readyWait = 30 * time.Second

// stopWait is how long a subprocess gets to exit after SIGTERM before it
// is killed.
const stopWait = 15 * time.Second

// inprocKfake is franz-go's kfake in this process. It shares this
// process's CPU scheduler and garbage collector with the load generator;
// processTarget running `bench kfake-serve` avoids that.
type inprocKfake struct{}

func (inprocKfake) name() string { return "kfake" }
func (inprocKfake) brokers() int { return 1 }
func (inprocKfake) describe() string {
	return "franz-go pkg/kfake (in-memory), 1 broker, in this process"
}

func (inprocKfake) start(ctx context.Context) (*runningTarget, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	addrs := c.ListenAddrs()
	if err := waitReady(ctx, addrs[0], nil); err != nil {
		c.Close()
		return nil, err
	}
	return &runningTarget{bootstrap: addrs, stop: func() error { c.Close(); return nil }}, nil
}

// baselineTargetName is the target of --baseline-binary: a second Shale node, from
// another build, measured in the same run as shale.
const baselineTargetName = "baseline"

// nullTargetName is the null broker's target name.
const nullTargetName = "null"

// inprocNull is the null broker (package nullbroker) in this process; like
// inprocKfake it shares the load generator's runtime, which
// nullProcessTarget avoids.
type inprocNull struct{ retain int64 }

func (inprocNull) name() string { return nullTargetName }
func (inprocNull) brokers() int { return 1 }
func (t inprocNull) describe() string {
	return fmt.Sprintf("null broker (acknowledges, keeps the last %s in memory for Fetch), 1 broker, in this process", formatBytes(t.retain))
}

func (t inprocNull) start(ctx context.Context) (*runningTarget, error) {
	b, err := nullbroker.Start(nullbroker.Config{Addr: "127.0.0.1:0", RetainBytes: t.retain})
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, b.Addr(), nil); err != nil {
		b.Close()
		return nil, err
	}
	return &runningTarget{bootstrap: []string{b.Addr()}, stop: func() error { b.Close(); return nil }}, nil
}

// nullProcessTarget runs the null broker in a child process through the
// hidden `null-serve` command; prefix is as for kfakeProcessTarget.
func nullProcessTarget(binary string, prefix, env []string, retain int64) *processTarget {
	return &processTarget{
		label: nullTargetName,
		about: fmt.Sprintf("null broker (acknowledges, keeps the last %s in memory for Fetch), 1 broker, own process", formatBytes(retain)),
		path:  binary,
		env:   env,
		ports: 1,
		args: func(ports []int, _ string) []string {
			return append(append([]string(nil), prefix...), "null-serve",
				"--listen=127.0.0.1:"+strconv.Itoa(ports[0]), "--retain-bytes="+strconv.FormatInt(retain, 10))
		},
	}
}

// processTarget is a cluster run as a subprocess on a fresh port and data
// directory for every workload.
type processTarget struct {
	label string
	about string
	path  string
	// args builds the command line from free ports (the first serves
	// Kafka) and the data directory.
	ports int
	args  func(ports []int, dataDir string) []string
	env   []string
}

func (t *processTarget) name() string     { return t.label }
func (t *processTarget) describe() string { return t.about }
func (t *processTarget) brokers() int     { return 1 }

// shaleTarget is a single Shale node: `shale serve` with a temporary data
// directory.
func shaleTarget(binary string, extra []string) *processTarget {
	return &processTarget{
		label: "shale",
		about: fmt.Sprintf("Shale single node (%s serve)", binary),
		path:  binary,
		ports: 3,
		// The node is broker and controller in one; its controller needs
		// a listener of its own.
		args: func(ports []int, dir string) []string {
			a := []string{
				"serve",
				"--log.dirs=" + dir,
				"--listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(ports[0]) + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(ports[2]),
				"--http.listener=127.0.0.1:" + strconv.Itoa(ports[1]),
			}
			return append(a, extra...)
		},
	}
}

// kfakeProcessTarget runs kfake in a child process through the hidden
// `kfake-serve` command, so it does not share a runtime with the load
// generator. prefix is what precedes `kfake-serve` on the command line
// ("bench" for the shale binary).
func kfakeProcessTarget(binary string, prefix []string, env []string) *processTarget {
	return &processTarget{
		label: "kfake",
		about: "franz-go pkg/kfake (in-memory), 1 broker, own process",
		path:  binary,
		env:   env,
		ports: 1,
		args: func(ports []int, _ string) []string {
			return append(append([]string(nil), prefix...), "kfake-serve", "--listen=127.0.0.1:"+strconv.Itoa(ports[0]))
		},
	}
}

func (t *processTarget) start(ctx context.Context) (*runningTarget, error) {
	ports, err := freePorts(max(t.ports, 1))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shale-bench-"+t.label+"-")
	if err != nil {
		return nil, fmt.Errorf("%s data dir: %w", t.label, err)
	}
	args := t.args(ports, dir)
	p, err := startProcess(t.label, t.path, args, t.env)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop := func() error {
		err := p.stop()
		os.RemoveAll(dir)
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	if err := waitReady(ctx, addr, p.died); err != nil {
		_ = stop()
		return nil, fmt.Errorf("%s (%s %s): %w; output:\n%s", t.label, t.path, strings.Join(args, " "), err, p.logs.String())
	}
	return &runningTarget{bootstrap: []string{addr}, died: p.died, stop: stop, pid: p.cmd.Process.Pid, dataDir: dir}, nil
}

// process is one started child: a cluster node or a kfake.
type process struct {
	label string
	cmd   *exec.Cmd
	logs  *tailBuffer
	// died is closed once the process has exited, for whatever reason.
	died    chan struct{}
	waitErr error
	once    sync.Once
	stopErr error
}

// startProcess starts path with args, its output kept in a tail buffer.
func startProcess(label, path string, args, env []string) (*process, error) {
	// Not CommandContext: the process must get SIGTERM and time to exit,
	// never an immediate kill because some context ended.
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &process{label: label, cmd: cmd, logs: &tailBuffer{max: 8 << 10}, died: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", label, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.died)
	}()
	return p, nil
}

// stop sends SIGTERM and waits stopWait for the process to exit, then
// kills it. It says so if the process had died before, exited badly or had
// to be killed. Only the first call does anything.
func (p *process) stop() error {
	p.once.Do(func() {
		select {
		case <-p.died:
			p.stopErr = fmt.Errorf("%s had already exited: %v; output:\n%s", p.label, p.waitErr, p.logs.String())
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(stopWait)
		defer timer.Stop()
		select {
		case <-p.died:
			var ee *exec.ExitError
			if p.waitErr != nil && !(errors.As(p.waitErr, &ee) && ee.ExitCode() == 0) && !isSignalExit(p.waitErr, syscall.SIGTERM) {
				p.stopErr = fmt.Errorf("%s exited badly on SIGTERM: %v; output:\n%s", p.label, p.waitErr, p.logs.String())
			}
		case <-timer.C:
			_ = p.cmd.Process.Kill()
			<-p.died
			p.stopErr = fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.label, stopWait)
		}
	})
	return p.stopErr
}

func isSignalExit(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// externalTarget is a cluster someone else runs; compare only checks that
// it answers.
type externalTarget struct {
	label     string
	bootstrap []string
}

func (t *externalTarget) name() string { return t.label }
func (t *externalTarget) brokers() int { return 0 }
func (t *externalTarget) describe() string {
	return "external cluster at " + strings.Join(t.bootstrap, ",")
}

func (t *externalTarget) start(ctx context.Context) (*runningTarget, error) {
	if err := waitReady(ctx, t.bootstrap[0], nil); err != nil {
		return nil, fmt.Errorf("%s: %w", t.label, err)
	}
	return &runningTarget{bootstrap: t.bootstrap, stop: func() error { return nil }}, nil
}

// waitReady waits until addr answers an ApiVersions request, giving up
// after readyWait or when died closes.
func waitReady(ctx context.Context, addr string, died <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	var last error
	for {
		if died != nil {
			select {
			case <-died:
				return errors.New("exited before answering ApiVersions")
			default:
			}
		}
		if last = apiVersions(ctx, addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no ApiVersions answer from %s within %v: %w", addr, readyWait, last)
		case <-died:
			return errors.New("exited before answering ApiVersions")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func apiVersions(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("shale-bench-ready"),
		kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(rctx, cl)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions error code %d", resp.ErrorCode)
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback ports. Another
// process could take one before the child binds it; the child then fails to
// start and says so.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes a process wrote.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.TrimSpace(b.buf))
}

// serveKfake runs a single kfake broker on listen until ctx ends: the
// hidden `bench kfake-serve` command behind kfakeProcessTarget.
func serveKfake(ctx context.Context, listen string) error {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("--listen %q: bad port", listen)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, portStr))
		}))
	if err != nil {
		return fmt.Errorf("kfake: %w", err)
	}
	<-ctx.Done()
	c.Close()
	return nil
}
