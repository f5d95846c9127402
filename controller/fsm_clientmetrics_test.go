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

func TestClientMetricsInImageSnapshotAndChunks(t *testing.T) {
	h := buildBusyFSM(t)
	h.apply(&pb.Record{Record: &pb.Record_ClientMetrics{ClientMetrics: &pb.ClientMetricsRecord{Subscriptions: []*pb.ClientMetricsState{
		{Name: "all", Configs: map[string]string{"metrics": "*", "interval.ms": "1000"}},
		{Name: "gone", Configs: map[string]string{"metrics": "org.apache.kafka.producer."}},
	}}}})
	// A subscription left with no configs is removed.
	h.apply(&pb.Record{Record: &pb.Record_ClientMetrics{ClientMetrics: &pb.ClientMetricsRecord{Subscriptions: []*pb.ClientMetricsState{
		{Name: "gone"},
	}}}})
	want := metadata.ClientMetrics{"all": {"metrics": "*", "interval.ms": "1000"}}
	if got := h.f.img.ClientMetrics; !reflect.DeepEqual(got, want) {
		t.Fatalf("image subscriptions %v, want %v", got, want)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.ClientMetrics, want) {
		t.Fatalf("restored subscriptions %v, want %v", g.img.ClientMetrics, want)
	}
	var a imageAssembler
	var im *metadata.Image
	for _, c := range imageChunks(h.f.img, nil, 2) {
		var err error
		if im, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if im == nil || !reflect.DeepEqual(im.ClientMetrics, want) {
		t.Fatalf("assembled subscriptions %v, want %v", im, want)
	}
}
