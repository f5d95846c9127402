package controller

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func TestClientQuotasInImageSnapshotAndChunks(t *testing.T) {
	h := buildBusyFSM(t)
	alice := metadata.QuotaEntity{User: metadata.QuotaEntityPart{Set: true, Name: "alice"}}
	aliceApp := metadata.QuotaEntity{User: alice.User, ClientID: metadata.QuotaEntityPart{Set: true, Name: "app"}}
	defClient := metadata.QuotaEntity{ClientID: metadata.QuotaEntityPart{Set: true, Default: true}}
	h.apply(&pb.Record{Record: &pb.Record_ClientQuotas{ClientQuotas: &pb.ClientQuotasRecord{Quotas: []*pb.ClientQuotaState{
		quotaStateToPB(alice, map[string]float64{metadata.QuotaProducerByteRate: 1024}),
		quotaStateToPB(aliceApp, map[string]float64{metadata.QuotaConsumerByteRate: 2048, metadata.QuotaRequestPercentage: 50}),
		quotaStateToPB(defClient, map[string]float64{metadata.QuotaProducerByteRate: 4096}),
	}}}})
	// Removing an entity's values removes the entity.
	h.apply(&pb.Record{Record: &pb.Record_ClientQuotas{ClientQuotas: &pb.ClientQuotasRecord{Quotas: []*pb.ClientQuotaState{
		quotaStateToPB(defClient, nil),
	}}}})
	want := metadata.ClientQuotas{
		alice:    {metadata.QuotaProducerByteRate: 1024},
		aliceApp: {metadata.QuotaConsumerByteRate: 2048, metadata.QuotaRequestPercentage: 50},
	}
	if got := h.f.img.ClientQuotas; !reflect.DeepEqual(got, want) {
		t.Fatalf("image quotas %v, want %v", got, want)
	}

	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.img.ClientQuotas, want) {
		t.Fatalf("restored quotas %v, want %v", g.img.ClientQuotas, want)
	}

	var a imageAssembler
	var im *metadata.Image
	for _, c := range imageChunks(h.f.img, nil, 2) {
		var err error
		if im, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if im == nil || !reflect.DeepEqual(im.ClientQuotas, want) {
		t.Fatalf("assembled quotas %v, want %v", im, want)
	}
}

func TestApplyQuotaOpsValidates(t *testing.T) {
	for _, tc := range []struct {
		op *pb.ClientQuotaOp
		ok bool
	}{
		{&pb.ClientQuotaOp{Key: metadata.QuotaProducerByteRate, Value: 1e6}, true},
		{&pb.ClientQuotaOp{Key: metadata.QuotaRequestPercentage, Value: 12.5}, true},
		{&pb.ClientQuotaOp{Key: metadata.QuotaProducerByteRate, Value: 1.5}, false},
		{&pb.ClientQuotaOp{Key: metadata.QuotaConsumerByteRate, Value: 0}, false},
		{&pb.ClientQuotaOp{Key: "bogus", Value: 1}, false},
	} {
		_, err := applyQuotaOps(nil, []*pb.ClientQuotaOp{tc.op})
		if tc.ok && err != nil {
			t.Errorf("%v: %v", tc.op, err)
		}
		if !tc.ok {
			wantKafkaErr(t, err, kerr.InvalidRequest)
		}
	}
	if err := validateQuotaEntity(metadata.QuotaEntity{}); err == nil {
		t.Error("empty entity accepted")
	}
}
