package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/schemaregistry"
)

// wire frames payload as Confluent's serializers do: magic byte 0, the schema id
// big-endian, then the payload.
func wire(id int32, payload ...byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	return append(b, payload...)
}

const (
	orderAvro  = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
	refundAvro = `{"type":"record","name":"Refund","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
	shopProto  = "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; message Line { int64 sku = 1; } }\nmessage Refund { int64 id = 1; }\n"
)

// testRegistry holds, for topic "orders":
//   - id 1 (shop.Order) as orders-value version 1, and under shop.Order and
//     orders-shop.Order for the record strategies;
//   - id 2 (shop.Refund) only under refunds-value, another topic's subject;
//   - id 3 as orders-value version 2, soft-deleted;
//   - id 4, whose only version (orders-value 3) was permanently deleted: the schema
//     stays, as ids are never reused, but no subject holds it;
//   - id 5 as orders-key version 1;
//   - id 6, a Protobuf file with shop.Order, shop.Order.Line and shop.Refund, under
//     shop.Order.Line.
func testRegistry() *metadata.SchemaRegistry {
	return &metadata.SchemaRegistry{
		Schemas: map[int32]*metadata.RegistrySchema{
			1: {ID: 1, Type: "AVRO", Schema: orderAvro},
			2: {ID: 2, Type: "AVRO", Schema: refundAvro},
			3: {ID: 3, Type: "AVRO", Schema: `"string"`},
			4: {ID: 4, Type: "AVRO", Schema: `"long"`},
			5: {ID: 5, Type: "AVRO", Schema: `"int"`},
			6: {ID: 6, Type: "PROTOBUF", Schema: shopProto},
		},
		Subjects: map[string][]metadata.SubjectVersion{
			"orders-value":      {{Subject: "orders-value", Version: 1, SchemaID: 1}, {Subject: "orders-value", Version: 2, SchemaID: 3, Deleted: true}},
			"refunds-value":     {{Subject: "refunds-value", Version: 1, SchemaID: 2}},
			"orders-key":        {{Subject: "orders-key", Version: 1, SchemaID: 5}},
			"shop.Order":        {{Subject: "shop.Order", Version: 1, SchemaID: 1}},
			"orders-shop.Order": {{Subject: "orders-shop.Order", Version: 1, SchemaID: 1}},
			"shop.Order.Line":   {{Subject: "shop.Order.Line", Version: 1, SchemaID: 6}},
		},
		NextID: 7,
	}
}

type rec struct{ key, value []byte }

func buildBatch(t *testing.T, h shalelog.Header, codec int, rs ...rec) []byte {
	t.Helper()
	recs := make([]records.Record, len(rs))
	for i, r := range rs {
		recs[i] = records.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value}
	}
	h.Magic = 2
	b, err := records.Build(h, codec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var plainHeader = shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// validate runs the produce path's record validation with topic "orders"'s policy.
func validate(t *testing.T, policy records.SchemaIDPolicy, batch []byte) (records.Summary, error) {
	t.Helper()
	chk := newSchemaIDChecker("orders", policy, testRegistry(), schemaregistry.NewRecordNames())
	return records.ValidateSummary(batch, records.ValidateOptions{
		SchemaIDs: records.SchemaIDs{Key: policy.Key, Value: policy.Value, Checker: chk},
	})
}

// refused checks that err is INVALID_RECORD listing exactly the records at indexes, the
// first one's message containing want.
func refused(t *testing.T, err error, want string, indexes ...int) {
	t.Helper()
	var ve *records.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err %v, want a record-level refusal", err)
	}
	if code, _ := records.ErrorCode(err); code != kerr.InvalidRecord.Code {
		t.Fatalf("error code %d, want INVALID_RECORD (87)", code)
	}
	if len(ve.Records) != len(indexes) {
		t.Fatalf("refused %+v, want records %v", ve.Records, indexes)
	}
	for i, r := range ve.Records {
		if r.Index != indexes[i] {
			t.Fatalf("refused %+v, want records %v", ve.Records, indexes)
		}
	}
	if !strings.Contains(ve.Records[0].Message, want) {
		t.Fatalf("message %q, want it to contain %q", ve.Records[0].Message, want)
	}
}

var valueOnly = records.SchemaIDPolicy{Value: true}

func TestSchemaIDValidation(t *testing.T) {
	good := wire(1, 0x02)
	for _, tc := range []struct {
		name    string
		policy  records.SchemaIDPolicy
		recs    []rec
		want    string // "" accepted
		indexes []int
	}{
		{"registered id", valueOnly, []rec{{nil, good}, {nil, wire(1, 0x04)}}, "", nil},
		{"missing magic byte", valueOnly, []rec{{nil, good}, {nil, []byte("plain json")}}, "magic byte", []int{1}},
		{"wrong magic byte", valueOnly, []rec{{nil, append([]byte{1}, good[1:]...)}}, "magic byte", []int{0}},
		{"shorter than the header", valueOnly, []rec{{nil, []byte{0, 0, 0}}}, "magic byte", []int{0}},
		{"empty value", valueOnly, []rec{{nil, []byte{}}}, "magic byte", []int{0}},
		{"unknown id", valueOnly, []rec{{nil, wire(99)}}, `value schema id 99 is not registered under subject "orders-value"`, []int{0}},
		{"id under another topic's subject", valueOnly, []rec{{nil, good}, {nil, wire(2)}, {nil, good}}, `schema id 2 is not registered under subject "orders-value"`, []int{1}},
		{"soft-deleted version still passes", valueOnly, []rec{{nil, wire(3)}}, "", nil},
		{"permanently deleted version", valueOnly, []rec{{nil, wire(4)}}, "schema id 4 is not registered", []int{0}},
		{"every bad record is listed", valueOnly, []rec{{nil, []byte("x")}, {nil, good}, {nil, wire(2)}}, "magic byte", []int{0, 2}},
		{"tombstone (null value) passes", valueOnly, []rec{{good, nil}}, "", nil},
		{"key unchecked when only the value is", valueOnly, []rec{{[]byte("k"), good}}, "", nil},
		{"null key passes", records.SchemaIDPolicy{Key: true}, []rec{{nil, []byte("v")}}, "", nil},
		{"registered key", records.SchemaIDPolicy{Key: true}, []rec{{wire(5), []byte("v")}}, "", nil},
		{"value id as key", records.SchemaIDPolicy{Key: true}, []rec{{good, nil}}, `key schema id 1 is not registered under subject "orders-key"`, []int{0}},
		{"raw key", records.SchemaIDPolicy{Key: true, Value: true}, []rec{{[]byte("k"), good}}, "key does not start", []int{0}},
		{"key and value, bad value", records.SchemaIDPolicy{Key: true, Value: true}, []rec{{wire(5), good}, {wire(5), wire(5)}}, "value schema id 5", []int{1}},
		{"record name strategy", records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}, []rec{{nil, good}}, "", nil},
		{"record name strategy, name not a subject", records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}, []rec{{nil, wire(2)}}, `subject "shop.Refund"`, []int{0}},
		{"topic record name strategy", records.SchemaIDPolicy{Value: true, ValueStrategy: records.TopicRecordNameStrategy}, []rec{{nil, good}}, "", nil},
		{"topic record name strategy, unknown id", records.SchemaIDPolicy{Value: true, ValueStrategy: records.TopicRecordNameStrategy}, []rec{{nil, wire(99)}}, "schema id 99 is not registered", []int{0}},
		// Message indexes [0, 0] (zig-zag: count 2, then 0, 0) select shop.Order.Line;
		// [2] is shop.Refund's index... of which there is none at index 2: out of range.
		{"protobuf message indexes", records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}, []rec{{nil, wire(6, 4, 0, 0)}}, "", nil},
		{"protobuf other message", records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}, []rec{{nil, wire(6, 2, 2)}}, `subject "shop.Refund"`, []int{0}},
		{"protobuf first message (count 0)", records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}, []rec{{nil, wire(6, 0)}}, `subject "shop.Order"`, []int{0}},
		{"protobuf index out of range", records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}, []rec{{nil, wire(6, 2, 6)}}, "out of range", []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validate(t, tc.policy, buildBatch(t, plainHeader, shalelog.CodecNone, tc.recs...))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			refused(t, err, tc.want, tc.indexes...)
		})
	}
}

// A compressed batch is decompressed by the pass that validates it, and every record in
// it is checked.
func TestSchemaIDValidationCompressed(t *testing.T) {
	for _, codec := range []int{shalelog.CodecGzip, shalelog.CodecSnappy, shalelog.CodecLZ4, shalelog.CodecZstd} {
		t.Run(records.CodecName(codec), func(t *testing.T) {
			recs := make([]rec, 50)
			for i := range recs {
				recs[i] = rec{value: wire(1, byte(i))}
			}
			if _, err := validate(t, valueOnly, buildBatch(t, plainHeader, codec, recs...)); err != nil {
				t.Fatalf("valid batch refused: %v", err)
			}
			recs[37].value = wire(2, 37)
			s, err := validate(t, valueOnly, buildBatch(t, plainHeader, codec, recs...))
			refused(t, err, "schema id 2", 37)
			if s.SchemaRefused != 1 {
				t.Fatalf("SchemaRefused %d, want 1", s.SchemaRefused)
			}
		})
	}
}

// Transactional (and idempotent) batches are checked like any other, before the
// transaction coordinator is asked about them.
func TestSchemaIDValidationTransactional(t *testing.T) {
	h := shalelog.Header{ProducerID: 42, ProducerEpoch: 1, BaseSequence: 0, Attributes: shalelog.AttrTransactional}
	if _, err := validate(t, valueOnly, buildBatch(t, h, shalelog.CodecLZ4, rec{value: wire(1)}, rec{value: wire(1)})); err != nil {
		t.Fatalf("valid transactional batch refused: %v", err)
	}
	_, err := validate(t, valueOnly, buildBatch(t, h, shalelog.CodecLZ4, rec{value: wire(1)}, rec{value: []byte("raw")}))
	refused(t, err, "magic byte", 1)
}

// With no record namer, the record strategies refuse rather than pass.
func TestSchemaIDValidationWithoutRecordNamer(t *testing.T) {
	policy := records.SchemaIDPolicy{Value: true, ValueStrategy: records.RecordNameStrategy}
	chk := newSchemaIDChecker("orders", policy, testRegistry(), nil)
	_, err := records.ValidateSummary(buildBatch(t, plainHeader, shalelog.CodecNone, rec{value: wire(1)}),
		records.ValidateOptions{SchemaIDs: records.SchemaIDs{Value: true, Checker: chk}})
	refused(t, err, "cannot name records", 0)
}

// Through the replica manager: the topic's configs turn validation on, the registry is
// the broker's own image, a refused batch is not appended and is counted.
func TestAppendRefusesUnregisteredSchemaIDs(t *testing.T) {
	im := topicImage(1, [16]byte{7}, metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1})
	t0 := im.Topics["t"]
	t0.Configs = map[string]string{"confluent.value.schema.validation": "true"}
	reg := testRegistry()
	reg.Subjects["t-value"] = []metadata.SubjectVersion{{Subject: "t-value", Version: 1, SchemaID: 1}}
	im.SchemaRegistry = reg
	store := &handStore{im: im, lease: true, epoch: 7}
	pr := prometheus.NewRegistry()
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: pr}, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	produce := func(rs ...rec) *ProducePartition {
		pp := &ProducePartition{Topic: "t", Index: 0, Records: buildBatch(t, plainHeader, shalelog.CodecZstd, rs...)}
		m.Append(context.Background(), 1, []*ProducePartition{pp})
		return pp
	}
	if pp := produce(rec{value: wire(1)}, rec{value: wire(1, 9)}); pp.Err != nil {
		t.Fatalf("registered ids refused: %v", pp.Err)
	}
	pp := produce(rec{value: wire(1)}, rec{value: []byte("raw")}, rec{value: wire(2)})
	refused(t, pp.Err, "magic byte", 1, 2)
	if p, _ := m.Leader("t", 0, -1); p.LogEndOffset() != 2 {
		t.Fatalf("log end offset %d, want 2: a refused batch must not be appended", p.LogEndOffset())
	}
	if n := counterValue(m.m.schemaRefusals.WithLabelValues("t")); n != 1 {
		t.Fatalf("shale_schema_validation_refusals_total{topic=t} = %v, want 1", n)
	}
	if n := counterValue(m.m.schemaRefusedRecords.WithLabelValues("t")); n != 2 {
		t.Fatalf("shale_schema_validation_refused_records_total{topic=t} = %v, want 2", n)
	}

	// Turning the config off lets the same batch in.
	im2 := *im
	im2.Offset++
	im2.Topics = map[string]*metadata.Topic{"t": {Name: "t", ID: t0.ID, Partitions: t0.Partitions, Configs: map[string]string{}}}
	store.mu.Lock()
	store.im = &im2
	store.mu.Unlock()
	m.apply(&im2, false)
	if pp := produce(rec{value: []byte("raw")}); pp.Err != nil {
		t.Fatalf("validation off, still refused: %v", pp.Err)
	}
}

// BenchmarkValidateSchemaIDs is what schema ID validation adds to the produce path's
// one validation pass over a batch: 100 records of 100 or 1024 bytes, uncompressed and
// lz4, with confluent.value.schema.validation off, on with TopicNameStrategy (the
// default) and on with RecordNameStrategy (each record's Avro record name looked up).
// The pass decompresses and decodes every record either way, so validation adds only
// the check of each value's header and of its id. ns/record is reported.
func BenchmarkValidateSchemaIDs(b *testing.B) {
	const n = 100
	reg := testRegistry()
	namer := schemaregistry.NewRecordNames()
	for _, size := range []int{100, 1024} {
		for _, codec := range []int{shalelog.CodecNone, shalelog.CodecLZ4} {
			recs := make([]records.Record, n)
			for i := range recs {
				v := wire(1, make([]byte, size-5)...)
				v[5] = byte(i) // not all alike, so lz4 has a little to do
				recs[i] = records.Record{OffsetDelta: int32(i), Value: v}
			}
			batch, err := records.Build(shalelog.Header{Magic: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, codec, recs)
			if err != nil {
				b.Fatal(err)
			}
			for _, mode := range []string{"off", "topic", "record"} {
				b.Run(fmt.Sprintf("size=%d/codec=%s/validation=%s", size, records.CodecName(codec), mode), func(b *testing.B) {
					b.SetBytes(int64(len(batch)))
					for range b.N {
						opt := records.ValidateOptions{}
						if mode != "off" {
							policy := records.SchemaIDPolicy{Value: true}
							if mode == "record" {
								policy.ValueStrategy = records.RecordNameStrategy
							}
							opt.SchemaIDs = records.SchemaIDs{Value: true, Checker: newSchemaIDChecker("orders", policy, reg, namer)}
						}
						if _, err := records.ValidateSummary(batch, opt); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
				})
			}
		}
	}
}
