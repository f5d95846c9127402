package controller

import (
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
	checkInImageSnapshotAndChunks(t, h, "subscriptions", func(im *metadata.Image) any { return im.ClientMetrics }, want)
}
