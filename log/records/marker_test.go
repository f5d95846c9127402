package records

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

func TestMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{{Commit: true, CoordinatorEpoch: 7}, {Commit: false, CoordinatorEpoch: 0}} {
		b, err := BuildMarker(42, 3, m, 1000)
		if err != nil {
			t.Fatal(err)
		}
		h, err := shalelog.ValidateHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.RecordCount != 1 {
			t.Fatalf("header %+v", h)
		}
		got, err := ParseMarker(b)
		if err != nil || got != m {
			t.Fatalf("parsed %+v, %v; want %+v", got, err, m)
		}
		// What Kafka clients decode, through kmsg's control record types.
		_, recs, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		var value kmsg.EndTxnMarker
		if err := key.ReadFrom(recs[0].Key); err != nil {
			t.Fatal(err)
		}
		if err := value.ReadFrom(recs[0].Value); err != nil {
			t.Fatal(err)
		}
		if (key.Type == kmsg.ControlRecordKeyTypeCommit) != m.Commit || key.Type > kmsg.ControlRecordKeyTypeCommit || value.CoordinatorEpoch != m.CoordinatorEpoch {
			t.Fatalf("kmsg decodes key %+v value %+v for %+v", key, value, m)
		}
	}
	data, _ := BuildMarker(1, 0, Marker{}, 0)
	if _, err := ParseMarker(data[:len(data)-1]); err == nil {
		t.Error("a cut marker batch parsed")
	}
	plain, _ := Build(shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 0, []Record{{Value: []byte("v")}})
	if _, err := ParseMarker(plain); err == nil {
		t.Error("a data batch parsed as a marker")
	}
}
