package replication_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// TestTieredStorageUploadsProducerSnapshots: every uploaded segment carries the
// partition's producer state as of its end, as Kafka's producer snapshots: an idempotent
// producer's last sequence there is the segment's last offset (one record per batch,
// sequence 0 at offset 0), so that a replica rebuilding from the remote log could
// restore it.
func TestTieredStorageUploadsProducerSnapshots(t *testing.T) {
	store := objstore.NewMemory()
	b := brokertest.Start(t, tieredOptions(store),
		brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "snapshots"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"),
		"local.retention.bytes": kadm.StringPtr("1"),
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
	waitFor(t, "uploads", func() bool { return b.Replicas().Image().RemoteLog(topic, 0).CoveredEnd() > 100 })
	producers := b.Replicas().Replica(topic, 0).Producers()
	if len(producers) != 1 {
		t.Fatalf("%d producers, want the one idempotent producer", len(producers))
	}
	checkUploadedSnapshots(t, ctx, store, b.Replicas().Image().RemoteLog(topic, 0), producers[0].ProducerID)
}

// checkUploadedSnapshots checks that every segment of rl was uploaded with the producer
// state as of its end: the one idempotent producer id, whose last sequence is the
// segment's last offset (one record per batch, sequence 0 at offset 0).
func checkUploadedSnapshots(t *testing.T, ctx context.Context, store objstore.Store, rl *metadata.RemoteLog, id int64) {
	t.Helper()
	r := remotelog.NewReader(remotelog.Direct(store))
	for _, s := range rl.Segments {
		seg := remotelog.Segment{TopicID: s.TopicID, Partition: s.Partition, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset}
		if _, err := hex.Decode(seg.UploadID[:], []byte(s.UploadID)); err != nil {
			t.Fatal(err)
		}
		raw, err := r.ProducerSnapshot(ctx, seg)
		if err != nil {
			t.Fatal(err)
		}
		if raw == nil {
			t.Fatalf("segment %d-%d uploaded without a producer snapshot", s.BaseOffset, s.EndOffset)
		}
		snap, err := partition.DecodeProducerSnapshot(raw)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Offset != s.EndOffset+1 || len(snap.Producers) != 1 || snap.Producers[0].ProducerID != id ||
			int64(snap.Producers[0].LastSequence) != s.EndOffset {
			t.Fatalf("segment %d-%d: snapshot %+v, want producer %d at sequence %d as of %d", s.BaseOffset, s.EndOffset, snap, id, s.EndOffset, s.EndOffset+1)
		}
	}
}

// TestTieredStorageSnapshotsSurviveRestart: segments rolled before a broker restart, and
// uploaded only after it (the store was down), carry their producer snapshots too, as
// Kafka's BASE.snapshot files beside the segments do.
func TestTieredStorageSnapshotsSurviveRestart(t *testing.T) {
	store := &downStore{Store: objstore.NewMemory(), down: true}
	b := brokertest.Start(t, brokertest.WithOptions(func(o *broker.Options) {
		o.Replication = replication.Config{Logger: quiet(), RemoteStore: store, RemoteTaskInterval: 50 * time.Millisecond,
			RemoteRequestTimeout: 200 * time.Millisecond, RetentionCheckInterval: 50 * time.Millisecond}
		o.Protocol = protocol.Config{Logger: quiet()}
		o.ShutdownGrace = time.Second
	}), tieredController())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "snapshots-restart"
	createTieredTopic(t, ctx, kadm.NewClient(cl), topic, 1)
	const n = 200
	produced := produceValues(t, ctx, cl, topic, "s", 0, n)
	p := b.Replicas().Replica(topic, 0)
	if len(p.SealedSegments()) < 5 {
		t.Fatalf("fixture: %d closed segments", len(p.SealedSegments()))
	}
	producers := p.Producers()
	if len(producers) != 1 {
		t.Fatalf("%d producers, want the one idempotent producer", len(producers))
	}
	cl.Close()

	b = b.Restart()
	store.setDown(false)
	p = b.Replicas().Replica(topic, 0)
	waitFor(t, "uploads after the restart", func() bool {
		return b.Replicas().Image().RemoteLog(topic, 0).CoveredEnd() > n/2 && p.LocalLogStartOffset() > n/2
	})
	checkUploadedSnapshots(t, ctx, store, b.Replicas().Image().RemoteLog(topic, 0), producers[0].ProducerID)
	checkLogFrom0(t, ctx, b, topic, produced)
}

// TestTieredFollowerTakesRemoteProducerState: a replica added to a tiered partition
// starts from the tiered offset (KIP-1023) and copies only the leader's local log, yet
// knows, from the producer snapshot uploaded with the remote segment before its start,
// a producer whose batches are all remote, as Kafka's follower builds its auxiliary
// state: once it leads, that producer's retry is a duplicate, not a second copy.
func TestTieredFollowerTakesRemoteProducerState(t *testing.T) {
	const topic = "aux-state"
	tp := startTieredOneReplica(t, topic)
	ctx, cl, first, leader, other := tp.ctx, tp.cl, tp.first, tp.leader, tp.other
	leaderID := leader.ID

	// The old producer writes first, then another one fills the log past it.
	old := first.Client(kgo.ProducerLinger(0))
	const oldN = 30
	produceValues(t, ctx, old, topic, "o", 0, oldN)
	old.Close()
	lp := leader.Replicas().Replica(topic, 0)
	producers := lp.Producers()
	if len(producers) != 1 {
		t.Fatalf("%d producers, want the old one", len(producers))
	}
	oldID := producers[0].ProducerID
	produceValues(t, ctx, cl, topic, "n", oldN, 200)
	// Every closed segment uploaded and deleted locally, and the other broker's image
	// holding the remote log up to the leader's local log start (the follower finds the
	// snapshot there).
	waitFor(t, "the leader's local log all above the old producer and remote below", func() bool {
		start := lp.LocalLogStartOffset()
		return start > oldN && len(lp.SealedSegments()) == 0 && other.Replicas().Image().RemoteLog(topic, 0).CoveredEnd() >= start
	})

	// The new replica goes first, to be the preferred leader.
	tp.reassign(topic, other.ID, leaderID)
	op := other.Replicas().Replica(topic, 0)
	if start := op.LocalLogStartOffset(); start <= oldN {
		t.Fatalf("the new replica's local log starts at %d, not above the old producer's batches", start)
	}
	var known *partition.ProducerInfo
	for _, pi := range op.Producers() {
		if pi.ProducerID == oldID {
			known = &pi
		}
	}
	if known == nil || known.LastSequence != oldN-1 {
		t.Fatalf("the new replica knows the old producer as %+v, want its last sequence %d (producers %+v)", known, oldN-1, op.Producers())
	}

	// Once it leads, the old producer's retry of its last batch is recognized.
	if _, err := first.Store.ElectLeaders(ctx, true, map[string][]int32{topic: {0}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new replica leading", func() bool { return op.Role() == partition.RoleLeader })
	retry, err := records.Build(shalelog.Header{Magic: 2, ProducerID: oldID, ProducerEpoch: known.ProducerEpoch, BaseSequence: oldN - 1},
		shalelog.CodecNone, []records.Record{{Value: []byte("retry")}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, retry
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ocl := other.Client()
	defer ocl.Close()
	kresp, err := ocl.Broker(int(other.ID)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	pr := kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(pr.ErrorCode); err != nil || pr.BaseOffset != oldN-1 {
		t.Fatalf("the retry of the old producer's last batch: base offset %d, %v; want the original's, %d", pr.BaseOffset, err, oldN-1)
	}
}
