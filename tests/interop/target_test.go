package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shalelog/shale/internal/testutil"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startTarget brings up (or finds) the broker the suite runs against; stop releases it.
func startTarget(ctx context.Context) (*suiteTarget, func(), error) {
	if bootstrap := os.Getenv(envBootstrap); bootstrap != "" {
		seeds := strings.Split(bootstrap, ",")
		if err := waitForBroker(ctx, seeds); err != nil {
			return nil, nil, fmt.Errorf("%s=%s: %w", envBootstrap, bootstrap, err)
		}
		return &suiteTarget{name: "external " + bootstrap, bootstrap: bootstrap, seeds: seeds, registryURL: os.Getenv(envRegistryURL)}, func() {}, nil
	}
	switch t := os.Getenv(envTarget); t {
	case "kfake":
		return startKfake()
	case "", "shale":
		return startShale(ctx)
	default:
		return nil, nil, fmt.Errorf("%s=%q: want kfake or shale", envTarget, t)
	}
}

func startKfake() (*suiteTarget, func(), error) {
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitionCount),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, "127.0.0.1:0")
		}),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("kfake: %w", err)
	}
	seeds := cluster.ListenAddrs()
	return &suiteTarget{name: "kfake", bootstrap: strings.Join(seeds, ","), seeds: seeds}, cluster.Close, nil
}

// shaleServeArgs is the one place that knows `shale serve`'s command line: a single node
// that is both broker and controller (the default process.roles), voting alone on its
// controller listener, with Kafka's own flag names, and its schema registry on
// registryPort.
func shaleServeArgs(dataDir string, kafkaPort, httpPort, controllerPort, registryPort int) []string {
	args := []string{
		"serve",
		"--node.id=1",
		"--log.dirs=" + dataDir,
		fmt.Sprintf("--listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", kafkaPort, controllerPort),
		fmt.Sprintf("--advertised.listeners=PLAINTEXT://127.0.0.1:%d", kafkaPort),
		fmt.Sprintf("--schema.registry.listener=127.0.0.1:%d", registryPort), "--rest.proxy.listener=",
		fmt.Sprintf("--http.listener=127.0.0.1:%d", httpPort),
		fmt.Sprintf("--num.partitions=%d", partitionCount),
		// Kafka's own test set-ups do the same: no 3 s wait before each new group's
		// first rebalance, which the suite would otherwise pay in every consumer cell.
		"--group.initial.rebalance.delay.ms=0",
	}
	return append(args, strings.Fields(os.Getenv(envServeArgs))...)
}

// shaleBinary finds the binary to start: $SHALE_BIN, then the repository's bin/shale,
// else a fresh build of ./cmd/shale into dir.
func shaleBinary(ctx context.Context, dir string) (string, error) {
	if bin := os.Getenv(envShaleBin); bin != "" {
		return bin, nil
	}
	if bin, err := filepath.Abs("../../bin/shale"); err == nil {
		if st, err := os.Stat(bin); err == nil && !st.IsDir() {
			return bin, nil
		}
	}
	bin := filepath.Join(dir, "shale")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/shalelog/shale/cmd/shale")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("no bin/shale and `go build ./cmd/shale` failed (set %s=kfake to test the suite against kfake): %w\n%s",
			envTarget, err, out)
	}
	return bin, nil
}

func startShale(ctx context.Context) (*suiteTarget, func(), error) {
	dir, err := os.MkdirTemp("", "shale-interop-")
	if err != nil {
		return nil, nil, err
	}
	bin, err := shaleBinary(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	dataDir := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "shale.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	args := shaleServeArgs(dataDir, ports[0], ports[1], ports[2], ports[3])
	cmd := exec.Command(bin, args...)
	cmd.Env = brokerEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var stopOnce sync.Once
	keepDir := false
	stop := func() {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			logFile.Close()
			if keepDir {
				fmt.Fprintf(os.Stderr, "interop: kept shale's data and log in %s\n", dir)
			} else {
				os.RemoveAll(dir)
			}
		})
	}
	tail := func() string {
		keepDir = true
		return fileTail(logPath, 60)
	}
	bootstrap := fmt.Sprintf("127.0.0.1:%d", ports[0])
	seeds := []string{bootstrap}

	waitCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-exited:
			cancel()
		case <-waitCtx.Done():
		}
	}()
	err = waitForBroker(waitCtx, seeds)
	cancel()
	if err != nil {
		select {
		case <-exited:
			err = fmt.Errorf("shale exited during start-up: %s", cmd.ProcessState)
		default:
		}
		logs := tail()
		stop()
		return nil, nil, fmt.Errorf("%s %s: %w\nlog:\n%s", bin, strings.Join(args, " "), err, logs)
	}
	return &suiteTarget{
		name:        "shale " + bin,
		bootstrap:   bootstrap,
		seeds:       seeds,
		registryURL: fmt.Sprintf("http://127.0.0.1:%d", ports[3]),
		logTail:     tail,
	}, stop, nil
}

// brokerEnv drops the suite's own SHALE_* variables from the broker's environment:
// shale reads SHALE_<KEY> as settings and warns about names it does not know.
func brokerEnv(environ []string) []string {
	suite := []string{envBootstrap, envTarget, envShaleBin, envServeArgs, envMatrixOut, envTrace, envRegistryURL}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(suite, name) {
			out = append(out, kv)
		}
	}
	return out
}

// waitForBroker polls until the broker answers a Metadata request that lists itself.
func waitForBroker(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(reqCtx, cl)
		cancel()
		if err == nil && len(resp.Brokers) > 0 {
			return nil
		}
		if err == nil {
			err = errors.New("metadata lists no brokers")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker not ready: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		p, err := testutil.ReservePort("127.0.0.1")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

func fileTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}
