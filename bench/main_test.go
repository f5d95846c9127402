package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// childEnv makes the test binary act as a child cluster process, so the
// subprocess targets are tested end to end without a shale binary.
const childEnv = "SHALE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(childMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// childMain serves `kfake-serve ...` through Main, and `serve ...` (the
// shale command line) with a kfake broker on the --listeners port: a
// stand-in Shale node that speaks Kafka and stops on SIGTERM.
func childMain(args []string) int {
	if len(args) > 0 && args[0] == "serve" {
		var listen, ctlListen, dirs, voters, nodeID string
		for _, a := range args[1:] {
			if v, ok := strings.CutPrefix(a, "--listeners=PLAINTEXT://"); ok {
				listen, ctlListen, _ = strings.Cut(v, ",")
				ctlListen = strings.TrimPrefix(ctlListen, "CONTROLLER://")
			}
			if v, ok := strings.CutPrefix(a, "--log.dirs="); ok {
				dirs = v
			}
			if v, ok := strings.CutPrefix(a, "--controller.quorum.voters="); ok {
				voters = v
			}
			if v, ok := strings.CutPrefix(a, "--node.id="); ok {
				nodeID = v
			}
		}
		if st, err := os.Stat(dirs); err != nil || !st.IsDir() {
			fmt.Fprintf(os.Stderr, "fake shale: --log.dirs %q is not a directory\n", dirs)
			return 2
		}
		if os.Getenv("FAKE_SHALE_FAIL") != "" {
			fmt.Fprintln(os.Stderr, "fake shale: failing on purpose")
			return 3
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if voters != "" {
			if err := fakeClusterNode(ctx, nodeID, listen, ctlListen, voters); err != nil {
				fmt.Fprintln(os.Stderr, "fake shale cluster node:", err)
				return 1
			}
			return 0
		}
		if err := serveKfake(ctx, listen); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	return Main(context.Background(), args, os.Stdout, os.Stderr)
}

// testSelf is the test binary as compare's own executable: it runs kfake
// children through childMain.
func testSelf(t *testing.T) selfBinary {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return selfBinary{path: exe, kfakeEnv: []string{childEnv + "=1"}}
}

// startKfake starts an in-process single-broker kfake cluster.
func startKfake(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// fakeClusterNode stands in for one node of a Shale cluster: node 1 runs a
// 3-broker kfake whose first broker listens on its Kafka port, and forwards
// its controller port there too; the other nodes forward their Kafka ports
// to node 1's controller port (the voter list tells them where it is). So
// every node's address answers for one 3-broker cluster, whose Metadata
// then sends clients to kfake's own brokers.
func fakeClusterNode(ctx context.Context, nodeID, listen, ctlListen, voters string) error {
	first, _, _ := strings.Cut(voters, ",")
	id1, ctl1, ok := strings.Cut(first, "@")
	if !ok || id1 != "1" {
		return fmt.Errorf("voters %q: want node 1 first", voters)
	}
	if nodeID != "1" {
		return forward(ctx, listen, ctl1)
	}
	_, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return err
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(port, 0, 0))
	if err != nil {
		return err
	}
	defer c.Close()
	return forward(ctx, ctlListen, listen)
}

// forward relays every connection to from to to, until ctx ends.
func forward(ctx context.Context, from, to string) error {
	ln, err := net.Listen("tcp", from)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", to)
			if err != nil {
				return
			}
			defer out.Close()
			go func() {
				io.Copy(out, in)
				out.(*net.TCPConn).CloseWrite()
			}()
			io.Copy(in, out)
		}()
	}
}
