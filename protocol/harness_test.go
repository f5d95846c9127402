package protocol_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/replication/share"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
)

// testBroker is one in-process broker on a loopback port: broker 1 of a real controller
// quorum of one voter (controllertest), built as the node builds it (brokertest).
type testBroker struct {
	t      testing.TB
	b      *brokertest.Broker
	addr   string
	dir    string // the broker's log dir; the controller's data dir is node.Dir
	node   *controllertest.Node
	store  metadata.Store
	broker *replication.Manager
	srv    *protocol.Server
	groups *group.Coordinator // nil unless started as a group broker
	// shareGroups is the share-group coordinator, started with groups.
	shareGroups *sharegroup.Coordinator
	sgcfg       *sharegroup.Config
	txn         *txn.Coordinator // nil unless started as a transaction broker
	shares      *share.Manager   // nil unless started as a share broker

	cfg     protocol.Config
	gcfg    *group.Config
	tcfg    *txn.Config
	scfg    *share.Config
	stopped bool
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

// launch starts a broker on log dir dir with a new quorum; node must be nil (a broker
// and its quorum restart with testBroker.restart).
func launch(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config) *testBroker {
	t.Helper()
	return launchTxn(t, dir, node, cfg, gcfg, nil)
}

// launchTxn is launch with a transaction coordinator when tcfg is set (and gcfg, which
// TxnOffsetCommit needs); it writes its markers over the broker's own listener.
func launchTxn(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, tcfg *txn.Config) *testBroker {
	t.Helper()
	return launchAll(t, dir, node, cfg, gcfg, nil, tcfg, nil)
}

// launchShares is launch with a share-partition manager when scfg is set.
func launchShares(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, scfg *share.Config) *testBroker {
	t.Helper()
	return launchAll(t, dir, node, cfg, gcfg, nil, nil, scfg)
}

// launchShareGroups is launchShares with the share-group coordinator configured by
// sgcfg (by default it has Kafka's defaults).
func launchShareGroups(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, sgcfg *sharegroup.Config, scfg *share.Config) *testBroker {
	t.Helper()
	return launchAll(t, dir, node, cfg, gcfg, sgcfg, nil, scfg)
}

// launchAll is launch with whichever of the group coordinators (the share-group one
// with the classic one, configured by sgcfg when set), the transaction coordinator and
// the share-partition manager have a config.
func launchAll(t testing.TB, dir string, node *controllertest.Node, cfg protocol.Config, gcfg *group.Config, sgcfg *sharegroup.Config, tcfg *txn.Config, scfg *share.Config) *testBroker {
	t.Helper()
	if node != nil {
		t.Fatal("launchAll starts a new quorum: restart a broker on its own with testBroker.restart")
	}
	tune := brokertest.WithOptions(func(o *broker.Options) {
		o.Protocol, o.Groups, o.ShareGroups, o.Txn, o.Shares = cfg, gcfg, sgcfg, tcfg, scfg
	})
	b := brokertest.Start(t, brokertest.WithLogDir(dir), tune,
		brokertest.WithController(controllertest.WithDefaultPartitions(cfg.DefaultPartitions)))
	return wrap(t, b, cfg, gcfg, sgcfg, tcfg, scfg)
}

func wrap(t testing.TB, b *brokertest.Broker, cfg protocol.Config, gcfg *group.Config, sgcfg *sharegroup.Config, tcfg *txn.Config, scfg *share.Config) *testBroker {
	return &testBroker{t: t, b: b, addr: b.Addr, dir: b.Dir, node: b.Node, store: b.Store, broker: b.Replicas(),
		srv: b.Protocol(), groups: b.Groups(), shareGroups: b.ShareGroups(), txn: b.Txn(), shares: b.Shares(),
		cfg: cfg, gcfg: gcfg, sgcfg: sgcfg, tcfg: tcfg, scfg: scfg}
}

// stop shuts the broker down in a process's order (broker.Broker.Close) and then the
// broker's controller session ends and the controller stops.
func (tb *testBroker) stop() {
	if tb.stopped {
		return
	}
	tb.stopped = true
	if err := tb.b.Close(); err != nil {
		tb.t.Errorf("close broker: %v", err)
	}
	if err := tb.node.Close(); err != nil {
		tb.t.Errorf("close controller: %v", err)
	}
}

// restart stops the broker and its controller and starts both again on the same
// directories (the Kafka listener on a new port), with tb's configs as they are now;
// tb must not be used afterwards.
func (tb *testBroker) restart() *testBroker {
	tb.t.Helper()
	tb.stop()
	cfg, gcfg, sgcfg, tcfg, scfg := tb.cfg, tb.gcfg, tb.sgcfg, tb.tcfg, tb.scfg
	b := tb.b.Restart(brokertest.WithOptions(func(o *broker.Options) {
		o.Protocol, o.Groups, o.ShareGroups, o.Txn, o.Shares = cfg, gcfg, sgcfg, tcfg, scfg
	}))
	return wrap(tb.t, b, cfg, gcfg, sgcfg, tcfg, scfg)
}

// waitApplied waits until the replica manager has applied an image for which cond holds:
// an admin call returns once the controller has committed the change, and the broker
// learns of it a moment later, as in Kafka.
func (tb *testBroker) waitApplied(what string, cond func(*metadata.Image) bool) *metadata.Image {
	tb.t.Helper()
	return tb.b.WaitApplied(what, cond)
}

func (tb *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	tb.t.Helper()
	return tb.b.Client(opts...)
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
