package protocol_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/metadata/memstore"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
)

// testBroker is one in-process broker on a loopback port, backed by memstore.
type testBroker struct {
	t      testing.TB
	addr   string
	dir    string
	store  *memstore.Store
	broker *replication.Manager
	srv    *protocol.Server
	cancel context.CancelFunc
	done   chan struct{}
}

type brokerOpt func(*protocol.Config)

func withoutAutoCreate() brokerOpt { return func(c *protocol.Config) { c.AutoCreateTopics = false } }
func withMaxRequestBytes(n int32) brokerOpt {
	return func(c *protocol.Config) { c.MaxRequestBytes = n }
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startBroker(t testing.TB, opts ...brokerOpt) *testBroker {
	t.Helper()
	return startBrokerIn(t, t.TempDir(), opts...)
}

func startBrokerIn(t testing.TB, dir string, opts ...brokerOpt) *testBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	store, err := memstore.New(memstore.Config{
		Broker: metadata.Broker{ID: 1, Host: "127.0.0.1", Port: int32(port)},
		Path:   dir + "/meta.json",
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := replication.NewManager(replication.Config{NodeID: 1, LogDir: dir, Logger: quietLogger()}, store)
	if err != nil {
		t.Fatal(err)
	}
	cfg := protocol.Config{NodeID: 1, AutoCreateTopics: true, DeleteTopicEnable: true, DefaultPartitions: 3, DefaultReplicationFactor: 1, Logger: quietLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	srv := protocol.NewServer(cfg, protocol.Deps{Meta: store, Replicas: b, ProducerIDs: protocol.NewProducerIDs(store)})
	ctx, cancel := context.WithCancel(context.Background())
	tb := &testBroker{t: t, addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, store: store, broker: b, srv: srv, cancel: cancel, done: make(chan struct{})}
	go b.Run(ctx)
	go func() { defer close(tb.done); srv.Serve(ctx, ln) }()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) stop() {
	if tb.cancel == nil {
		return
	}
	tb.srv.Close(2 * time.Second)
	tb.cancel()
	<-tb.done
	if err := tb.broker.Close(); err != nil {
		tb.t.Errorf("close broker: %v", err)
	}
	tb.store.Close()
	tb.cancel = nil
}

func (tb *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	tb.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(tb.addr), kgo.RetryTimeout(5 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Cleanup(cl.Close)
	return cl
}

func (tb *testBroker) admin() *kadm.Client { return kadm.NewClient(tb.client()) }

func (tb *testBroker) createTopic(topic string, partitions int32, configs map[string]*string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tb.admin().CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil || res.Err != nil {
		tb.t.Fatalf("create topic %s: %v %v", topic, err, res.Err)
	}
	// Wait until the replicas are open and leading.
	deadline := time.Now().Add(5 * time.Second)
	for i := int32(0); i < partitions; i++ {
		for {
			if p := tb.broker.Partitions().Get(topic, i); p != nil {
				break
			}
			if time.Now().After(deadline) {
				tb.t.Fatalf("partition %s-%d never opened", topic, i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
