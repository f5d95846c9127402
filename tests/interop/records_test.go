package interop

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The shape of every cell's record set.
const (
	partitionCount = 3
	recordsPerCell = 200
	distinctKeys   = 20
)

// Indexes of the records that test the edges of the format, when the client can
// express them.
const (
	nullKeyIndex    = 13
	emptyKeyIndex   = 27
	nullValueIndex  = 41
	emptyValueIndex = 55
)

// header is one record header. A nil Value is a null header value.
type header struct {
	Key   string
	Value []byte
}

// specRecord is one record a client is asked to produce. Nil Key or Value means null;
// a non-nil empty slice means empty, and the two must come back apart.
type specRecord struct {
	Index   int
	Key     []byte
	Value   []byte
	Headers []header
	// Timestamp is the CreateTime the client sets; zero when the client cannot set one
	// and stamps records itself.
	Timestamp time.Time
}

// clientCaps describes what a client can express and how it places keys, so that the
// record set asks only for what the client can do and the checks expect its behaviour.
type clientCaps struct {
	// perRecordHeaders: each record gets its own headers. Otherwise (kcat) every record
	// carries the same ones.
	perRecordHeaders bool
	// explicitTimestamps: the client sets a record's CreateTime.
	explicitTimestamps bool
	nullKey            bool
	emptyKey           bool
	nullValue          bool
	emptyValue         bool
	// emptyKeyHashed: the default partitioner hashes an empty key like any other; when
	// false (librdkafka's consistent_random) an empty key is placed at random.
	emptyKeyHashed bool
	// readsEmptyAsNull: the consumer cannot tell an empty key or value from a null one
	// (kafka-go's reader returns nil for both), so an empty one may come back null. The
	// producer side is still held to writing empty, which other clients' cells read.
	readsEmptyAsNull bool
	// compressionGate, when set, explains from the broker's advertised versions why the
	// client would send a codec uncompressed ("" when nothing should stop it).
	compressionGate func(ctx context.Context, codec string) string
	// partitioner is the client's default placement for a non-null key, the one the
	// checks hold every keyed record to.
	partitioner partitionerFunc
	// partitionerName names it in failure messages.
	partitionerName string
}

// cellSpec is what one client x codec cell produces and must get back.
type cellSpec struct {
	Client  string
	Codec   string
	Topic   string
	Group   string
	Caps    clientCaps
	Records []specRecord
}

// codecs is every compression codec Kafka defines, in the order cells run.
var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// newCellSpec builds the record set for one cell: recordsPerCell records over
// distinctKeys keys, two headers each, with a null key, an empty key, a null value and an
// empty value where the client can express them, values of varied length (up to ~2 KiB,
// compressible text) and, where settable, explicit timestamps an hour in the past.
func newCellSpec(client, codec string, caps clientCaps, now time.Time) *cellSpec {
	name := fmt.Sprintf("%s-%s", client, codec)
	spec := &cellSpec{
		Client: client,
		Codec:  codec,
		Topic:  fmt.Sprintf("interop-%s-%d", name, now.UnixNano()%1_000_000_000),
		Group:  fmt.Sprintf("interop-%s-group-%d", name, now.UnixNano()%1_000_000_000),
		Caps:   caps,
	}
	base := now.Add(-time.Hour).Truncate(time.Millisecond)
	for i := range recordsPerCell {
		r := specRecord{
			Index: i,
			Key:   fmt.Appendf(nil, "key-%02d", i%distinctKeys),
			Value: recordValue(client, codec, i),
		}
		switch {
		case i == nullKeyIndex && caps.nullKey:
			r.Key = nil
		case i == emptyKeyIndex && caps.emptyKey:
			r.Key = []byte{}
		case i == nullValueIndex && caps.nullValue:
			r.Key, r.Value = []byte("tombstone"), nil
		case i == emptyValueIndex && caps.emptyValue:
			r.Key, r.Value = []byte("empty-value"), []byte{}
		}
		if caps.perRecordHeaders {
			r.Headers = []header{
				{Key: "seq", Value: []byte(strconv.Itoa(i))},
				{Key: "src", Value: []byte(name)},
			}
		} else {
			r.Headers = fixedHeaders(name)
		}
		if caps.explicitTimestamps {
			r.Timestamp = base.Add(time.Duration(i) * 7 * time.Millisecond)
		}
		spec.Records = append(spec.Records, r)
	}
	return spec
}

// fixedHeaders are the headers of every record for clients that cannot vary them.
func fixedHeaders(name string) []header {
	return []header{{Key: "src", Value: []byte(name)}, {Key: "suite", Value: []byte("shale-interop")}}
}

// recordValue is unique per record, printable ASCII without tabs or newlines (kcat reads
// records as lines), and repetitive enough for every codec to shrink it.
func recordValue(client, codec string, i int) []byte {
	const filler = "the quick brown fox jumps over the lazy dog 0123456789 "
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s #%03d:", client, codec, i)
	for n := (i * 53) % 2000; b.Len() < n; {
		b.WriteString(filler[:min(len(filler), n-b.Len())])
	}
	return []byte(b.String())
}

// producedRecord is the client's acknowledgement of one record.
type producedRecord struct {
	Index     int
	Partition int32
	Offset    int64
}

// consumedRecord is one record as the client consumed it.
type consumedRecord struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []header
	Timestamp time.Time
	// TimestampType is "create" or "append" when the client reports it, else "".
	TimestampType string
}

// cellOutput is everything a client reported for a cell.
type cellOutput struct {
	Produced []producedRecord
	Consumed []consumedRecord
	// ProduceStart and ProduceEnd bracket the produce phase, to check timestamps clients
	// stamped themselves.
	ProduceStart, ProduceEnd time.Time
}

func nullable(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

func describeHeaders(hs []header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + nullable(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func headersEqual(a, b []header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytesEqualNullable(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// bytesEqualNullable compares contents and nullness: null and empty differ.
func bytesEqualNullable(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}
