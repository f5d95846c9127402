package controller

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func remoteRec(topic string, id []byte, p, broker, epoch int32) *pb.RemoteLogRecord {
	return &pb.RemoteLogRecord{Topic: topic, TopicId: id, Partition: p, Broker: broker, LeaderEpoch: epoch}
}

func remoteCommit(r *pb.RemoteLogRecord, upload string, base, end, size int64, epochs ...*pb.RemoteEpochStart) *pb.Record {
	r.Op = &pb.RemoteLogRecord_Commit{Commit: &pb.RemoteLogSegment{UploadId: upload, BaseOffset: base, EndOffset: end,
		SizeBytes: size, MaxTimestampMs: 1000 + end, Epochs: epochs}}
	return &pb.Record{Record: &pb.Record_RemoteLog{RemoteLog: r}}
}

func remoteDeleteStart(r *pb.RemoteLogRecord, logStart int64, ids ...string) *pb.Record {
	r.Op = &pb.RemoteLogRecord_DeleteStart{DeleteStart: &pb.RemoteDeleteStart{UploadIds: ids, LogStart: logStart}}
	return &pb.Record{Record: &pb.Record_RemoteLog{RemoteLog: r}}
}

func remoteDeleteFinish(r *pb.RemoteLogRecord, ids ...string) *pb.Record {
	r.Op = &pb.RemoteLogRecord_DeleteFinish{DeleteFinish: &pb.RemoteDeleteFinish{UploadIds: ids}}
	return &pb.Record{Record: &pb.Record_RemoteLog{RemoteLog: r}}
}

func uploadIDs(segs []metadata.RemoteSegment) []string {
	var out []string
	for _, s := range segs {
		out = append(out, s.UploadID)
	}
	return out
}

// Commits come only from the partition's current leader at its epoch, a resend of a
// commit is accepted without a second copy, overlapping segments are refused, and
// deleting is two-phase; the image's summary follows, and a snapshot carries it.
func TestRemoteLogRecords(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	tp := h.createTopic(&pb.NewTopic{Name: "tiered", NumPartitions: 1, ReplicationFactor: 2, Seed: 7,
		Configs: map[string]string{"remote.storage.enable": "true"}})
	if tp.err != nil {
		t.Fatal(tp.err)
	}
	plain := h.mustCreate("plain", 1, 1)
	id := tp.topic.ID[:]
	p := h.part("tiered", 0)
	leader, other, epoch := p.Leader, p.Replicas[0]+p.Replicas[1]-p.Leader, p.LeaderEpoch
	rec := func() *pb.RemoteLogRecord { return remoteRec("tiered", id, 0, leader, epoch) }

	wantNoErr(t, h.apply(remoteCommit(rec(), "u1", 0, 99, 1000, &pb.RemoteEpochStart{Epoch: 0, StartOffset: 0})).err)
	// The answer was lost and the leader sends the same commit again: one copy.
	wantNoErr(t, h.apply(remoteCommit(rec(), "u1", 0, 99, 1000, &pb.RemoteEpochStart{Epoch: 0, StartOffset: 0})).err)
	wantNoErr(t, h.apply(remoteCommit(rec(), "u2", 100, 149, 500)).err)
	rl := h.f.img.RemoteLog("tiered", 0)
	if rl == nil || len(rl.Segments) != 2 || rl.StartOffset != 0 || rl.HighestOffset != 149 || rl.SizeBytes != 1500 {
		t.Fatalf("remote log after two commits: %+v", rl)
	}
	if s, ok := rl.Find(120); !ok || s.UploadID != "u2" || s.Broker != leader || s.LeaderEpoch != epoch {
		t.Fatalf("Find(120) = %+v, %v", s, ok)
	}

	// The same upload id for another range, and ranges that overlap a committed
	// segment, would count offsets twice.
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u1", 0, 120, 1000)).err, kerr.InvalidRequest)
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u3", 149, 200, 10)).err, kerr.InvalidRequest)
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u3", 50, 60, 10)).err, kerr.InvalidRequest)
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u3", 160, 150, 10)).err, kerr.InvalidRequest)
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u3", 150, 160, 10, &pb.RemoteEpochStart{Epoch: 0, StartOffset: 151})).err, kerr.InvalidRequest)

	// Fencing: another broker, an older or a newer epoch, another topic id, a topic
	// without remote storage.
	wantKafkaErr(t, h.apply(remoteCommit(remoteRec("tiered", id, 0, other, epoch), "u3", 150, 160, 10)).err, kerr.NotLeaderForPartition)
	wantKafkaErr(t, h.apply(remoteCommit(remoteRec("tiered", id, 0, leader, epoch+1), "u3", 150, 160, 10)).err, kerr.UnknownLeaderEpoch)
	wantKafkaErr(t, h.apply(remoteCommit(remoteRec("tiered", topicID(99), 0, leader, epoch), "u3", 150, 160, 10)).err, kerr.UnknownTopicID)
	wantKafkaErr(t, h.apply(remoteCommit(remoteRec("plain", plain.ID[:], 0, plain.Partitions[0].Leader, 0), "u3", 0, 10, 10)).err, kerr.InvalidRequest)
	wantKafkaErr(t, h.apply(remoteCommit(remoteRec("tiered", id, 1, leader, epoch), "u3", 0, 10, 10)).err, kerr.UnknownTopicOrPartition)

	// The leader moves: the deposed leader's late commit is fenced, the new one's goes in.
	h.fence(leader)
	np := h.part("tiered", 0)
	if np.Leader != other || np.LeaderEpoch <= epoch {
		t.Fatalf("leader did not move: %+v", np)
	}
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u3", 150, 160, 10)).err, kerr.FencedLeaderEpoch)
	leader, epoch = np.Leader, np.LeaderEpoch
	wantNoErr(t, h.apply(remoteCommit(rec(), "u4", 150, 199, 300,
		&pb.RemoteEpochStart{Epoch: 0, StartOffset: 150}, &pb.RemoteEpochStart{Epoch: epoch, StartOffset: 180})).err)
	rl = h.f.img.RemoteLog("tiered", 0)
	if e, end, ok := rl.EpochEnd(0); !ok || e != 0 || end != 180 {
		t.Fatalf("EpochEnd(0) = %d, %d, %v", e, end, ok)
	}
	if e, end, ok := rl.EpochEnd(epoch); !ok || e != epoch || end != 200 {
		t.Fatalf("EpochEnd(%d) = %d, %d, %v", epoch, e, end, ok)
	}

	// Deleting: only a prefix of the committed segments, and a finish only after a start.
	wantKafkaErr(t, h.apply(remoteDeleteStart(rec(), 0, "u2")).err, kerr.InvalidRequest)
	wantKafkaErr(t, h.apply(remoteDeleteFinish(rec(), "u1")).err, kerr.InvalidRequest)
	wantNoErr(t, h.apply(remoteDeleteStart(rec(), 0, "u1")).err)
	wantNoErr(t, h.apply(remoteDeleteStart(rec(), 0, "u1")).err) // resent
	rl = h.f.img.RemoteLog("tiered", 0)
	if len(rl.Segments) != 2 || len(rl.Deleting) != 1 || rl.StartOffset != 100 || rl.SizeBytes != 800 || rl.LogStart != 100 {
		t.Fatalf("after starting to delete u1: %+v", rl)
	}
	if _, ok := rl.Find(50); ok {
		t.Fatal("a deleting segment is still found")
	}
	// A commit of the deleted range again (a very late resend) cannot bring it back.
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u5", 0, 99, 1000)).err, kerr.OffsetOutOfRange)
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u5", 50, 120, 1000)).err, kerr.InvalidRequest)
	// DeleteRecords moves the start into a segment without deleting it.
	wantNoErr(t, h.apply(remoteDeleteStart(rec(), 120)).err)
	if rl = h.f.img.RemoteLog("tiered", 0); rl.StartOffset != 120 || len(rl.Segments) != 2 {
		t.Fatalf("after moving the start: %+v", rl)
	}
	wantNoErr(t, h.apply(remoteDeleteFinish(rec(), "u1")).err)
	wantNoErr(t, h.apply(remoteDeleteFinish(rec(), "u1")).err) // resent
	rl = h.f.img.RemoteLog("tiered", 0)
	if got := uploadIDs(rl.Segments); !reflect.DeepEqual(got, []string{"u2", "u4"}) || len(rl.Deleting) != 0 || rl.HighestOffset != 199 || rl.SizeBytes != 800 {
		t.Fatalf("after finishing u1: %v %+v", got, rl)
	}
	if rl.CoveredEnd() != 200 {
		t.Fatalf("covered end %d, want 200", rl.CoveredEnd())
	}
	// DeleteRecords past the remote log (into the local one) moves the covered end: the
	// local segments below it may go, and uploads go on from it.
	wantNoErr(t, h.apply(remoteDeleteStart(rec(), 250, "u2", "u4")).err)
	if rl = h.f.img.RemoteLog("tiered", 0); rl.CoveredEnd() != 250 || rl.HighestOffset != -1 || rl.StartOffset != -1 {
		t.Fatalf("after deleting past the remote log: %+v", rl)
	}
	wantKafkaErr(t, h.apply(remoteCommit(rec(), "u6", 200, 249, 10)).err, kerr.OffsetOutOfRange)
	wantNoErr(t, h.apply(remoteCommit(rec(), "u6", 240, 260, 10)).err)
	if rl = h.f.img.RemoteLog("tiered", 0); rl.StartOffset != 250 || rl.HighestOffset != 260 || rl.CoveredEnd() != 261 {
		t.Fatalf("after a commit across the log start: %+v", rl)
	}
	wantNoErr(t, h.apply(remoteDeleteFinish(rec(), "u2", "u4")).err)

	// A snapshot carries the remote logs; a broker rebuilding from image chunks gets the
	// same.
	want := h.f.img.RemoteLogs
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.RemoteLogs, want) {
		t.Fatalf("restored %+v, want %+v", g.img.RemoteLogs, want)
	}
	var a imageAssembler
	var rebuilt *metadata.Image
	for _, c := range imageChunks(h.f.img, nil, 1) {
		if rebuilt, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if rebuilt == nil || !reflect.DeepEqual(rebuilt.RemoteLogs, want) {
		t.Fatalf("image chunks rebuilt %+v, want %+v", rebuilt, want)
	}

	// Deleting the topic drops its remote logs; a topic of the same name starts afresh.
	h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{{Name: "tiered"}}}}})
	if rl := h.f.img.RemoteLog("tiered", 0); rl != nil {
		t.Fatalf("remote log of a deleted topic kept: %+v", rl)
	}
}

func remotePurged(id []byte, p, broker int32) *pb.Record {
	return &pb.Record{Record: &pb.Record_RemoteLog{RemoteLog: &pb.RemoteLogRecord{TopicId: id, Partition: p, Broker: broker,
		Op: &pb.RemoteLogRecord_Purged{Purged: &pb.RemotePurged{}}}}}
}

// Deleting a tiered topic keeps, in the same record, a purge entry for each of its
// partitions (uploaded or not), by topic id, which survives a topic recreated under the
// same name, snapshots and image chunks; a broker's purged op drops it, idempotently and
// from any broker. An untiered topic leaves none.
func TestRemotePurgeRecords(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	tp := h.createTopic(&pb.NewTopic{Name: "tiered", NumPartitions: 2, ReplicationFactor: 2, Seed: 7,
		Configs: map[string]string{"remote.storage.enable": "true"}})
	if tp.err != nil {
		t.Fatal(tp.err)
	}
	plain := h.mustCreate("plain", 1, 1)
	id := tp.topic.ID
	p0, p1 := h.part("tiered", 0), h.part("tiered", 1)
	wantNoErr(t, h.apply(remoteCommit(remoteRec("tiered", id[:], 0, p0.Leader, p0.LeaderEpoch), "u1", 0, 99, 1000)).err)

	// A purged op for a partition that has no entry (a late resend) is accepted and
	// changes nothing.
	before := h.f.img
	wantNoErr(t, h.apply(remotePurged(id[:], 0, 1)).err)
	if h.f.img != before || h.f.img.RemotePurges != nil {
		t.Fatalf("purged op before any deletion changed the image: %+v", h.f.img.RemotePurges)
	}

	res := h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{
		Topics: []*pb.TopicRef{{Name: "tiered"}, {Name: "plain"}}}}})
	for _, err := range res.value.([]error) {
		wantNoErr(t, err)
	}
	want := metadata.RemotePurges{
		{TopicID: id, Partition: 0}: {Topic: "tiered", TopicID: id, Partition: 0, Leader: p0.Leader},
		{TopicID: id, Partition: 1}: {Topic: "tiered", TopicID: id, Partition: 1, Leader: p1.Leader},
	}
	if !reflect.DeepEqual(h.f.img.RemotePurges, want) {
		t.Fatalf("purges after deleting the topics: %+v, want %+v", h.f.img.RemotePurges, want)
	}
	if h.f.img.RemoteLog("tiered", 0) != nil || h.f.img.Topic("plain") != nil || plain == nil {
		t.Fatal("the deleted topics' state is kept")
	}
	// The leader at deletion purges while it is alive; fenced, the lowest live broker.
	if got := h.f.img.RemotePurger(want[metadata.RemotePurgeKey{TopicID: id, Partition: 0}]); got != p0.Leader {
		t.Fatalf("purger %d, want the leader %d", got, p0.Leader)
	}

	// A new topic of the same name: the old one's purges stay, its own remote log is
	// empty.
	again := h.createTopic(&pb.NewTopic{Name: "tiered", NumPartitions: 1, ReplicationFactor: 1, Seed: 7,
		Configs: map[string]string{"remote.storage.enable": "true"}})
	if again.err != nil || again.topic.ID == id {
		t.Fatalf("recreating the topic: %v", again.err)
	}
	if !reflect.DeepEqual(h.f.img.RemotePurges, want) || h.f.img.RemoteLog("tiered", 0) != nil {
		t.Fatalf("after recreating the topic: purges %+v, remote log %+v", h.f.img.RemotePurges, h.f.img.RemoteLog("tiered", 0))
	}

	// A snapshot carries the purges; a restored FSM carries on as the original; a broker
	// rebuilding from image chunks gets the same.
	data := snapshotBytes(t, h.f)
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.RemotePurges, want) {
		t.Fatalf("restored purges %+v, want %+v", g.img.RemotePurges, want)
	}
	if !bytes.Equal(snapshotBytes(t, g), data) {
		t.Fatal("snapshot of the restored state differs")
	}
	var a imageAssembler
	var rebuilt *metadata.Image
	var err error
	for _, c := range imageChunks(h.f.img, nil, 1) {
		if rebuilt, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if rebuilt == nil || !reflect.DeepEqual(rebuilt.RemotePurges, want) {
		t.Fatalf("image chunks rebuilt %+v, want %+v", rebuilt, want)
	}

	// Purged from a broker that never led the partition: the entry goes, on the
	// original and on the restored FSM alike; a duplicate changes nothing.
	other := int32(6) - p0.Replicas[0] - p0.Replicas[1]
	rec := remotePurged(id[:], 0, other)
	wantNoErr(t, h.apply(rec).err)
	raw, _ := proto.Marshal(rec)
	if res, _ := g.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: raw}).(applyResult); res.err != nil {
		t.Fatal(res.err)
	}
	delete(want, metadata.RemotePurgeKey{TopicID: id, Partition: 0})
	if !reflect.DeepEqual(h.f.img.RemotePurges, want) || !reflect.DeepEqual(g.img.RemotePurges, want) {
		t.Fatalf("after purging partition 0: %+v and restored %+v, want %+v", h.f.img.RemotePurges, g.img.RemotePurges, want)
	}
	before = h.f.img
	wantNoErr(t, h.apply(remotePurged(id[:], 0, p0.Leader)).err)
	if h.f.img != before {
		t.Fatal("a duplicate purged op changed the image")
	}
	wantKafkaErr(t, h.apply(remotePurged([]byte{1, 2}, 1, 1)).err, kerr.InvalidRequest)
	wantNoErr(t, h.apply(remotePurged(id[:], 1, 1)).err)
	if h.f.img.RemotePurges != nil {
		t.Fatalf("purges left after both partitions: %+v", h.f.img.RemotePurges)
	}
}

// A tiered topic whose remote storage setting comes from nothing but its own config and
// that never uploaded still gets its purges: failed uploads may have left objects no
// remote log names.
func TestRemotePurgeWithoutUploads(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	tp := h.createTopic(&pb.NewTopic{Name: "tiered", NumPartitions: 3, ReplicationFactor: 1, Seed: 7,
		Configs: map[string]string{"remote.storage.enable": "true"}})
	if tp.err != nil {
		t.Fatal(tp.err)
	}
	h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{{Name: "tiered"}}}}})
	if n := len(h.f.img.RemotePurges); n != 3 {
		t.Fatalf("%d purges, want 3: %+v", n, h.f.img.RemotePurges)
	}
}
