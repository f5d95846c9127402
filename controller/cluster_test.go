package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
)

// Short timeouts keep the in-process cluster tests quick.
const (
	testSessionTimeout    = 1500 * time.Millisecond
	testHeartbeatInterval = 150 * time.Millisecond
	testRaftTimeout       = 300 * time.Millisecond
)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SHALE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// testQuorum runs controllers in this process on loopback ports.
type testQuorum struct {
	t       testing.TB
	voters  []Voter
	dirs    []string
	servers []*Server // nil when stopped
	tune    func(*Config)
}

func newTestQuorum(t testing.TB, n int, tune func(*Config)) *testQuorum {
	t.Helper()
	q := &testQuorum{t: t, tune: tune}
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		q.voters = append(q.voters, Voter{ID: int32(i + 1), Addr: ln.Addr().String()})
		q.dirs = append(q.dirs, t.TempDir())
	}
	q.servers = make([]*Server, n)
	for i := range n {
		q.startWith(i, lns[i])
	}
	t.Cleanup(q.closeAll)
	return q
}

func (q *testQuorum) config(i int) Config {
	cfg := Config{
		NodeID:             q.voters[i].ID,
		Voters:             q.voters,
		DataDir:            q.dirs[i],
		SessionTimeout:     testSessionTimeout,
		HeartbeatTimeout:   testRaftTimeout,
		ElectionTimeout:    testRaftTimeout,
		LeaderLeaseTimeout: testRaftTimeout / 2,
		// Preferred leaders come back quickly in tests; the default is 300s.
		LeaderImbalanceCheckInterval: 200 * time.Millisecond,
		Logger:                       testLogger(q.t).With("controller", q.voters[i].ID),
	}
	if q.tune != nil {
		q.tune(&cfg)
	}
	return cfg
}

func (q *testQuorum) startWith(i int, ln net.Listener) {
	q.t.Helper()
	cfg := q.config(i)
	cfg.Listener = ln
	s, err := NewServer(cfg)
	if err != nil {
		q.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		q.t.Fatal(err)
	}
	q.servers[i] = s
}

// restart starts a stopped controller again on its old port.
func (q *testQuorum) restart(i int) {
	q.t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", q.voters[i].Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		q.t.Fatal(err)
	}
	q.startWith(i, ln)
}

func (q *testQuorum) stop(i int) {
	q.t.Helper()
	if err := q.servers[i].Close(); err != nil {
		q.t.Errorf("close controller %d: %v", i+1, err)
	}
	q.servers[i] = nil
}

func (q *testQuorum) closeAll() {
	for i, s := range q.servers {
		if s != nil {
			s.Close()
			q.servers[i] = nil
		}
	}
}

func (q *testQuorum) addrs() []string {
	var out []string
	for _, v := range q.voters {
		out = append(out, v.Addr)
	}
	return out
}

// leader waits for an active controller and returns its index.
func (q *testQuorum) leader() int {
	q.t.Helper()
	var idx int
	testutil.Eventually(q.t, 20*time.Second, "an active controller", func() bool {
		for i, s := range q.servers {
			if s != nil && s.IsActive() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

func (q *testQuorum) broker(id int32, rack string) *BrokerClient {
	q.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := NewBrokerClient(ctx, BrokerConfig{
		NodeID: id, Host: "127.0.0.1", Port: 19000 + id, Rack: rack,
		ControllerAddrs:   q.addrs(),
		HeartbeatInterval: testHeartbeatInterval,
		SessionTimeout:    testSessionTimeout,
		// Brokers follow quorum changes quickly in tests; the default is 5s.
		VoterRefreshInterval: 200 * time.Millisecond,
		Logger:               testLogger(q.t).With("broker", id),
	})
	if err != nil {
		q.t.Fatal(err)
	}
	q.t.Cleanup(func() { c.Close() })
	return c
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreateTopic(t testing.TB, s metadata.Store, name string, partitions int32, rf int16) *metadata.Topic {
	t.Helper()
	r := s.CreateTopics(ctxFor(t), []metadata.TopicSpec{{Name: name, NumPartitions: partitions, ReplicationFactor: rf}}, false)
	if r[0].Err != nil {
		t.Fatalf("create %s: %v", name, r[0].Err)
	}
	return r[0].Topic
}

// waitImage waits until a broker's cache satisfies cond.
func waitImage(t testing.TB, s metadata.Store, what string, cond func(*metadata.Image) bool) *metadata.Image {
	t.Helper()
	var im *metadata.Image
	testutil.Eventually(t, 20*time.Second, what, func() bool {
		im = s.Current()
		return cond(im)
	})
	return im
}

// checkNoGoroutineLeak fails when goroutines started by the test outlive it.
func checkNoGoroutineLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("%d goroutines before the test, %d after:\n%s", before, n, leakedStacks(string(buf)))
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func leakedStacks(all string) string {
	var out []string
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "shalelog/shale/controller") || strings.Contains(g, "hashicorp/raft") || strings.Contains(g, "grpc") {
			out = append(out, g)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n\n"))
}
