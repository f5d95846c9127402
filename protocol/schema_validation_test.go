package protocol_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

// registerSchema registers an Avro schema under subject through the broker's client of
// the quorum, as the registry's REST API does, and waits until the broker's image
// holds it. It returns the schema's id.
func registerSchema(t testing.TB, tb *testBroker, subject, schema string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tb.node.Broker.AlterSchemaRegistry(ctx, metadata.RegistryOp{Register: &metadata.RegisterSchemaOp{
		Subject: subject, Schema: metadata.RegistrySchema{Type: "AVRO", Schema: schema}, ExpectLatest: -1,
	}})
	if err != nil {
		t.Fatalf("register under %s: %v", subject, err)
	}
	tb.waitApplied("schema "+subject, func(im *metadata.Image) bool {
		_, ok := im.SchemaRegistry.Version(subject, res.Version)
		return ok
	})
	return res.ID
}

func confluentWire(id int32, payload string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), payload...)
}

// Produce v8+ names each record schema ID validation refused in record_errors, with
// INVALID_RECORD for the partition and Kafka's error_message, and appends none of the
// batch; the configs are set at creation, described, and turned off with
// IncrementalAlterConfigs.
func TestProduceSchemaIDValidation(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("sv", 1, map[string]*string{"confluent.value.schema.validation": strPtr("true")})
	id := registerSchema(t, tb, "sv-value", `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`)
	other := registerSchema(t, tb, "elsewhere-value", `{"type":"record","name":"Other","fields":[{"name":"id","type":"string"}]}`)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := tb.admin()
	rcs, err := adm.DescribeTopicConfigs(ctx, "sv")
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]kadm.Config{}
	for _, c := range rcs[0].Configs {
		described[c.Key] = c
	}
	for name, want := range map[string]string{
		"confluent.value.schema.validation":     "true",
		"confluent.key.schema.validation":       "false",
		"confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy",
		"confluent.key.subject.name.strategy":   "io.confluent.kafka.serializers.subject.TopicNameStrategy",
	} {
		if c, ok := described[name]; !ok || c.Value == nil || *c.Value != want {
			t.Errorf("DescribeConfigs %s = %+v, want %s", name, c, want)
		}
	}

	recs := []records.Record{
		{OffsetDelta: 0, Value: confluentWire(id, "a")},
		{OffsetDelta: 1, Value: []byte(`{"id":1}`)},
		{OffsetDelta: 2, Value: confluentWire(other, "c")},
		{OffsetDelta: 3, Key: []byte("k"), Value: nil}, // a tombstone passes
	}
	batch, err := records.Build(shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(), PartitionLeaderEpoch: -1}, shalelog.CodecLZ4, recs)
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, tb.addr)
	p := produceRaw(t, rc, "sv", 0, batch)
	if p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("error %v, want INVALID_RECORD", kerr.ErrorForCode(p.ErrorCode))
	}
	if len(p.ErrorRecords) != 2 || p.ErrorRecords[0].RelativeOffset != 1 || p.ErrorRecords[1].RelativeOffset != 2 {
		t.Fatalf("record errors %+v, want records 1 and 2", p.ErrorRecords)
	}
	if m := p.ErrorRecords[1].ErrorMessage; m == nil || !strings.Contains(*m, `is not registered under subject "sv-value"`) {
		t.Fatalf("record 2's message %v", m)
	}
	if p.ErrorMessage == nil || *p.ErrorMessage != "One or more records have been rejected due to 2 record errors in total" {
		t.Fatalf("error message %v", p.ErrorMessage)
	}

	good := append([]records.Record(nil), recs[0], recs[3])
	good[1].OffsetDelta = 1
	okBatch, err := records.Build(shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, shalelog.CodecNone, good)
	if err != nil {
		t.Fatal(err)
	}
	if p := produceRaw(t, rc, "sv", 0, okBatch); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("registered batch: error %v at base offset %d, want offset 0 (nothing of the refused batch appended)", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}

	// Off again: the refused batch goes in.
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "confluent.value.schema.validation"}}, "sv")
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	tb.waitApplied("validation off", func(im *metadata.Image) bool {
		_, on := im.Topic("sv").Configs["confluent.value.schema.validation"]
		return !on
	})
	testEventually(t, func() bool { return produceRaw(t, rc, "sv", 0, batch).ErrorCode == 0 })

	// A strategy Confluent has no class for is refused at creation.
	cr, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"confluent.value.subject.name.strategy": strPtr("io.example.MyStrategy")}, "bad-strategy")
	if err == nil {
		err = cr.Err
	}
	if !strings.Contains(err.Error(), "INVALID_CONFIG") {
		t.Fatalf("unknown strategy: %v, want INVALID_CONFIG", err)
	}
}

func testEventually(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
