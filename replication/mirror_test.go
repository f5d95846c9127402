package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
)

// startFullCluster starts three brokers with the group and transaction coordinators.
func startFullCluster(t *testing.T) []*replica {
	t.Helper()
	coords := brokertest.WithOptions(func(o *broker.Options) {
		o.Groups = &group.Config{}
		o.Txn = &txn.Config{}
	})
	first := brokertest.Start(t, options(nil), coords)
	var rs []*replica
	for i := range 3 {
		id := int32(i + 1)
		b := first
		if id > 1 {
			b = first.AddBroker(id, options(nil), coords)
		}
		rs = append(rs, &replica{t: t, id: id, dir: b.Dir, addr: b.Addr, store: b.Store, b: b, m: b.Replicas()})
	}
	return rs
}

// linkStore is a cluster's LinkStore (the controller's BrokerClient).
func linkStore(t *testing.T, rs []*replica) metadata.LinkStore {
	t.Helper()
	ls, ok := rs[0].store.(metadata.LinkStore)
	if !ok {
		t.Fatal("the test store does not manage cluster links")
	}
	return ls
}

func addrsOf(rs []*replica) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.addr)
	}
	return strings.Join(out, ",")
}

// moveLeader makes broker to the leader of topic-idx: the replicas reordered with it
// first, then a preferred election.
func moveLeader(t *testing.T, ctx context.Context, rs []*replica, topic string, idx int32, to int32) {
	t.Helper()
	p := rs[0].store.Current().Partition(topic, idx)
	if p.Leader == to {
		return
	}
	order := []int32{to}
	for _, id := range p.Replicas {
		if id != to {
			order = append(order, id)
		}
	}
	errs, err := rs[0].store.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: topic, Partition: idx, Replicas: order}})
	if err != nil || errs[0] != nil {
		t.Fatalf("reorder %s-%d: %v %v", topic, idx, err, errs)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := rs[0].store.ElectLeaders(ctx, true, map[string][]int32{topic: {idx}})
		if err == nil && (res[topic][idx] == nil || errors.Is(res[topic][idx], kerr.ElectionNotNeeded)) {
			if cur := rs[0].store.Current().Partition(topic, idx); cur != nil && cur.Leader == to {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d did not become leader of %s-%d: %v %v", to, topic, idx, err, res)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rawLog reads a partition's log from its leader with Fetch, from offset 0 up to its
// high watermark: the batches' bytes, as a consumer receives them. It retries through
// leader changes.
func rawLog(t *testing.T, ctx context.Context, rs []*replica, topic string, idx int32) (data []byte, hw int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, hw, err := tryRawLog(ctx, rs, topic, idx)
		if err == nil {
			return data, hw
		}
		if time.Now().After(deadline) {
			t.Fatalf("reading %s-%d: %v", topic, idx, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tryRawLog(ctx context.Context, rs []*replica, topic string, idx int32) ([]byte, int64, error) {
	img := rs[0].store.Current()
	leader := img.Partition(topic, idx).Leader
	var r *replica
	for _, x := range rs {
		if x.id == leader {
			r = x
		}
	}
	if r == nil {
		return nil, 0, fmt.Errorf("no leader")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.WithLogger(nil))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	var data []byte
	off, hw := int64(0), int64(-1)
	for hw < 0 || off < hw {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 100, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, img.Topic(topic).ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = idx, off, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return nil, 0, err
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, 0, fmt.Errorf("at %d: %w", off, err)
		}
		hw = p.HighWatermark
		b := p.RecordBatches
		for len(b) >= 61 {
			var h kmsg.RecordBatch
			if err := h.ReadFrom(b); err != nil {
				break
			}
			size := int(h.Length) + 12
			data = append(data, b[:size]...)
			off = h.FirstOffset + int64(h.LastOffsetDelta) + 1
			b = b[size:]
		}
		if len(p.RecordBatches) == 0 && off < hw {
			return nil, 0, fmt.Errorf("nothing at %d below the high watermark %d", off, hw)
		}
	}
	return data, hw, nil
}

// waitSameLog waits until the destination's partition holds, below its high watermark,
// exactly the bytes of the source's, and fails as soon as it holds anything else.
func waitSameLog(t *testing.T, ctx context.Context, src, dst []*replica, topic string, idx int32) {
	t.Helper()
	waitLog(t, ctx, src, dst, topic, idx, true)
}

// waitLog is waitSameLog; without strict the destination may diverge on the way.
func waitLog(t *testing.T, ctx context.Context, src, dst []*replica, topic string, idx int32, strict bool) {
	t.Helper()
	want, wantHW := rawLog(t, ctx, src, topic, idx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, hw := rawLog(t, ctx, dst, topic, idx)
		if hw == wantHW && bytes.Equal(got, want) {
			return
		}
		if strict && (hw > wantHW || !bytes.HasPrefix(want, got)) {
			t.Fatalf("%s-%d: destination log (high watermark %d, %d bytes) is not a prefix of the source's (%d, %d bytes)",
				topic, idx, hw, len(got), wantHW, len(want))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-%d: destination at high watermark %d, source at %d", topic, idx, hw, wantHW)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func produceSome(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int, tag string) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "%s-%d", tag, i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s %d: %v", tag, i, err)
		}
	}
}

// TestMirrorCopiesAtTheSameOffsets: two clusters of three brokers, each on its own
// controller. A mirror topic on the destination copies a source topic byte for byte
// (idempotent batches, a committed and an aborted transaction, their markers), refuses
// producers, survives a leader change on each side, follows the source's partition
// count, and once promoted takes produce above every source epoch.
func TestMirrorCopiesAtTheSameOffsets(t *testing.T) {
	src := startFullCluster(t)
	dst := startFullCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	res := src[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "t", NumPartitions: -1, ReplicationFactor: -1,
		Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}}, Configs: map[string]string{"min.insync.replicas": "2", "retention.ms": "604800001"}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	pcl := src[0].b.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(nil))
	produceSome(t, ctx, pcl, "t", 40, "before")
	tcl := src[0].b.Client(kgo.TransactionalID("mirror-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(nil))
	for _, commit := range []bool{true, false} {
		if err := tcl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceSome(t, ctx, tcl, "t", 6, fmt.Sprintf("txn-%v", commit))
		if err := tcl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	ls := linkStore(t, dst)
	if err := ls.CreateClusterLink(ctx, "src", map[string]string{"bootstrap.servers": "", "no.such.config": "1"}, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("a link with bad configs: %v, want INVALID_CONFIG", err)
	}
	if err := ls.CreateClusterLink(ctx, "src", map[string]string{"bootstrap.servers": addrsOf(src)}, false); err != nil {
		t.Fatal(err)
	}
	if err := ls.CreateClusterLink(ctx, "src", map[string]string{"bootstrap.servers": addrsOf(src)}, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("a second link of that name: %v, want INVALID_REQUEST", err)
	}
	if err := ls.CreateMirrorTopic(ctx, metadata.MirrorSpec{Topic: "t", Link: "src", SourceTopic: "t", Partitions: 2, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "604800001"}}); err != nil {
		t.Fatal(err)
	}
	for i := range int32(2) {
		waitSameLog(t, ctx, src, dst, "t", i)
	}

	// Read-only until promoted, with an error that names the link.
	dcl := dst[0].b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(nil), kgo.RecordRetries(1))
	err := dcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("produce to a mirror topic: %v, want INVALID_REQUEST", err)
	}

	// A leader change on the source, then one on the destination, while producing.
	moveLeader(t, ctx, src, "t", 0, 3)
	produceSome(t, ctx, pcl, "t", 20, "after-source-move")
	moveLeader(t, ctx, dst, "t", 0, 2)
	moveLeader(t, ctx, dst, "t", 1, 1)
	produceSome(t, ctx, pcl, "t", 20, "after-destination-move")
	for i := range int32(2) {
		waitSameLog(t, ctx, src, dst, "t", i)
	}

	// The source grows: the mirror follows.
	if errs := src[0].store.CreatePartitions(ctx, []metadata.PartitionsSpec{{Topic: "t", Count: 3}}, false); errs[0] != nil {
		t.Fatal(errs[0])
	}
	dst[0].b.WaitApplied("the mirror's third partition", func(im *metadata.Image) bool {
		return im.Topic("t") != nil && len(im.Topic("t").Partitions) == 3
	})
	ncl := src[0].b.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(nil))
	if err := ncl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 2, Value: []byte("new partition")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitSameLog(t, ctx, src, dst, "t", 2)

	// Promotion: writable, and the destination's epochs start above the source's.
	srcEpoch := src[0].store.Current().Partition("t", 0).LeaderEpoch
	if errs := ls.StopMirrors(ctx, []string{"t"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var im *metadata.Image
	for _, r := range dst {
		im = r.b.WaitApplied("the promotion", func(im *metadata.Image) bool { return !im.Mirror("t").Active() })
		if lags := r.m.MirrorLags(); len(lags) != 0 {
			t.Fatalf("broker %d still runs copiers after promotion: %+v", r.id, lags)
		}
	}
	if e := im.Partition("t", 0).LeaderEpoch; e <= srcEpoch {
		t.Fatalf("destination leader epoch %d after promotion, not above the source's %d", e, srcEpoch)
	}
	before, _ := rawLog(t, ctx, dst, "t", 0)
	if err := dcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("after promotion")}).FirstErr(); err != nil {
		t.Fatalf("produce after promotion: %v", err)
	}
	after, _ := rawLog(t, ctx, dst, "t", 0)
	if !bytes.HasPrefix(after, before) || len(after) == len(before) {
		t.Fatal("promotion changed what the destination held")
	}
	// Mirroring stopped (no copier runs): a new source record does not arrive.
	produceSome(t, ctx, pcl, "t", 2, "after-promotion")
	if got, _ := rawLog(t, ctx, dst, "t", 0); !bytes.Equal(got, after) {
		t.Fatal("a promoted mirror still copies its source")
	}

	// Failback: the old source becomes a mirror of the promoted topic over a link the
	// other way. Its partition 0 took records the destination never had, at the offsets
	// where the destination took its own after promotion: it truncates to where the two
	// diverged, by leader epoch, and copies the destination's.
	back := linkStore(t, src)
	if err := back.CreateClusterLink(ctx, "back", map[string]string{"bootstrap.servers": addrsOf(dst)}, false); err != nil {
		t.Fatal(err)
	}
	if err := back.CreateMirrorTopic(ctx, metadata.MirrorSpec{Topic: "t", Link: "back", SourceTopic: "t", Partitions: 3, Existing: true}); err != nil {
		t.Fatal(err)
	}
	if err := dcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("after failback")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := range int32(3) {
		waitLog(t, ctx, dst, src, "t", i, i != 0)
	}
	err = pcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("produce to the old source, a mirror again: %v, want INVALID_REQUEST", err)
	}
}

// TestMirrorSyncsConsumerOffsets: the committed offsets of the source's groups that the
// link's filter selects reach the destination unchanged; a group with members on the
// destination keeps its own.
func TestMirrorSyncsConsumerOffsets(t *testing.T) {
	src := startFullCluster(t)
	dst := startFullCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if res := src[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "t", NumPartitions: 2, ReplicationFactor: 3}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	pcl := src[0].b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(nil))
	produceSome(t, ctx, pcl, "t", 20, "r")
	ls := linkStore(t, dst)
	if err := ls.CreateClusterLink(ctx, "src", map[string]string{"bootstrap.servers": addrsOf(src),
		"consumer.offset.sync.enable": "true", "consumer.offset.sync.ms": "100", "consumer.offset.group.filters": "g*,!gx"}, false); err != nil {
		t.Fatal(err)
	}
	if err := ls.CreateMirrorTopic(ctx, metadata.MirrorSpec{Topic: "t", Link: "src", SourceTopic: "t", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range int32(2) {
		waitSameLog(t, ctx, src, dst, "t", i)
	}

	// g2 is active on the destination, with a commit of its own.
	dadm := kadm.NewClient(dst[0].b.Client(kgo.WithLogger(nil)))
	member := dst[0].b.Client(kgo.ConsumerGroup("g2"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(), kgo.WithLogger(nil))
	for deadline := time.Now().Add(30 * time.Second); ; {
		gs, err := dadm.DescribeGroups(ctx, "g2")
		if err == nil && gs["g2"].State == "Stable" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("g2 did not become stable on the destination: %v %+v", err, gs)
		}
		member.PollRecords(ctx, 1) // joins and keeps the session alive
	}
	var commitErr error
	member.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: 1}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err == nil {
				err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
			commitErr = err
		})
	if commitErr != nil {
		t.Fatalf("g2's own commit: %v", commitErr)
	}

	sadm := kadm.NewClient(src[0].b.Client(kgo.WithLogger(nil)))
	commit := func(group string, off int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: off, LeaderEpoch: -1})
		os.Add(kadm.Offset{Topic: "t", Partition: 1, At: off + 1, LeaderEpoch: -1})
		if res, err := sadm.CommitOffsets(ctx, group, os); err != nil || res.Error() != nil {
			t.Fatalf("commit %s on the source: %v %v", group, err, res.Error())
		}
	}
	commit("g2", 7)
	commit("gx", 3)
	commit("g1", 5)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := dadm.FetchOffsets(ctx, "g1")
		if err == nil {
			a, _ := got.Lookup("t", 0)
			b, _ := got.Lookup("t", 1)
			if a.At == 5 && b.At == 6 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("g1's offsets on the destination: %v %+v", err, got)
		}
	}
	// The pass that copied g1 saw g2's commit first: it left the active group alone.
	got, err := dadm.FetchOffsets(ctx, "g2")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := got.Lookup("t", 0); o.At != 1 {
		t.Fatalf("active group g2 overwritten on the destination: %+v", got)
	}
	if got, err := dadm.FetchOffsets(ctx, "gx"); err != nil || len(got) != 0 {
		t.Fatalf("excluded group gx synced: %v %+v", err, got)
	}
}

// TestMirrorResyncsTopicConfigs: the source topic's configs that matter to consumers are
// copied to the mirror at creation and again whenever they change on the source (every
// topic.config.sync.ms): set, changed and removed; the destination's other configs stay.
func TestMirrorResyncsTopicConfigs(t *testing.T) {
	src := startFullCluster(t)
	dst := startFullCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res := src[0].store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "c", NumPartitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "604800001", "max.message.bytes": "200000", "min.insync.replicas": "2"}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	ls := linkStore(t, dst)
	if err := ls.CreateClusterLink(ctx, "src", map[string]string{"bootstrap.servers": addrsOf(src), "topic.config.sync.ms": "200"}, false); err != nil {
		t.Fatal(err)
	}
	// Created with a stale copy (as if the source changed right after creation read it).
	if err := ls.CreateMirrorTopic(ctx, metadata.MirrorSpec{Topic: "c", Link: "src", SourceTopic: "c", Partitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "1000", "segment.ms": "3600000"}}); err != nil {
		t.Fatal(err)
	}
	// The destination's own, not one that a mirror copies: the sync leaves it.
	two := "2"
	if err := dst[0].store.AlterTopicConfigs(ctx, "c", []metadata.ConfigOp{{Name: "min.insync.replicas", Value: &two, Op: metadata.ConfigSet}}, true, false); err != nil {
		t.Fatal(err)
	}
	same := func(what string, want map[string]string) {
		t.Helper()
		for _, r := range dst {
			// Not brokertest's WaitApplied, whose 10 s can be short on a loaded machine.
			ok := r.m.WaitApplied(ctx, func(im *metadata.Image) bool {
				tp := im.Topic("c")
				if tp == nil || tp.Configs["min.insync.replicas"] != "2" {
					return false
				}
				for _, k := range metadata.MirroredConfigs {
					if tp.Configs[k] != want[k] {
						return false
					}
				}
				return true
			})
			if !ok {
				t.Fatalf("broker %d: %s not applied: %v", r.id, what, r.m.Image().Topic("c").Configs)
			}
		}
	}
	same("the source's configs", map[string]string{"retention.ms": "604800001", "max.message.bytes": "200000"})

	week, compact := "604800002", "compact"
	if err := src[0].store.AlterTopicConfigs(ctx, "c", []metadata.ConfigOp{
		{Name: "retention.ms", Value: &week, Op: metadata.ConfigSet},
		{Name: "cleanup.policy", Value: &compact, Op: metadata.ConfigSet},
		{Name: "max.message.bytes", Op: metadata.ConfigDelete},
	}, true, false); err != nil {
		t.Fatal(err)
	}
	same("the source's changed configs", map[string]string{"retention.ms": week, "cleanup.policy": compact})
}
