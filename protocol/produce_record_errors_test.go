package protocol_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// Produce v8+ lists each record a topic rule refused in RecordErrors, as Kafka does.
func TestProduceRecordErrors(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("ts", 1, map[string]*string{"message.timestamp.difference.max.ms": strPtr("60000")})
	now := time.Now().UnixMilli()
	old := now - time.Hour.Milliseconds()
	// Records 0 and 2 are an hour old; record 1 is current.
	recs := []records.Record{{OffsetDelta: 0, Value: []byte("a")}, {OffsetDelta: 1, TimestampDelta: now - old, Value: []byte("b")}, {OffsetDelta: 2, Value: []byte("c")}}
	batch, err := records.Build(shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: old, MaxTimestamp: now, PartitionLeaderEpoch: -1}, 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, tb.addr)
	p := produceRaw(t, rc, "ts", 0, batch)
	if p.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Fatalf("error %v, want INVALID_TIMESTAMP", kerr.ErrorForCode(p.ErrorCode))
	}
	if len(p.ErrorRecords) != 2 || p.ErrorRecords[0].RelativeOffset != 0 || p.ErrorRecords[1].RelativeOffset != 2 || p.ErrorRecords[0].ErrorMessage == nil {
		t.Fatalf("record errors %+v, want records 0 and 2", p.ErrorRecords)
	}
	if p.ErrorMessage == nil || *p.ErrorMessage != "One or more records have been rejected due to invalid timestamp" {
		t.Fatalf("error message %v", p.ErrorMessage)
	}
}
