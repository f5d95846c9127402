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

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/coordinator/txn/producerid"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/replication/share"
)

// testBroker is one in-process broker on a loopback port: broker 1 of a real controller
// quorum of one voter (controllertest), its replica manager and its Kafka listener.
type testBroker struct {
	t      testing.TB
	addr   string
	dir    string // the broker's log dir; the controller's data dir is node.Dir
	node   *controllertest.Node
	store  metadata.Store
	broker *replication.Manager
	srv    *protocol.Server
	groups *group.Coordinator // nil unless started as a group broker
	txn    *txn.Coordinator   // nil unless started as a transaction broker
	txnCl  *txn.BrokerClients
	shares *share.Manager // nil unless started as a share broker
	cancel context.CancelFunc
	done   chan struct{} // closed when the listener and the replica manager have stopped

	cfg  protocol.Config
	gcfg *group.Config
	tcfg *txn.Config
	scfg *share.Config
}

type brokerOpt func(*protocol.Config)

func withoutAutoCreate() brokerOpt { return func(c *protocol.Config) { c.AutoCreateTopics = false } }
func withMaxRequestBytes(n int32) brokerOpt {
	return func(c *protocol.Config) { c.MaxRequestBytes = n }
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func brokerConfig(opts ...brokerOpt) protocol.Config {
	cfg := protocol.Config{NodeID: 1, AutoCreateTopics: true, DeleteTopicEnable: true, DefaultPartitions: 3, DefaultReplicationFactor: 1, Logger: quietLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func startBroker(t testing.TB, opts ...brokerOpt) *testBroker {
	t.Helper()
	return startBrokerIn(t, t.TempDir(), opts...)
}

// startBrokerIn starts a broker on log dir dir with a new controller quorum (its data dir
// a fresh temporary directory, so that a full log dir does not stop the controller).
func startBrokerIn(t testing.TB, dir string, opts ...brokerOpt) *testBroker {
	t.Helper()
	return launch(t, dir, nil, brokerConfig(opts...), nil)
}

// launch starts the broker side on log dir dir. With node nil it starts a new quorum;
// otherwise it restarts node on its data dir, as a restarted process does.
func launch(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config) *testBroker {
	t.Helper()
	return launchTxn(t, dir, node, cfg, gcfg, nil)
}

// launchTxn is launch with a transaction coordinator when tcfg is set (and gcfg, which
// TxnOffsetCommit needs); it writes its markers over the broker's own listener.
func launchTxn(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, tcfg *txn.Config) *testBroker {
	t.Helper()
	return launchAll(t, dir, node, cfg, gcfg, tcfg, nil)
}

// launchShares is launch with a share-partition manager when scfg is set.
func launchShares(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, scfg *share.Config) *testBroker {
	t.Helper()
	return launchAll(t, dir, node, cfg, gcfg, nil, scfg)
}

// launchAll is launch with whichever of the group coordinator, the transaction
// coordinator and the share-partition manager have a config.
func launchAll(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, tcfg *txn.Config, scfg *share.Config) *testBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	advertised := controllertest.WithAdvertised("127.0.0.1", port)
	if node == nil {
		node = controllertest.Start(t, advertised, controllertest.WithDefaultPartitions(cfg.DefaultPartitions))
	} else {
		node = node.Restart(advertised)
	}
	store := node.Store()
	b, err := replication.NewManager(replication.Config{NodeID: 1, LogDir: dir, Logger: quietLogger()}, store)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	deps := protocol.Deps{Meta: store, Replicas: b, ProducerIDs: producerid.New(store)}
	tb := &testBroker{t: t, addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, node: node, store: store, broker: b,
		done: make(chan struct{}), cfg: cfg, gcfg: gcfg, tcfg: tcfg, scfg: scfg}
	if scfg != nil {
		tb.shares = share.NewManager(*scfg, node.Broker, b)
		deps.Shares = tb.shares
	}
	if gcfg != nil {
		gc := *gcfg
		if tb.shares != nil {
			// The coordinator reads share-group state as the node wires it.
			gc.ShareStates, gc.ShareMemberRemoved = share.NewStates(tb.shares, node.Broker), tb.shares.MemberRemoved
		}
		tb.groups = group.New(gc, store)
		deps.Groups = tb.groups
	}
	if tcfg != nil {
		tb.txnCl = txn.NewBrokerClients(1)
		tb.txn = txn.New(*tcfg, node.Broker, deps.ProducerIDs, tb.txnCl)
		deps.Txn = tb.txn
		deps.TxnVerifier = &txn.Verifier{Coordinator: tb.txn, Remote: tb.txnCl}
		b.SetTxnVerifier(deps.TxnVerifier)
	}
	tb.srv = protocol.NewServer(cfg, deps)
	var ctx context.Context
	ctx, tb.cancel = context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); b.Run(ctx) }()
	go func() {
		defer close(tb.done)
		tb.srv.Serve(ctx, ln)
		<-ran
	}()
	t.Cleanup(tb.stop)
	return tb
}

// stop shuts the broker down in a process's order: the coordinator answers waiting
// joins, the listener drains, the replica manager stops following metadata and closes
// the replicas, and then the broker's controller session ends and the controller stops.
func (tb *testBroker) stop() {
	if tb.cancel == nil {
		return
	}
	if tb.groups != nil {
		tb.groups.Close()
	}
	if tb.txn != nil {
		tb.txn.Close()
		tb.txnCl.Close()
	}
	tb.srv.Close(2 * time.Second)
	if tb.shares != nil {
		tb.shares.Close()
	}
	tb.cancel()
	<-tb.done
	if err := tb.broker.Close(); err != nil {
		tb.t.Errorf("close broker: %v", err)
	}
	if err := tb.node.Close(); err != nil {
		tb.t.Errorf("close controller: %v", err)
	}
	tb.cancel = nil
}

// restart stops the broker and its controller and starts both again on the same
// directories (the Kafka listener on a new port); tb must not be used afterwards.
func (tb *testBroker) restart() *testBroker {
	tb.t.Helper()
	tb.stop()
	return launchAll(tb.t, tb.dir, tb.node, tb.cfg, tb.gcfg, tb.tcfg, tb.scfg)
}

// waitApplied waits until the replica manager has applied an image for which cond holds:
// an admin call returns once the controller has committed the change, and the broker
// learns of it a moment later, as in Kafka.
func (tb *testBroker) waitApplied(what string, cond func(*metadata.Image) bool) *metadata.Image {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !tb.broker.WaitApplied(ctx, cond) {
		tb.t.Fatalf("timed out waiting for %s", what)
	}
	return tb.broker.Image()
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
	tb.waitApplied("topic "+topic, func(im *metadata.Image) bool {
		t := im.Topic(topic)
		if t == nil || len(t.Partitions) != int(partitions) {
			return false
		}
		for i := int32(0); i < partitions; i++ {
			if tb.broker.Partitions().Get(topic, i) == nil {
				return false
			}
		}
		return true
	})
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
