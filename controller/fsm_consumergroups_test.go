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

func (h *fsmHarness) consumerGroup(broker, epoch int32, st *pb.ConsumerGroupState, remove bool) applyResult {
	h.t.Helper()
	return h.apply(&pb.Record{Record: &pb.Record_ConsumerGroup{ConsumerGroup: &pb.ConsumerGroupRecord{
		CoordinatorId: broker, CoordinatorEpoch: epoch, State: st, Remove: remove}}})
}

func cgState(coordEpoch int32, version int64, groupEpoch int32) *pb.ConsumerGroupState {
	return &pb.ConsumerGroupState{Group: "g", CoordinatorEpoch: coordEpoch, Version: version, GroupEpoch: groupEpoch, Assignor: "uniform",
		Members: []*pb.ConsumerGroupMember{{MemberId: "m", MemberEpoch: groupEpoch, SubscribedTopicNames: []string{"t"},
			Assigned: []*pb.ConsumerGroupPartitions{{TopicId: make([]byte, 16), Partitions: []int32{0, 1}}}}}}
}

// Consumer group states are fenced by the coordinator epoch, a write overtaken by a
// later one is dropped, removal deletes, and the state survives a snapshot.
func TestConsumerGroupRecords(t *testing.T) {
	h, broker, epoch := txnHarness(t)
	other := broker%2 + 1
	wantKafkaErr(t, h.consumerGroup(other, epoch, cgState(epoch, 1, 1), false).err, kerr.NotCoordinator)
	wantKafkaErr(t, h.consumerGroup(broker, epoch+1, cgState(epoch+1, 1, 1), false).err, kerr.NotCoordinator)
	if h.f.loadConsumerGroup("g") != nil {
		t.Fatal("a fenced write was stored")
	}
	wantNoErr(t, h.consumerGroup(broker, epoch, cgState(epoch, 2, 2), false).err)
	// Version 1 arrives after version 2: superseded, no error, nothing changes.
	wantNoErr(t, h.consumerGroup(broker, epoch, cgState(epoch, 1, 1), false).err)
	if got := h.f.loadConsumerGroup("g"); got == nil || got.Version != 2 || got.GroupEpoch != 2 {
		t.Fatalf("stored %v, want version 2", got)
	}
	wantNoErr(t, h.consumerGroup(broker, epoch, cgState(epoch, 3, 3), false).err)

	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := h.f.loadConsumerGroup("g")
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := g.loadConsumerGroup("g"); !proto.Equal(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}

	wantNoErr(t, h.consumerGroup(broker, epoch, cgState(epoch, 4, 3), true).err)
	if got := h.f.loadConsumerGroup("g"); got != nil {
		t.Fatalf("after removal: %v", got)
	}
}
