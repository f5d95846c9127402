package controller

import (
	"testing"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func TestGroupConfigsInImageSnapshotAndChunks(t *testing.T) {
	h := buildBusyFSM(t)
	h.apply(&pb.Record{Record: &pb.Record_GroupConfigs{GroupConfigs: &pb.GroupConfigsRecord{Groups: []*pb.GroupConfigState{
		{Group: "shares", Configs: map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}},
		{Group: "gone", Configs: map[string]string{"consumer.session.timeout.ms": "50000"}},
	}}}})
	// A group left with no configs is removed.
	h.apply(&pb.Record{Record: &pb.Record_GroupConfigs{GroupConfigs: &pb.GroupConfigsRecord{Groups: []*pb.GroupConfigState{
		{Group: "gone"},
	}}}})
	want := metadata.GroupConfigs{"shares": {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}}
	checkInImageSnapshotAndChunks(t, h, "group configs", func(im *metadata.Image) any { return im.GroupConfigs }, want)
}
