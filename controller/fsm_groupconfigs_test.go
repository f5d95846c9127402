package controller

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
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
	if got := h.f.img.GroupConfigs; !reflect.DeepEqual(got, want) {
		t.Fatalf("image group configs %v, want %v", got, want)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.GroupConfigs, want) {
		t.Fatalf("restored group configs %v, want %v", g.img.GroupConfigs, want)
	}
	var a imageAssembler
	var im *metadata.Image
	for _, c := range imageChunks(h.f.img, nil, 2) {
		var err error
		if im, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if im == nil || !reflect.DeepEqual(im.GroupConfigs, want) {
		t.Fatalf("assembled group configs %v, want %v", im, want)
	}
}
