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

// txnHarness is an FSM with two brokers, one offsets partition (so every id and group
// has the same coordinator) and topic t.
func txnHarness(t *testing.T) (*fsmHarness, int32, int32) {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	h.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 1, ClusterId: "c", OffsetsTopicNumPartitions: 1}}})
	h.mustCreate("t", 2, 1)
	co := h.f.img.Coordinators[0]
	if co.Broker < 0 {
		t.Fatal("no coordinator")
	}
	return h, co.Broker, co.Epoch
}

func (h *fsmHarness) txnState(broker, epoch int32, st *pb.TxnState) applyResult {
	h.t.Helper()
	return h.apply(&pb.Record{Record: &pb.Record_TxnState{TxnState: &pb.TxnStateRecord{CoordinatorId: broker, CoordinatorEpoch: epoch, State: st}}})
}

func (h *fsmHarness) txnOffsets(broker, epoch int32, r *pb.TxnOffsetCommitRecord) applyResult {
	h.t.Helper()
	r.CoordinatorId, r.CoordinatorEpoch = broker, epoch
	return h.apply(&pb.Record{Record: &pb.Record_TxnOffsetCommit{TxnOffsetCommit: r}})
}

func ongoing(epoch int32) *pb.TxnState {
	return &pb.TxnState{TransactionalId: "tx", ProducerId: 5, ProducerEpoch: epoch, TimeoutMs: 1000,
		Status: pb.TxnStatus_TXN_STATUS_ONGOING, Groups: []string{"g"},
		Partitions: []*pb.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}, StartMs: 10, LastUpdateMs: 10}
}

func withStatus(st *pb.TxnState, s pb.TxnStatus) *pb.TxnState {
	st = proto.Clone(st).(*pb.TxnState)
	st.Status = s
	st.LastUpdateMs = 99
	return st
}

func TestTxnStateIsFencedByCoordinatorEpoch(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	other := 3 - broker
	wantKafkaErr(t, h.txnState(other, epoch, ongoing(0)).err, kerr.NotCoordinator)
	wantKafkaErr(t, h.txnState(broker, epoch+1, ongoing(0)).err, kerr.NotCoordinator)
	if res := h.txnState(broker, epoch, ongoing(0)); res.err != nil {
		t.Fatal(res.err)
	}
	if got := h.f.loadTxns([]int32{0}, false); len(got) != 1 || got[0].Status != pb.TxnStatus_TXN_STATUS_ONGOING {
		t.Fatalf("loaded %+v", got)
	}
	// The coordinator's broker dies: the partition moves and the old coordinator is
	// fenced.
	h.fence(broker)
	co := h.f.img.Coordinators[0]
	if co.Broker != other || co.Epoch <= epoch {
		t.Fatalf("coordinator after the fence: %+v", co)
	}
	wantKafkaErr(t, h.txnState(broker, epoch, withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_PREPARE_ABORT)).err, kerr.NotCoordinator)
	if res := h.txnState(co.Broker, co.Epoch, withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_PREPARE_ABORT)); res.err != nil {
		t.Fatal(res.err)
	}
}

func TestTxnOffsetsBecomeVisibleOnlyOnCommit(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	h.txnState(broker, epoch, ongoing(0))
	commit := &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: 5, ProducerEpoch: 0, Group: "g",
		Offsets: []*pb.OffsetEntry{{Topic: "t", Partition: 1, Offset: 42, Metadata: "m"}}}
	if res := h.txnOffsets(broker, epoch, commit); res.err != nil {
		t.Fatal(res.err)
	}
	if got := h.f.fetchOffsets("g", nil); len(got) != 0 {
		t.Fatalf("pending offsets visible before the commit: %+v", got)
	}
	if p := h.f.pendingTxnOffsets("g"); len(p) != 1 || len(p["t"]) != 1 || p["t"][0] != 1 {
		t.Fatalf("pending partitions %v, want t-1", p)
	}
	// The pending offsets survive the transitions up to the commit.
	h.txnState(broker, epoch, withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_PREPARE_COMMIT))
	if got := h.f.fetchOffsets("g", nil); len(got) != 0 {
		t.Fatalf("pending offsets visible in PrepareCommit: %+v", got)
	}
	if got := h.f.loadTxns(nil, true); len(got) != 1 || len(got[0].PendingOffsets) != 1 {
		t.Fatalf("a new coordinator would not load the pending offsets: %+v", got)
	}
	complete := withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT)
	complete.Partitions, complete.Groups = nil, nil
	h.txnState(broker, epoch, complete)
	got := h.f.fetchOffsets("g", nil)
	if len(got) != 1 || got[0].Offset != 42 || got[0].Metadata != "m" || got[0].CommitTime.UnixMilli() != 99 {
		t.Fatalf("offsets after the commit: %+v", got)
	}
	if p := h.f.pendingTxnOffsets("g"); len(p) != 0 {
		t.Fatalf("pending partitions %v after the commit", p)
	}
	if st := h.f.loadTxns(nil, true); len(st[0].PendingOffsets) != 0 {
		t.Fatalf("pending offsets kept after the commit: %+v", st[0].PendingOffsets)
	}
}

func TestTxnOffsetsDroppedOnAbort(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	h.txnState(broker, epoch, ongoing(0))
	h.txnOffsets(broker, epoch, &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: 5, Group: "g",
		Offsets: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 7}}})
	h.txnState(broker, epoch, withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_PREPARE_ABORT))
	h.txnState(broker, epoch, withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_COMPLETE_ABORT))
	if got := h.f.fetchOffsets("g", nil); len(got) != 0 {
		t.Fatalf("aborted offsets visible: %+v", got)
	}
	// A commit of a later transaction does not resurrect them.
	h.txnState(broker, epoch, ongoing(0))
	h.txnState(broker, epoch, withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT))
	if got := h.f.fetchOffsets("g", nil); len(got) != 0 {
		t.Fatalf("aborted offsets committed later: %+v", got)
	}
}

func TestTxnOffsetCommitChecksTheTransaction(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	h.txnState(broker, epoch, ongoing(3))
	rec := func(pid int64, pepoch int32, group, topic string) *pb.TxnOffsetCommitRecord {
		return &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: pid, ProducerEpoch: pepoch, Group: group,
			Offsets: []*pb.OffsetEntry{{Topic: topic, Partition: 0, Offset: 1}}}
	}
	wantKafkaErr(t, h.txnOffsets(broker, epoch, rec(6, 3, "g", "t")).err, kerr.InvalidProducerIDMapping)
	wantKafkaErr(t, h.txnOffsets(broker, epoch, rec(5, 2, "g", "t")).err, kerr.ProducerFenced)
	wantKafkaErr(t, h.txnOffsets(broker, epoch, rec(5, 4, "g", "t")).err, kerr.InvalidProducerEpoch)
	wantKafkaErr(t, h.txnOffsets(broker, epoch, rec(5, 3, "other", "t")).err, kerr.InvalidTxnState)
	wantKafkaErr(t, h.txnOffsets(broker, epoch, rec(5, 3, "g", "nope")).err, kerr.UnknownTopicOrPartition)
	wantKafkaErr(t, h.txnOffsets(3-broker, epoch, rec(5, 3, "g", "t")).err, kerr.NotCoordinator)
	if res := h.txnOffsets(broker, epoch, rec(5, 3, "g", "t")); res.err != nil {
		t.Fatal(res.err)
	}
}

func TestTxnStateSnapshotRestore(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	h.txnState(broker, epoch, ongoing(0))
	h.txnOffsets(broker, epoch, &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: 5, Group: "g",
		Offsets: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 7}}})
	second := ongoing(1)
	second.TransactionalId = "tx2"
	h.txnState(broker, epoch, second)
	data := snapshotBytes(t, h.f)
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if len(g.txns) != 2 || !proto.Equal(g.txns["tx"], h.f.txns["tx"]) || !proto.Equal(g.txns["tx2"], h.f.txns["tx2"]) {
		t.Fatalf("restored transactions differ:\n%v\n%v", g.txns, h.f.txns)
	}
	if !bytes.Equal(snapshotBytes(t, g), data) {
		t.Fatal("snapshot of the restored state differs")
	}
	// The restored FSM completes the commit with the pending offsets.
	complete := withStatus(ongoing(0), pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT)
	raw, _ := proto.Marshal(&pb.Record{Record: &pb.Record_TxnState{TxnState: &pb.TxnStateRecord{CoordinatorId: broker, CoordinatorEpoch: epoch, State: complete}}})
	h.txnState(broker, epoch, complete)
	g.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: raw})
	if !reflect.DeepEqual(g.fetchOffsets("g", nil), h.f.fetchOffsets("g", nil)) || len(g.fetchOffsets("g", nil)) != 1 {
		t.Fatalf("restored FSM committed %+v, original %+v", g.fetchOffsets("g", nil), h.f.fetchOffsets("g", nil))
	}
	// A removal forgets the id.
	h.apply(&pb.Record{Record: &pb.Record_TxnState{TxnState: &pb.TxnStateRecord{CoordinatorId: broker, CoordinatorEpoch: epoch,
		State: &pb.TxnState{TransactionalId: "tx2"}, Remove: true}}})
	if _, ok := h.f.txns["tx2"]; ok {
		t.Fatal("removed id kept")
	}
}

// TestTxnOffsetsSurviveTheV2EpochBump: under transactions v2 (KIP-890 part 2) the
// PrepareCommit record bumps the producer epoch and, once the epochs are exhausted,
// CompleteCommit moves the producer to the next producer id; the pending offsets are
// still the transaction's and are committed. A v1 record that changes the epoch (a
// fencing abort) drops them as before.
func TestTxnOffsetsSurviveTheV2EpochBump(t *testing.T) {
	for _, exhausted := range []bool{false, true} {
		h, broker, epoch := txnHarness(t)
		h.txnState(broker, epoch, ongoing(3))
		if res := h.txnOffsets(broker, epoch, &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: 5, ProducerEpoch: 3, Group: "g",
			Offsets: []*pb.OffsetEntry{{Topic: "t", Partition: 1, Offset: 42}}}); res.err != nil {
			t.Fatal(res.err)
		}
		prepare := withStatus(ongoing(4), pb.TxnStatus_TXN_STATUS_PREPARE_COMMIT)
		prepare.LastProducerId, prepare.LastProducerEpoch, prepare.TxnVersion = 5, 3, 2
		if exhausted {
			next := int64(77)
			prepare.NextProducerId = &next
		}
		if res := h.txnState(broker, epoch, prepare); res.err != nil {
			t.Fatal(res.err)
		}
		if got := h.f.loadTxns(nil, true); len(got) != 1 || len(got[0].PendingOffsets) != 1 || got[0].GetNextProducerId() != prepare.GetNextProducerId() {
			t.Fatalf("exhausted %v: PrepareCommit at the bumped epoch lost the pending offsets: %+v", exhausted, got)
		}
		complete := withStatus(prepare, pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT)
		complete.Partitions, complete.Groups, complete.NextProducerId = nil, nil, nil
		if exhausted {
			complete.ProducerId, complete.ProducerEpoch = 77, 0
		}
		if res := h.txnState(broker, epoch, complete); res.err != nil {
			t.Fatal(res.err)
		}
		if got := h.f.fetchOffsets("g", nil); len(got) != 1 || got[0].Offset != 42 {
			t.Fatalf("exhausted %v: offsets after the commit: %+v", exhausted, got)
		}
	}

	// Transaction version 0: an epoch change between Ongoing and PrepareCommit is not
	// the same transaction's.
	h, broker, epoch := txnHarness(t)
	h.txnState(broker, epoch, ongoing(3))
	h.txnOffsets(broker, epoch, &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: 5, ProducerEpoch: 3, Group: "g",
		Offsets: []*pb.OffsetEntry{{Topic: "t", Partition: 1, Offset: 42}}})
	prepare := withStatus(ongoing(4), pb.TxnStatus_TXN_STATUS_PREPARE_COMMIT)
	prepare.LastProducerId, prepare.LastProducerEpoch = 5, 3
	h.txnState(broker, epoch, prepare)
	h.txnState(broker, epoch, withStatus(prepare, pb.TxnStatus_TXN_STATUS_COMPLETE_COMMIT))
	if got := h.f.fetchOffsets("g", nil); len(got) != 0 {
		t.Fatalf("v1: offsets of another epoch committed: %+v", got)
	}
}

// TestTxnOffsetCommitAcceptsTheGroupsOffsetsPartition: TxnOffsetCommit v5 adds a group on
// a remote transaction coordinator as its __consumer_offsets partition (as Kafka does);
// the FSM accepts the commit for a transaction holding that partition, not another one.
func TestTxnOffsetCommitAcceptsTheGroupsOffsetsPartition(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	st := ongoing(0)
	st.Groups = nil
	st.Partitions = append(st.Partitions, &pb.TopicPartitions{Topic: metadata.OffsetsTopic, Partitions: []int32{metadata.OffsetsPartition("g", 1)}})
	if res := h.txnState(broker, epoch, st); res.err != nil {
		t.Fatal(res.err)
	}
	rec := func(group string) *pb.TxnOffsetCommitRecord {
		return &pb.TxnOffsetCommitRecord{TransactionalId: "tx", ProducerId: 5, Group: group,
			Offsets: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 7}}}
	}
	if res := h.txnOffsets(broker, epoch, rec("g")); res.err != nil {
		t.Fatalf("commit for the group whose offsets partition is in the transaction: %v", res.err)
	}
	// With one offsets partition every group maps to it: a transaction without it refuses.
	st.Partitions = st.Partitions[:1]
	h.txnState(broker, epoch, withStatus(st, pb.TxnStatus_TXN_STATUS_PREPARE_ABORT))
	h.txnState(broker, epoch, withStatus(st, pb.TxnStatus_TXN_STATUS_COMPLETE_ABORT))
	h.txnState(broker, epoch, st)
	wantKafkaErr(t, h.txnOffsets(broker, epoch, rec("g")).err, kerr.InvalidTxnState)
}
