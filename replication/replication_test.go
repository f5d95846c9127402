package replication_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
)

// replica is one in-process broker (brokertest): a replica manager and its Kafka
// listener.
type replica struct {
	t     *testing.T
	id    int32
	dir   string
	addr  string
	store metadata.Store
	b     *brokertest.Broker
	m     *replication.Manager
}

const lagTime = 1500 * time.Millisecond

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

// options are the test brokers' settings, tune adjusting the replica manager's.
func options(tune func(*replication.Config)) brokertest.Option {
	return brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{ReplicaLagTimeMax: lagTime, ReplicaFetchBackoff: 50 * time.Millisecond, Logger: quiet()}
		if tune != nil {
			tune(&o.Replication)
		}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	})
}

// start runs the broker again, after stop, on its dir, serving on ln.
func (r *replica) start(ln net.Listener) {
	r.t.Helper()
	r.b = r.b.Reopen(brokertest.WithListener(ln))
	r.m = r.b.Replicas()
}

// stop closes the listener and the replica manager; the broker stays registered and
// heartbeating, as a broker whose replication stalls would.
func (r *replica) stop() {
	if err := r.b.Close(); err != nil {
		r.t.Errorf("close broker %d: %v", r.id, err)
	}
}

func startCluster(t *testing.T) (*controllertest.Node, []*replica) {
	t.Helper()
	return startClusterTuned(t, nil)
}

// startClusterTuned starts three brokers, tune adjusting each one's config.
func startClusterTuned(t *testing.T, tune func(id int32, cfg *replication.Config)) (*controllertest.Node, []*replica) {
	t.Helper()
	tuneOf := func(id int32) func(*replication.Config) {
		if tune == nil {
			return nil
		}
		return func(cfg *replication.Config) { tune(id, cfg) }
	}
	first := brokertest.Start(t, options(tuneOf(1)))
	var rs []*replica
	for i := range 3 {
		id := int32(i + 1)
		b := first
		if id > 1 {
			b = first.AddBroker(id, options(tuneOf(id)))
		}
		rs = append(rs, &replica{t: t, id: id, dir: b.Dir, addr: b.Addr, store: b.Store, b: b, m: b.Replicas()})
	}
	return first.Node, rs
}

func isrOf(rs []*replica, topic string) []int32 {
	p := rs[0].store.Current().Partition(topic, 0)
	if p == nil {
		return nil
	}
	return slices.Sorted(slices.Values(p.ISR))
}

// TestFollowersReplicateAndTheISRFollows: three brokers in one process, on the real
// controller. acks=all produce lands on every replica with one high watermark; a
// follower that stops fetching leaves the ISR after replica.lag.time.max.ms, produce goes
// on with min.insync.replicas=2, and the follower rejoins once it has caught up.
func TestFollowersReplicateAndTheISRFollows(t *testing.T) {
	_, rs := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := rs[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "r", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{1, 2, 3}}, Configs: map[string]string{"min.insync.replicas": "2"}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(rs[0].addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("r"),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("acks=all produce: %v", err)
			}
		}
	}
	caughtUp := func(want int64, who ...*replica) func() bool {
		return func() bool {
			for _, r := range who {
				p := r.m.Replica("r", 0)
				if p == nil || p.LogEndOffset() != want || p.HighWatermark() != want {
					return false
				}
			}
			return true
		}
	}

	produce(50)
	// Acknowledged means on every ISR member; followers learn the high watermark with
	// their next fetch.
	for _, r := range rs[1:] {
		if leo := r.m.Replica("r", 0).LogEndOffset(); leo != 50 {
			t.Fatalf("broker %d has %d records after 50 acks=all acknowledgements", r.id, leo)
		}
	}
	testutil.Eventually(t, 20*time.Second, "every replica at 50/50", caughtUp(50, rs...))

	// Broker 3 stops fetching: it leaves the ISR, and acks=all goes on with two.
	rs[2].stop()
	start := time.Now()
	testutil.Eventually(t, 20*time.Second, "broker 3 out of the ISR", func() bool { return slices.Equal(isrOf(rs, "r"), []int32{1, 2}) })
	if waited := time.Since(start); waited < lagTime/2 {
		t.Fatalf("ISR shrank after %v, before replica.lag.time.max.ms %v", waited, lagTime)
	}
	produce(30)
	testutil.Eventually(t, 20*time.Second, "brokers 1 and 2 at 80", caughtUp(80, rs[:2]...))

	// It comes back on the same log, catches up and rejoins.
	rs[2].start(listen(t, rs[2].addr))
	testutil.Eventually(t, 20*time.Second, "broker 3 back in the ISR", func() bool { return slices.Equal(isrOf(rs, "r"), []int32{1, 2, 3}) })
	produce(20)
	testutil.Eventually(t, 20*time.Second, "every replica at 100/100", caughtUp(100, rs...))

	// DeleteRecords on the leader reaches the followers through their fetches.
	adm := kadm.NewClient(cl)
	var del kadm.Offsets
	del.AddOffset("r", 0, 60, -1)
	if res, err := adm.DeleteRecords(ctx, del); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	testutil.Eventually(t, 20*time.Second, "log start 60 on every replica", func() bool {
		for _, r := range rs {
			if r.m.Replica("r", 0).LogStartOffset() != 60 {
				return false
			}
		}
		return true
	})
}
