package controller

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func (h *fsmHarness) offsetOp(op *pb.OffsetOp) error {
	h.t.Helper()
	res := h.apply(&pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: &pb.OffsetOpsRecord{Ops: []*pb.OffsetOp{op}}}})
	if res.err != nil {
		h.t.Fatal(res.err)
	}
	return res.value.([]error)[0]
}

func TestCoordinatorEpochsFenceOffsetWrites(t *testing.T) {
	h := newHarness(t)
	h.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 1, ClusterId: "c", OffsetsTopicNumPartitions: 8}}})
	if n := len(h.f.img.Coordinators); n != 8 {
		t.Fatalf("%d offsets partitions, want 8", n)
	}
	// A later leader's setting does not change a cluster's partition count.
	h.apply(&pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{LeaderId: 1, OffsetsTopicNumPartitions: 3}}})
	h.register(1, "")
	h.register(2, "")
	h.mustCreate("t", 1, 1)

	p, co, _ := h.f.img.CoordinatorOf("g")
	commit := func(broker, epoch int32, offset int64) error {
		return h.offsetOp(&pb.OffsetOp{Group: "g", Fenced: true, CoordinatorId: broker, CoordinatorEpoch: epoch,
			Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: offset}}})
	}
	if err := commit(co.Broker, co.Epoch, 10); err != nil {
		t.Fatal(err)
	}
	other := 3 - co.Broker
	wantKafkaErr(t, commit(other, co.Epoch, 5), kerr.NotCoordinator)
	wantKafkaErr(t, commit(co.Broker, co.Epoch+1, 5), kerr.NotCoordinator)

	// The coordinator is fenced: its partitions move, with a new epoch, and its writes
	// are refused from then on, deletions included.
	h.fence(co.Broker)
	moved := h.f.img.Coordinators[p]
	if moved.Broker != other || moved.Epoch != co.Epoch+1 {
		t.Fatalf("after fencing broker %d: %+v (was %+v)", co.Broker, moved, co)
	}
	wantKafkaErr(t, commit(co.Broker, co.Epoch, 5), kerr.NotCoordinator)
	wantKafkaErr(t, h.offsetOp(&pb.OffsetOp{Group: "g", Delete: true, DeleteAll: true, Fenced: true,
		CoordinatorId: co.Broker, CoordinatorEpoch: co.Epoch}), kerr.NotCoordinator)
	if offs := h.f.fetchOffsets("g", nil); len(offs) != 1 || offs[0].Offset != 10 {
		t.Fatalf("offsets after stale writes: %+v", offs)
	}
	if err := commit(moved.Broker, moved.Epoch, 20); err != nil {
		t.Fatal(err)
	}
	// Ops from before fencing existed are applied as they were.
	if err := h.offsetOp(&pb.OffsetOp{Group: "g", Commits: []*pb.OffsetEntry{{Topic: "t", Partition: 0, Offset: 30}}}); err != nil {
		t.Fatal(err)
	}

	// The __consumer_offsets view: the latest commit, then the deletion's tombstone.
	recs, end, _, err := h.f.readOffsetsLog(p, 0, 1<<20)
	if err != nil || len(recs) != 1 || recs[0].Offset.Offset != 30 || end != recs[0].LogOffset+1 {
		t.Fatalf("view: %+v end %d %v", recs, end, err)
	}
	if err := h.offsetOp(&pb.OffsetOp{Group: "g", Delete: true, DeleteAll: true, Fenced: true,
		CoordinatorId: moved.Broker, CoordinatorEpoch: moved.Epoch}); err != nil {
		t.Fatal(err)
	}
	recs, end2, _, _ := h.f.readOffsetsLog(p, end, 1<<20)
	if len(recs) != 1 || !recs[0].Tombstone || recs[0].LogOffset != end || end2 != end+1 {
		t.Fatalf("view after delete: %+v end %d", recs, end2)
	}
	if _, _, _, err := h.f.readOffsetsLog(8, 0, 1); err == nil {
		t.Fatal("read of offsets partition 8 of 8")
	}

	// A snapshot keeps the coordinators and where the view's log ends.
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if g.offsetsLog.end != h.f.offsetsLog.end || len(g.img.Coordinators) != 8 || g.img.Coordinators[p] != moved {
		t.Fatalf("restored: log end %d (want %d), coordinators %+v", g.offsetsLog.end, h.f.offsetsLog.end, g.img.Coordinators)
	}
}

// Coordinator choice is stable: removing a broker moves only its own partitions.
func TestPickCoordinatorIsStable(t *testing.T) {
	before := map[int32]int32{}
	for p := range int32(metadata.DefaultOffsetsTopicPartitions) {
		before[p] = PickCoordinator(p, []int32{1, 2, 3})
	}
	for p, was := range before {
		if now := PickCoordinator(p, []int32{1, 2}); was != 3 && now != was {
			t.Fatalf("offsets partition %d moved from live broker %d to %d", p, was, now)
		}
	}
	if got := PickCoordinator(0, nil); got != -1 {
		t.Fatalf("no brokers: %d", got)
	}
}

// checkCoordinator is MayCoordinate plus the coordinator epoch a write names, for every
// kind of coordinator write.
func TestCheckCoordinator(t *testing.T) {
	im := &metadata.Image{
		Brokers:      map[int32]metadata.Broker{1: {ID: 1, Epoch: 10}, 2: {ID: 2, Epoch: 20}},
		Coordinators: []metadata.Coordinator{{Broker: 1, BrokerEpoch: 10, Epoch: 4}},
	}
	for _, tc := range []struct {
		name          string
		im            *metadata.Image
		broker, epoch int32
		want          *kerr.Error
	}{
		{"the coordinator at its epoch", im, 1, 4, nil},
		{"the coordinator at an earlier epoch", im, 1, 3, kerr.NotCoordinator},
		{"the coordinator at a later epoch", im, 1, 5, kerr.NotCoordinator},
		{"another broker", im, 2, 4, kerr.NotCoordinator},
		{"no coordinators yet", &metadata.Image{Brokers: im.Brokers}, 1, 4, kerr.CoordinatorNotAvailable},
		{"no eligible broker", &metadata.Image{Brokers: im.Brokers, Coordinators: []metadata.Coordinator{{Broker: -1, BrokerEpoch: -1, Epoch: 4}}}, -1, 4, kerr.CoordinatorNotAvailable},
	} {
		for _, what := range []string{"group", "transactional id"} {
			err := checkCoordinator(tc.im, what, "key", tc.broker, tc.epoch)
			if tc.want == nil {
				if err != nil {
					t.Errorf("%s, %s: %v", tc.name, what, err)
				}
				continue
			}
			var ke *kerr.Error
			if !errors.As(err, &ke) || ke != tc.want {
				t.Errorf("%s, %s: %v, want %s", tc.name, what, err, tc.want.Message)
			}
		}
	}
}
