package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
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
		var listen, dirs string
		for _, a := range args[1:] {
			if v, ok := strings.CutPrefix(a, "--listeners=PLAINTEXT://"); ok {
				listen, _, _ = strings.Cut(v, ",")
			}
			if v, ok := strings.CutPrefix(a, "--log.dirs="); ok {
				dirs = v
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
