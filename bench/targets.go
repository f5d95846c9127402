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

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// target is a cluster compare can start fresh for each workload. Compare
// runs its workloads against a list of targets; a 3-broker Shale cluster
// joins the list as one more processTarget once clustering exists.
type target interface {
	name() string
	describe() string
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
	// Not CommandContext: the process must get SIGTERM and time to exit,
	// never an immediate kill because some context ended.
	cmd := exec.Command(t.path, args...)
	cmd.Env = append(os.Environ(), t.env...)
	logs := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", t.label, err)
	}
	died := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(died)
	}()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			select {
			case <-died:
				stopErr = fmt.Errorf("%s had already exited: %v; output:\n%s", t.label, waitErr, logs.String())
			default:
				_ = cmd.Process.Signal(syscall.SIGTERM)
				timer := time.NewTimer(stopWait)
				select {
				case <-died:
					var ee *exec.ExitError
					if waitErr != nil && !(errors.As(waitErr, &ee) && ee.ExitCode() == 0) && !isSignalExit(waitErr, syscall.SIGTERM) {
						stopErr = fmt.Errorf("%s exited badly on SIGTERM: %v; output:\n%s", t.label, waitErr, logs.String())
					}
				case <-timer.C:
					_ = cmd.Process.Kill()
					<-died
					stopErr = fmt.Errorf("%s did not exit within %v of SIGTERM; killed", t.label, stopWait)
				}
				timer.Stop()
			}
			os.RemoveAll(dir)
		})
		return stopErr
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	if err := waitReady(ctx, addr, died); err != nil {
		_ = stop()
		return nil, fmt.Errorf("%s (%s %s): %w; output:\n%s", t.label, t.path, strings.Join(args, " "), err, logs.String())
	}
	return &runningTarget{bootstrap: []string{addr}, died: died, stop: stop, pid: cmd.Process.Pid, dataDir: dir}, nil
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
