package replication_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
)

// gateStore holds every Get while closed, until it opens or the call's context ends,
// as a store that has become very slow.
type gateStore struct {
	objstore.Store
	mu      sync.Mutex
	closed  bool
	open    chan struct{}
	blocked int
}

func (g *gateStore) setClosed(v bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v && !g.closed {
		g.open = make(chan struct{})
	}
	if !v && g.closed {
		close(g.open)
	}
	g.closed = v
}

func (g *gateStore) blockedCalls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}

func (g *gateStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	g.mu.Lock()
	closed, open := g.closed, g.open
	if closed {
		g.blocked++
	}
	g.mu.Unlock()
	if closed {
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Get(ctx, key, off, n)
}

// TestTieredFetchDoesNotWaitForASlowStore: a fetch of two partitions, one read from a
// remote log whose store hangs and one read locally, is answered within
// remote.fetch.max.wait.ms: the local partition's records, and the remote one empty
// without an error, so that the consumer asks again. Once the store answers, the remote
// partition reads.
func TestTieredFetchDoesNotWaitForASlowStore(t *testing.T) {
	store := &gateStore{Store: objstore.NewMemory()}
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{Logger: quiet(), RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RemoteRequestTimeout: 30 * time.Second, RetentionCheckInterval: 50 * time.Millisecond,
			RemoteFetchMaxWait: 200 * time.Millisecond}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	}), brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for topic, cfg := range map[string]map[string]*string{
		"cold": {"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"), "local.retention.bytes": kadm.StringPtr("1")},
		"hot":  nil,
	} {
		res, err := adm.CreateTopic(ctx, 1, 1, cfg, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		for _, topic := range []string{"cold", "hot"} {
			v := []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("c", 100)))
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cold := b.Replicas().Replica("cold", 0)
	waitFor(t, "the cold partition's start uploaded and removed locally", func() bool { return cold.LocalLogStartOffset() > 100 })

	fetch := func() *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
		for _, topic := range []string{"cold", "hot"} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, b.Replicas().Replica(topic, 0).TopicID()
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, 0, 64<<10, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, b.Client())
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 2 {
			t.Fatalf("fetch: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		}
		return resp
	}
	part := func(resp *kmsg.FetchResponse, topic string) kmsg.FetchResponseTopicPartition {
		id := b.Replicas().Replica(topic, 0).TopicID()
		for _, rt := range resp.Topics {
			if rt.Topic == topic || rt.TopicID == id {
				return rt.Partitions[0]
			}
		}
		t.Fatalf("no %s in the fetch response", topic)
		return kmsg.FetchResponseTopicPartition{}
	}

	store.setClosed(true)
	resp := fetch()
	if hot := part(resp, "hot"); hot.ErrorCode != 0 || len(hot.RecordBatches) == 0 {
		t.Fatalf("local partition: error %d, %d bytes of records", hot.ErrorCode, len(hot.RecordBatches))
	}
	if c := part(resp, "cold"); c.ErrorCode != 0 || len(c.RecordBatches) != 0 || c.LogStartOffset != 0 {
		t.Fatalf("remote partition with the store hanging: error %d, %d bytes, log start %d; want an empty answer", c.ErrorCode, len(c.RecordBatches), c.LogStartOffset)
	}
	if store.blockedCalls() == 0 {
		t.Fatal("the remote read never reached the store")
	}

	store.setClosed(false)
	waitFor(t, "the remote partition read once the store answers", func() bool {
		c := part(fetch(), "cold")
		if c.ErrorCode != 0 {
			t.Fatalf("remote partition: error %d", c.ErrorCode)
		}
		return len(c.RecordBatches) > 0
	})
}

// TestTieredFetchReaderQueueFull: with one reader busy on a hanging store and its queue
// of one full, a further remote read is refused with UNKNOWN_SERVER_ERROR, as Kafka
// answers a read its RemoteLogReader pool rejects; those accepted are answered empty.
func TestTieredFetchReaderQueueFull(t *testing.T) {
	store := &gateStore{Store: objstore.NewMemory()}
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{Logger: quiet(), RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RemoteRequestTimeout: 10 * time.Minute, RetentionCheckInterval: 50 * time.Millisecond,
			RemoteFetchMaxWait: 100 * time.Millisecond, RemoteLogReaderThreads: 1, RemoteLogReaderMaxPendingTasks: 1}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	}), brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "queued"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"), "local.retention.bytes": kadm.StringPtr("1"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%d-%0100d", i, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p := b.Replicas().Replica(topic, 0)
	waitFor(t, "the start of the log only remote", func() bool { return p.LocalLogStartOffset() > 100 })
	store.setClosed(true)
	defer store.setClosed(false)
	fetchAt := func(offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, p.TopicID()
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, offset, 64<<10, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b.Client())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	// Three reads of three places: one reader and one queued slot take at most two.
	refused := 0
	for _, off := range []int64{0, 30, 60} {
		got := fetchAt(off)
		switch {
		case got.ErrorCode == kerr.UnknownServerError.Code:
			refused++
		case got.ErrorCode != 0 || len(got.RecordBatches) != 0:
			t.Fatalf("fetch at %d with the store hanging: error %d, %d bytes", off, got.ErrorCode, len(got.RecordBatches))
		}
	}
	if refused == 0 {
		t.Fatal("no remote read refused with the readers busy and the queue full")
	}
}

// gatedWaitClock is the wall clock, except that a wait of exactly `wait` (the test's
// remote.fetch.max.wait.ms, a value no other timer of the broker uses) ends only when the
// test fires it.
type gatedWaitClock struct {
	wait  time.Duration
	mu    sync.Mutex
	gates []chan time.Time
}

func (c *gatedWaitClock) Now() time.Time { return time.Now() }

func (c *gatedWaitClock) After(d time.Duration) <-chan time.Time {
	if d != c.wait {
		return time.After(d)
	}
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.gates = append(c.gates, ch)
	c.mu.Unlock()
	return ch
}

func (c *gatedWaitClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.gates)
}

// fire ends the waits started so far.
func (c *gatedWaitClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.gates {
		g <- time.Now()
	}
	c.gates = nil
}

// startGatedWaitBroker starts a tiered broker over store whose remote fetch waits end only
// when clock fires them; reg, when not nil, gets the replica manager's metrics.
func startGatedWaitBroker(t *testing.T, store objstore.Store, clock *gatedWaitClock, reg prometheus.Registerer) *brokertest.Broker {
	t.Helper()
	return brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{Logger: quiet(), Clock: clock, RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RemoteRequestTimeout: 30 * time.Second, RetentionCheckInterval: 50 * time.Millisecond,
			RemoteFetchMaxWait: clock.wait, Registry: reg}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	}), tieredController())
}

// TestTieredFetchWaitsOnceForAllRemotePartitions: a fetch of several partitions that are
// all below their local log starts, with the store hanging, is answered after one
// remote.fetch.max.wait.ms, not one per partition (which, with many partitions, would
// outlast the consumer's request timeout on every try).
func TestTieredFetchWaitsOnceForAllRemotePartitions(t *testing.T) {
	const parts = 4
	store := &gateStore{Store: objstore.NewMemory()}
	clock := &gatedWaitClock{wait: 4321 * time.Millisecond}
	b := startGatedWaitBroker(t, store, clock, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	const topic = "cold"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"), "local.retention.bytes": kadm.StringPtr("1"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		for p := range int32(parts) {
			v := []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("c", 100)))
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "every partition's start uploaded and removed locally", func() bool {
		for p := range int32(parts) {
			if b.Replicas().Replica(topic, p).LocalLogStartOffset() < 50 {
				return false
			}
		}
		return true
	})

	store.setClosed(true)
	id := b.Replicas().Replica(topic, 0).TopicID()
	req := kmsg.NewPtrFetchRequest()
	// MinBytes 0: one pass over the partitions, no long poll (whose later pass would
	// start a wait of its own).
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for p := range int32(parts) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, 0, 64<<10, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	type answer struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := req.RequestWith(ctx, b.Client())
		done <- answer{resp, err}
	}()
	waitFor(t, "the fetch waiting on the hanging store", func() bool { return store.blockedCalls() > 0 && clock.pending() > 0 })
	clock.fire() // remote.fetch.max.wait.ms passes once, and only once
	var a answer
	select {
	case a = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the fetch of %d remote partitions was not answered after remote.fetch.max.wait.ms passed once (%d waits pending)", parts, clock.pending())
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.resp.ErrorCode != 0 || len(a.resp.Topics) != 1 || len(a.resp.Topics[0].Partitions) != parts {
		t.Fatalf("fetch: error %d, %d topics", a.resp.ErrorCode, len(a.resp.Topics))
	}
	for _, rp := range a.resp.Topics[0].Partitions {
		if rp.ErrorCode != 0 || len(rp.RecordBatches) != 0 {
			t.Fatalf("partition %d with the store hanging: error %d, %d bytes; want an empty answer", rp.Partition, rp.ErrorCode, len(rp.RecordBatches))
		}
	}
	store.setClosed(false)
}

// TestTieredFetchKeepsAReadItsFetchGaveUpOn: a remote read that ends after its fetch gave
// up waiting (the store slower than remote.fetch.max.wait.ms) answers the next fetch of
// the same offset. Were it dropped, the next fetch would start the read anew and, the
// store being as slow as before, give up again: the consumer would never get past it.
func TestTieredFetchKeepsAReadItsFetchGaveUpOn(t *testing.T) {
	store := &gateStore{Store: objstore.NewMemory()}
	clock := &gatedWaitClock{wait: 4321 * time.Millisecond}
	reg := prometheus.NewRegistry()
	b := startGatedWaitBroker(t, store, clock, reg)
	readBytes := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "shale_remote_log_read_bytes_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "cold"
	createTieredTopic(t, ctx, kadm.NewClient(cl), topic, 1)
	produceValues(t, ctx, cl, topic, "k", 0, 100)
	p := b.Replicas().Replica(topic, 0)
	waitFor(t, "the partition's start uploaded and removed locally", func() bool { return p.LocalLogStartOffset() > 50 })

	fetch := func() kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, p.TopicID()
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, 0, 64<<10, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		done := make(chan *kmsg.FetchResponse, 1)
		go func() {
			resp, err := req.RequestWith(ctx, b.Client())
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		for {
			select {
			case resp := <-done:
				if resp == nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("fetch: %+v", resp)
				}
				return resp.Topics[0].Partitions[0]
			case <-time.After(10 * time.Millisecond):
				clock.fire() // a remote wait, when there is one, runs out at once
			}
		}
	}

	store.setClosed(true)
	blocked := store.blockedCalls()
	if rp := fetch(); rp.ErrorCode != 0 || len(rp.RecordBatches) != 0 {
		t.Fatalf("with the store hanging: error %d, %d bytes; want an empty answer", rp.ErrorCode, len(rp.RecordBatches))
	}
	if store.blockedCalls() == blocked {
		t.Fatal("the remote read never reached the store")
	}
	// The store answers the read in flight, and then hangs again for any new one.
	read := readBytes()
	store.setClosed(false)
	waitFor(t, "the read in flight answered", func() bool { return readBytes() > read })
	store.setClosed(true)
	rp := fetch()
	if rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 {
		t.Fatalf("after the read ended: error %d, %d bytes; want the kept read's records", rp.ErrorCode, len(rp.RecordBatches))
	}
	store.setClosed(false)
}
