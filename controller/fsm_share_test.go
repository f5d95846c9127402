package controller

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	pb "github.com/shalelog/shale/controller/proto"
)

func shareOps(ops ...*pb.ShareStateOp) *pb.Record {
	return &pb.Record{Record: &pb.Record_ShareStateOps{ShareStateOps: &pb.ShareStateOpsRecord{Ops: ops}}}
}

func shareState(group, topic string, p int32, spso int64, stateEpoch, leaderEpoch int32, batches ...*pb.ShareStateBatch) *pb.SharePartitionState {
	return &pb.SharePartitionState{Group: group, Topic: topic, Partition: p, StartOffset: spso, StateEpoch: stateEpoch,
		LeaderEpoch: leaderEpoch, Batches: batches}
}

func shareErrs(t *testing.T, res applyResult) []error {
	t.Helper()
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.value.([]error)
}

// Writes are fenced by leader and state epochs, initialize bumps the state epoch, deletes
// and topic deletion drop state, and the state survives a snapshot as of its time.
func TestShareStateRecordsAndSnapshot(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.mustCreate("q", 2, 1)
	h.mustCreate("gone", 1, 1)

	errs := shareErrs(t, h.apply(shareOps(
		&pb.ShareStateOp{Write: shareState("g", "q", 0, 10, 0, 0, &pb.ShareStateBatch{FirstOffset: 10, LastOffset: 12, DeliveryState: 0, DeliveryCount: 2})},
		&pb.ShareStateOp{Write: shareState("g", "q", 1, 0, 0, 0)},
		&pb.ShareStateOp{Write: shareState("g", "missing", 0, 0, 0, 0)},
		&pb.ShareStateOp{Write: shareState("g", "q", 0, 11, 0, 2)},                                                       // not the partition's leader epoch
		&pb.ShareStateOp{Write: shareState("g", "q", 1, 5, 7, 0)},                                                        // wrong state epoch
		&pb.ShareStateOp{Write: shareState("g", "gone", 0, 4, 0, 0)},                                                     // later deleted with the topic
		&pb.ShareStateOp{Write: shareState("g", "q", 0, 20, 0, 0, &pb.ShareStateBatch{FirstOffset: 19, LastOffset: 19})}, // batch below the SPSO
	)))
	wantNoErr(t, errs[0])
	wantNoErr(t, errs[1])
	wantKafkaErr(t, errs[2], kerr.UnknownTopicOrPartition)
	wantKafkaErr(t, errs[3], kerr.FencedLeaderEpoch)
	wantKafkaErr(t, errs[4], kerr.FencedStateEpoch)
	wantNoErr(t, errs[5])
	wantKafkaErr(t, errs[6], kerr.InvalidRequest)
	if got := h.f.shareGroups(); len(got) != 1 || got[0] != "g" {
		t.Fatalf("groups %v", got)
	}
	if got := h.f.readShareState("g", nil, false); len(got) != 3 || got[1].Topic != "q" || got[1].StartOffset != 10 || len(got[1].Batches) != 1 {
		t.Fatalf("states %v", got)
	}

	// An admin reset bumps the state epoch; the leader's next write at the old one is fenced.
	errs = shareErrs(t, h.apply(shareOps(&pb.ShareStateOp{Initialize: shareState("g", "q", 1, 40, 0, 0)},
		&pb.ShareStateOp{Write: shareState("g", "q", 1, 41, 0, 0)})))
	wantNoErr(t, errs[0])
	wantKafkaErr(t, errs[1], kerr.FencedStateEpoch)
	if got := h.f.readShareState("g", map[string][]int32{"q": {1}}, false); len(got) != 1 || got[0].StartOffset != 40 || got[0].StateEpoch != 1 || got[0].LeaderEpoch != 0 {
		t.Fatalf("after initialize %v", got)
	}

	h.apply(&pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: &pb.DeleteTopicsRecord{Topics: []*pb.TopicRef{{Name: "gone"}}}}})
	if got := h.f.readShareState("g", map[string][]int32{"gone": nil}, false); len(got) != 0 {
		t.Fatalf("state of a deleted topic kept: %v", got)
	}

	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := h.f.readShareState("g", nil, false)
	errs = shareErrs(t, h.apply(shareOps(&pb.ShareStateOp{DeleteGroup: "g", DeletePartitions: []*pb.TopicPartitions{{Topic: "q", Partitions: []int32{0}}}})))
	wantNoErr(t, errs[0])
	if got := h.f.readShareState("g", nil, false); len(got) != 1 || got[0].Partition != 1 {
		t.Fatalf("after deleting q-0: %v", got)
	}
	// The deleted state's leader, still holding it, is fenced rather than bringing it
	// back; a leader that read the tombstone starts afresh at its state epoch.
	errs = shareErrs(t, h.apply(shareOps(&pb.ShareStateOp{Write: shareState("g", "q", 0, 13, 0, 0)})))
	wantKafkaErr(t, errs[0], kerr.FencedStateEpoch)
	tomb := h.f.readShareState("g", map[string][]int32{"q": {0}}, true)
	if len(tomb) != 1 || !tomb[0].Deleted || tomb[0].StateEpoch != 1 {
		t.Fatalf("tombstone %v", tomb)
	}
	errs = shareErrs(t, h.apply(shareOps(&pb.ShareStateOp{Write: shareState("g", "q", 0, 13, 1, 0)})))
	wantNoErr(t, errs[0])
	if got := h.f.readShareState("g", map[string][]int32{"q": {0}}, false); len(got) != 1 || got[0].StartOffset != 13 {
		t.Fatalf("state after the tombstone %v", got)
	}
	shareErrs(t, h.apply(shareOps(&pb.ShareStateOp{DeleteGroup: "g"})))
	if got := h.f.readShareState("g", nil, false); len(got) != 0 {
		t.Fatalf("after deleting the group: %v", got)
	}
	if got := h.f.shareGroups(); len(got) != 0 {
		t.Fatalf("groups after deleting the only one: %v", got)
	}

	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	restored := g.readShareState("g", nil, false)
	if len(restored) != len(want) {
		t.Fatalf("restored %v, want %v", restored, want)
	}
	for i := range want {
		if !proto.Equal(restored[i], want[i]) {
			t.Errorf("restored %v, want %v", restored[i], want[i])
		}
	}
}

func wantNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
