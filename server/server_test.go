package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/server/config"
)

func load(t *testing.T, args ...string) *config.Config {
	t.Helper()
	cfg, err := config.Load(args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A port in use fails the start before anything is written: the data directory of a
// node that never ran is not left holding a bootstrapped quorum of its own.
func TestPortConflictWritesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	for _, tc := range []struct{ name, kafka, controller, http string }{
		{"kafka", taken, "127.0.0.1:0", "127.0.0.1:0"},
		{"controller", "127.0.0.1:0", taken, "127.0.0.1:0"},
		{"http", "127.0.0.1:0", "127.0.0.1:0", taken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cfg := load(t, "--log.dirs="+dir, "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener="+tc.http,
				fmt.Sprintf("--listeners=PLAINTEXT://%s,CONTROLLER://%s", tc.kafka, tc.controller))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Run(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), "address already in use") {
				t.Fatalf("Run: %v", err)
			}
			if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
				entries, _ := os.ReadDir(dir)
				t.Fatalf("the data directory was written: %v", entries)
			}
		})
	}
}

// runNode runs a node with the default logger writing to logs, until stop.
func runNode(t *testing.T, logs *testutil.Buffer, args ...string) (stop func() error) {
	t.Helper()
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	cfg := load(t, args...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("node did not stop")
			return nil
		}
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitBroker waits until the broker at addr answers Metadata with itself as a broker.
func waitBroker(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	testutil.Eventually(t, 30*time.Second, "the broker at "+addr, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err == nil && len(resp.Brokers) == 1
	})
}

// A single node told only its Kafka listener picks a loopback controller listener, says
// which, and comes back up on the same directory (on another free port) without
// complaint.
func TestSingleNodeWithOnlyKafkaListener(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	for run := range 3 {
		var logs testutil.Buffer
		stop := runNode(t, &logs, "--log.dirs="+dir, "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=", "--listeners=PLAINTEXT://"+addr)
		waitBroker(t, addr)
		if err := stop(); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, logs.String())
		}
		if !strings.Contains(logs.String(), "using a loopback one") || !strings.Contains(logs.String(), "listener=CONTROLLER://127.0.0.1:") {
			t.Errorf("run %d: the chosen controller listener is not logged:\n%s", run, logs.String())
		}
		if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "differs from the quorum stored") {
			t.Errorf("run %d logged an error:\n%s", run, logs.String())
		}
		// Raft stores the quorum with the old port; the node updates it, so nothing
		// (a follower's leader hint, a voter added later) dials a stale address.
		if run > 0 && !strings.Contains(logs.String(), "updated this controller's stored address") {
			t.Errorf("run %d did not update the stored address:\n%s", run, logs.String())
		}
	}
}

// A Kafka client given a combined node's controller address is answered by the node's
// broker, whose Metadata moves it to the Kafka listener, instead of retrying until it
// times out.
func TestKafkaClientOnControllerPortIsServed(t *testing.T) {
	kafka := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	ctl := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var logs testutil.Buffer
	runNode(t, &logs, "--log.dirs="+filepath.Join(t.TempDir(), "data"), "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
		"--listeners=PLAINTEXT://"+kafka+",CONTROLLER://"+ctl)
	waitBroker(t, kafka)

	cl, err := kgo.NewClient(kgo.SeedBrokers(ctl))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata through the controller port: %v\n%s", err, logs.String())
	}
	if len(resp.Brokers) != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != kafka {
		t.Fatalf("brokers %+v, want %s", resp.Brokers, kafka)
	}
	if !strings.Contains(logs.String(), "broker_listeners="+kafka) {
		t.Errorf("no hint logged:\n%s", logs.String())
	}
}
