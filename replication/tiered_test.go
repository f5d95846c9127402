package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
)

// flakyStore fails every other manifest write while failures are left, so that some
// uploads fail halfway and leave orphans behind.
type flakyStore struct {
	objstore.Store
	mu    sync.Mutex
	left  int
	count int
}

func (f *flakyStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if strings.HasSuffix(key, ".manifest") {
		f.mu.Lock()
		f.count++
		fail := f.left > 0 && f.count%2 == 1
		if fail {
			f.left--
		}
		f.mu.Unlock()
		if fail {
			return errors.New("injected: store unavailable")
		}
	}
	return f.Store.Put(ctx, key, body, size)
}

func tieredOptions(store objstore.Store) brokertest.Option {
	return brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{ReplicaLagTimeMax: lagTime, ReplicaFetchBackoff: 50 * time.Millisecond, Logger: quiet(),
			RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond, RetentionCheckInterval: 50 * time.Millisecond}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	})
}

// tieredController enables remote log storage on the cluster (remote.log.storage.system.enable).
func tieredController() brokertest.Option {
	return brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true }))
}

// startTieredPair starts brokers 1 and 2 of a tiered cluster over one object store.
func startTieredPair(t *testing.T, store objstore.Store) (first, second *brokertest.Broker) {
	t.Helper()
	first = brokertest.Start(t, tieredOptions(store), tieredController())
	return first, first.AddBroker(2, tieredOptions(store))
}

// createTieredTopic creates a one-partition topic that keeps almost nothing locally:
// segments of 2 KiB and one byte of local retention, so that every closed segment is
// uploaded and then deleted locally.
func createTieredTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, replicas int16) {
	t.Helper()
	res, err := adm.CreateTopic(ctx, 1, replicas, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"),
		"local.retention.bytes": kadm.StringPtr("1"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// produceValues produces count values, numbered from, of some 110 bytes each (padded
// with fill), one at a time, and returns them.
func produceValues(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, fill string, from, count int) [][]byte {
	t.Helper()
	var produced [][]byte
	for i := from; i < from+count; i++ {
		v := []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat(fill, 100)))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced = append(produced, v)
	}
	return produced
}

// checkLogFrom0 consumes partition 0 of topic from offset 0 through b until it has
// len(want) records, and checks that they are want, at offsets 0, 1, ...
func checkLogFrom0(t *testing.T, ctx context.Context, b *brokertest.Broker, topic string, want [][]byte) {
	t.Helper()
	cons := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got[:len(want)] {
		if r.Offset != int64(i) || !bytes.Equal(r.Value, want[i]) {
			t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}
}

// tieredOneReplica is a tiered topic of one partition with one replica on a pair of
// brokers: leader holds it, other is the broker a test adds as a new replica.
type tieredOneReplica struct {
	t                    *testing.T
	ctx                  context.Context
	cl                   *kgo.Client
	first, leader, other *brokertest.Broker
}

// startTieredOneReplica starts the pair and creates topic; ctx (2 minutes) and the
// client end with the test.
func startTieredOneReplica(t *testing.T, topic string) *tieredOneReplica {
	t.Helper()
	first, second := startTieredPair(t, objstore.NewMemory())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cl := first.Client(kgo.ProducerLinger(0))
	t.Cleanup(cl.Close)
	createTieredTopic(t, ctx, kadm.NewClient(cl), topic, -1)
	im := first.WaitApplied("topic", func(im *metadata.Image) bool { return im.Partition(topic, 0) != nil })
	leaderID := im.Partition(topic, 0).Leader
	brokers := map[int32]*brokertest.Broker{1: first, 2: second}
	return &tieredOneReplica{t: t, ctx: ctx, cl: cl, first: first, leader: brokers[leaderID], other: brokers[3-leaderID]}
}

// reassign moves the partition to replicas, the first preferred, and waits until they
// are all in sync.
func (r *tieredOneReplica) reassign(topic string, replicas ...int32) {
	r.t.Helper()
	errs, err := r.first.Store.AlterPartitionReassignments(r.ctx, []metadata.Reassignment{{Topic: topic, Partition: 0, Replicas: replicas}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.first.WaitApplied("the new replica in sync", func(im *metadata.Image) bool {
		p := im.Partition(topic, 0)
		return len(p.ISR) == len(replicas) && !p.Reassigning()
	})
}

// waitFor polls cond until it holds, failing after a generous timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTieredStorage: a topic with remote.storage.enable, tiny segments and almost no
// local retention, on a leader and a follower over one object store. Closed segments are
// uploaded and committed; local segments go only once committed remotely, on both
// replicas; a consumer reads the whole log from offset 0, byte for byte, mostly from the
// remote log; ListOffsets earliest is the remote log start and -4 the local one; and the
// uploads that failed halfway leave no object behind.
func TestTieredStorage(t *testing.T) {
	mem := objstore.NewMemory()
	store := &flakyStore{Store: mem, left: 3}
	first, second := startTieredPair(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl := first.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "tiered"
	createTieredTopic(t, ctx, adm, topic, 2)
	first.WaitApplied("topic", func(im *metadata.Image) bool {
		p := im.Partition(topic, 0)
		return p != nil && len(p.ISR) == 2
	})

	const n = 300
	// Timestamps within retention.ms (7 days): retention over the whole log keeps them.
	base := time.Now().Add(-time.Hour).UnixMilli()
	var produced []*kgo.Record
	for i := range n {
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i)), Value: bytes.Repeat([]byte{byte(i)}, 100+i%50),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}, Timestamp: time.UnixMilli(base + int64(i)*1000)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced = append(produced, r)
	}

	leaderID := first.Store.Current().Partition(topic, 0).Leader
	brokers := map[int32]*brokertest.Broker{1: first, 2: second}
	leader, follower := brokers[leaderID], brokers[3-leaderID]
	replica := func(b *brokertest.Broker) *partition.Partition { return b.Replicas().Replica(topic, 0) }

	// Local segments go only once the remote log holds them, on the leader and on the
	// follower alike; wait until both keep only the last few.
	checkLocalCovered := func() {
		t.Helper()
		for _, b := range []*brokertest.Broker{leader, follower} {
			p := replica(b)
			rl := b.Replicas().Image().RemoteLog(topic, 0)
			if start, end := p.LocalLogStartOffset(), rl.CoveredEnd(); start > end {
				t.Fatalf("broker %d: local log starts at %d, but the remote log ends at %d", b.ID, start, end)
			}
		}
	}
	waitFor(t, "local segments removed after upload", func() bool {
		checkLocalCovered()
		return replica(leader).LocalLogStartOffset() > n/2 && replica(follower).LocalLogStartOffset() > n/2
	})
	rl := leader.Replicas().Image().RemoteLog(topic, 0)
	if rl.StartOffset != 0 || rl.HighestOffset < n/2 || rl.SizeBytes <= 0 {
		t.Fatalf("remote log %+v", rl)
	}

	// Consume from 0: every record, byte for byte, in order.
	for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		cons := first.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
			kgo.FetchIsolationLevel(iso), kgo.FetchMaxPartitionBytes(4096))
		var got []*kgo.Record
		for len(got) < n {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			got = append(got, fs.Records()...)
		}
		cons.Close()
		if len(got) != n {
			t.Fatalf("consumed %d records, want %d", len(got), n)
		}
		for i, r := range got {
			w := produced[i]
			if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || !r.Timestamp.Equal(w.Timestamp) ||
				len(r.Headers) != 1 || !bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) {
				t.Fatalf("record %d: got offset %d key %q (%d bytes), want key %q (%d bytes)", i, r.Offset, r.Key, len(r.Value), w.Key, len(w.Value))
			}
		}
	}

	// ListOffsets: earliest is the remote log's start, -4 the local log's, a timestamp
	// finds its record in the remote log.
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("earliest %+v, want 0", o)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, base+10*1000, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup(topic, 0); o.Err != nil || o.Offset != 10 {
		t.Fatalf("offset for the 11th record's timestamp %+v, want 10", o)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, ts := range []int64{-4, -5} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, leader.Client())
	if err != nil {
		t.Fatal(err)
	}
	local, latestTiered := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	rl = leader.Replicas().Image().RemoteLog(topic, 0)
	if local.ErrorCode != 0 || local.Offset <= 0 || local.Offset > rl.HighestOffset+1 {
		t.Fatalf("earliest-local %+v (remote log ends at %d)", local, rl.HighestOffset)
	}
	if latestTiered.ErrorCode != 0 || latestTiered.Offset < rl.HighestOffset {
		t.Fatalf("latest-tiered %+v, remote highest %d", latestTiered, rl.HighestOffset)
	}

	// Every object in the store belongs to a segment the remote log holds: the failed
	// uploads' objects were deleted as orphans.
	waitFor(t, "orphans deleted", func() bool {
		rl := leader.Replicas().Image().RemoteLog(topic, 0)
		objs, err := mem.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			found := false
			for _, s := range append(append([]metadata.RemoteSegment{}, rl.Segments...), rl.Deleting...) {
				if strings.Contains(o.Key, s.UploadID) {
					found = true
				}
			}
			if !found {
				return false
			}
		}
		return true
	})
	// DeleteRecords below the local log start moves the remote log's start, and the
	// segments wholly below it are deleted, two-phase, objects and all.
	const purgeTo = 50
	drs, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: purgeTo}}})
	if err != nil {
		t.Fatal(err)
	}
	if dr, _ := drs.Lookup(topic, 0); dr.Err != nil || dr.LowWatermark != purgeTo {
		t.Fatalf("DeleteRecords %+v, want low watermark %d", dr, purgeTo)
	}
	if starts, err = adm.ListStartOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != purgeTo {
		t.Fatalf("earliest after DeleteRecords %+v, want %d", o, purgeTo)
	}
	waitFor(t, "remote segments below the new start deleted", func() bool {
		rl := leader.Replicas().Image().RemoteLog(topic, 0)
		if len(rl.Deleting) > 0 || len(rl.Segments) == 0 || rl.Segments[0].BaseOffset > purgeTo || rl.Segments[0].EndOffset < purgeTo {
			return false
		}
		objs, err := mem.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			found := false
			for _, s := range rl.Segments {
				found = found || strings.Contains(o.Key, s.UploadID)
			}
			if !found {
				return false
			}
		}
		return true
	})
	cons := first.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(purgeTo)}}))
	fs := cons.PollFetches(ctx)
	cons.Close()
	if err := fs.Err0(); err != nil || len(fs.Records()) == 0 || fs.Records()[0].Offset != purgeTo || !bytes.Equal(fs.Records()[0].Value, produced[purgeTo].Value) {
		t.Fatalf("read at the new start: err %v, %d records", err, len(fs.Records()))
	}

	store.mu.Lock()
	failed := store.left
	store.mu.Unlock()
	if failed != 0 {
		t.Fatalf("only %d of 3 injected upload failures happened", 3-failed)
	}
}

// TestTieredStorageLeaderChange: leadership moves in the middle of uploading; the new
// leader goes on from the remote log's end, so that the remote log is one run of
// segments without overlap or gap, uploaded by both, and a consumer reads everything.
func TestTieredStorageLeaderChange(t *testing.T) {
	first, second := startTieredPair(t, objstore.NewMemory())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := first.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "moving"
	createTieredTopic(t, ctx, adm, topic, 2)
	first.WaitApplied("topic", func(im *metadata.Image) bool {
		p := im.Partition(topic, 0)
		return p != nil && len(p.ISR) == 2
	})
	remote := func() *metadata.RemoteLog { return first.Replicas().Image().RemoteLog(topic, 0) }
	produced := produceValues(t, ctx, cl, topic, "x", 0, 150)
	waitFor(t, "first uploads", func() bool { return remote().CoveredEnd() > 50 })

	old := first.Store.Current().Partition(topic, 0)
	next := old.Replicas[0] + old.Replicas[1] - old.Leader
	errs, err := first.Store.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: topic, Partition: 0, Replicas: []int32{next, old.Leader}}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		t.Fatal(err)
	}
	first.WaitApplied("reassigned", func(im *metadata.Image) bool {
		p := im.Partition(topic, 0)
		return p.Replicas[0] == next && !p.Reassigning() && len(p.ISR) == 2
	})
	if _, err := first.Store.ElectLeaders(ctx, true, map[string][]int32{topic: {0}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*brokertest.Broker{first, second} {
		b.WaitApplied("new leader", func(im *metadata.Image) bool { return im.Partition(topic, 0).Leader == next })
	}
	produced = append(produced, produceValues(t, ctx, cl, topic, "x", len(produced), 150)...)
	waitFor(t, "uploads by the new leader", func() bool {
		rl := remote()
		return rl.CoveredEnd() > 250 && rl.Segments[len(rl.Segments)-1].Broker == next
	})

	// OffsetForLeaderEpoch of the old epoch, which the new leader's local log no longer
	// holds, is answered from the remote log: where the new epoch began.
	newLeader := map[int32]*brokertest.Broker{1: first, 2: second}[next]
	waitFor(t, "the old epoch gone from the new leader's local log", func() bool {
		es := newLeader.Replicas().Replica(topic, 0).EpochEntries()
		return len(es) > 0 && es[0].Epoch > old.LeaderEpoch
	})
	if e, end, err := newLeader.Replicas().EndOffsetForEpoch(topic, 0, -1, old.LeaderEpoch); err != nil || e != old.LeaderEpoch || end != 150 {
		t.Fatalf("OffsetForLeaderEpoch(%d) = %d, %d, %v; want %d, 150", old.LeaderEpoch, e, end, err, old.LeaderEpoch)
	}

	rl := remote()
	uploaders := map[int32]bool{}
	for i, s := range rl.Segments {
		uploaders[s.Broker] = true
		if i > 0 && s.BaseOffset != rl.Segments[i-1].EndOffset+1 {
			t.Fatalf("remote segments %d-%d and %d-%d overlap or leave a gap", rl.Segments[i-1].BaseOffset, rl.Segments[i-1].EndOffset, s.BaseOffset, s.EndOffset)
		}
	}
	if !uploaders[old.Leader] || !uploaders[next] || rl.Segments[0].BaseOffset != 0 {
		t.Fatalf("segments from %v starting at %d, want both brokers from 0", uploaders, rl.Segments[0].BaseOffset)
	}
	checkLogFrom0(t, ctx, first, topic, produced)
}

// downStore is an object store that, while down, holds every call until its context
// ends, as an unreachable server does.
type downStore struct {
	objstore.Store
	mu      sync.Mutex
	down    bool
	blocked int
}

func (d *downStore) wait(ctx context.Context) error {
	d.mu.Lock()
	down := d.down
	if down {
		d.blocked++
	}
	d.mu.Unlock()
	if !down {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (d *downStore) setDown(v bool) {
	d.mu.Lock()
	d.down = v
	d.mu.Unlock()
}

func (d *downStore) blockedCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.blocked
}

func (d *downStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.Store.Put(ctx, key, body, size)
}

func (d *downStore) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	return d.Store.List(ctx, prefix)
}

// TestTieredStorageStoreDown: with the object store unreachable, produce and fetch go
// on and every local segment is kept; once it is back, the uploads catch up and the
// local log shrinks, and the whole log still reads from 0.
func TestTieredStorageStoreDown(t *testing.T) {
	store := &downStore{Store: objstore.NewMemory(), down: true}
	var reg *prometheus.Registry // each start of the broker registers anew
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		reg = prometheus.NewRegistry()
		o.Replication = replication.Config{Logger: quiet(), RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RemoteRequestTimeout: 200 * time.Millisecond, RetentionCheckInterval: 50 * time.Millisecond, Registry: reg}
		o.Protocol = protocol.Config{Logger: quiet(), DeleteTopicEnable: true}
		o.ShutdownGrace = time.Second
	}), tieredController())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "down"
	createTieredTopic(t, ctx, kadm.NewClient(cl), topic, 1)
	const n = 200
	produced := produceValues(t, ctx, cl, topic, "y", 0, n)
	p := b.Replicas().Replica(topic, 0)
	waitFor(t, "uploads attempted against the unreachable store", func() bool { return store.blockedCalls() >= 3 })
	if len(p.SealedSegments()) < 5 || p.LocalLogStartOffset() != 0 {
		t.Fatalf("with the store down: %d closed segments, local log start %d; want them all kept", len(p.SealedSegments()), p.LocalLogStartOffset())
	}
	// The upload lag is the partition's, as Kafka's RemoteCopyLagSegments and
	// RemoteCopyLagBytes: every closed segment below the high watermark.
	waitFor(t, "the partition's upload lag", func() bool {
		segs := gaugeOf(t, reg, "shale_remote_log_upload_lag_segments", map[string]string{"topic": topic, "partition": "0"})
		size := gaugeOf(t, reg, "shale_remote_log_upload_lag_bytes", map[string]string{"topic": topic, "partition": "0"})
		return segs >= 5 && size >= 5*1024
	})
	checkLogFrom0(t, ctx, b, topic, produced)

	store.setDown(false)
	waitFor(t, "uploads caught up and local segments removed", func() bool {
		rl := b.Replicas().Image().RemoteLog(topic, 0)
		return rl.CoveredEnd() > n/2 && p.LocalLogStartOffset() > n/2
	})
	checkLogFrom0(t, ctx, b, topic, produced)

	// After a restart of the broker and its quorum, the remote log is still there and
	// the uploads go on from its end.
	cl.Close()
	b = b.Restart()
	cl = b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	produced = append(produced, produceValues(t, ctx, cl, topic, "y", n, n)...)
	p = b.Replicas().Replica(topic, 0)
	waitFor(t, "uploads after the restart", func() bool {
		rl := b.Replicas().Image().RemoteLog(topic, 0)
		return rl.CoveredEnd() > n+n/2 && p.LocalLogStartOffset() > n+n/2
	})
	rl := b.Replicas().Image().RemoteLog(topic, 0)
	for i, s := range rl.Segments {
		if i > 0 && s.BaseOffset != rl.Segments[i-1].EndOffset+1 {
			t.Fatalf("remote segments %d-%d and %d-%d overlap or leave a gap", rl.Segments[i-1].BaseOffset, rl.Segments[i-1].EndOffset, s.BaseOffset, s.EndOffset)
		}
	}
	checkLogFrom0(t, ctx, b, topic, produced)

	// Deleting the topic deletes its remote log too.
	if _, err := kadm.NewClient(cl).DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted topic's objects gone", func() bool {
		objs, err := store.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs) == 0
	})
}

// gaugeOf returns the value of the gauge name whose labels are labels in reg, -1 when
// there is none.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestTieredStorageDeletedTopicPurgedAfterRestart: a tiered topic deleted while the
// object store is down leaves its objects behind for now; the broker and its quorum
// restart before the store is back, and the restarted broker still deletes every object
// of the topic and reports it, which drops the purge from the image. No orphan is left.
func TestTieredStorageDeletedTopicPurgedAfterRestart(t *testing.T) {
	mem := objstore.NewMemory()
	store := &downStore{Store: mem}
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{Logger: quiet(), RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RemoteRequestTimeout: 200 * time.Millisecond, RetentionCheckInterval: 50 * time.Millisecond}
		o.Protocol = protocol.Config{Logger: quiet(), DeleteTopicEnable: true}
		o.ShutdownGrace = time.Second
	}), tieredController())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	const topic = "purged"
	createTieredTopic(t, ctx, kadm.NewClient(cl), topic, 1)
	produceValues(t, ctx, cl, topic, "p", 0, 100)
	waitFor(t, "uploads", func() bool { return b.Replicas().Image().RemoteLog(topic, 0).CoveredEnd() > 30 })
	id := b.Replicas().Image().Topic(topic).ID
	objects := func() int {
		objs, err := mem.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}

	store.setDown(true)
	if _, err := kadm.NewClient(cl).DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	key := metadata.RemotePurgeKey{TopicID: id, Partition: 0}
	b.WaitApplied("the purge in the image", func(im *metadata.Image) bool {
		_, ok := im.RemotePurges[key]
		return im.Topic(topic) == nil && ok
	})
	blocked := store.blockedCalls()
	waitFor(t, "a purge tried against the unreachable store", func() bool { return store.blockedCalls() > blocked })
	if objects() == 0 {
		t.Fatal("the objects went with the store down")
	}

	b = b.Restart()
	if _, ok := b.Replicas().Image().RemotePurges[key]; !ok {
		t.Fatalf("the purge did not survive the restart: %+v", b.Replicas().Image().RemotePurges)
	}
	store.setDown(false)
	waitFor(t, "the deleted topic's objects gone and its purge dropped", func() bool {
		_, ok := b.Replicas().Image().RemotePurges[key]
		return !ok && objects() == 0
	})
}

// TestTieredStorageNewReplicaCopiesLocalPart: a replica added to a tiered partition whose
// history is mostly remote copies only the leader's local log (KIP-1023's aim), joins the
// ISR, and the partition still reads whole from 0.
func TestTieredStorageNewReplicaCopiesLocalPart(t *testing.T) {
	const topic = "grow"
	tp := startTieredOneReplica(t, topic)
	ctx, first, leader, other := tp.ctx, tp.first, tp.leader, tp.other
	const n = 200
	produced := produceValues(t, ctx, tp.cl, topic, "z", 0, n)
	lp := leader.Replicas().Replica(topic, 0)
	waitFor(t, "the leader's local log mostly remote", func() bool { return lp.LocalLogStartOffset() > n/2 })

	tp.reassign(topic, leader.ID, other.ID)
	if start := other.Replicas().Replica(topic, 0).LocalLogStartOffset(); start == 0 {
		t.Fatalf("the new replica copied the whole log (local log start %d)", start)
	}
	checkLogFrom0(t, ctx, first, topic, produced)
}
