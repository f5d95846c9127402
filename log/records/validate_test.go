package records

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

// rawBatch wraps an uncompressed records payload in a kmsg-encoded header claiming
// count records.
func rawBatch(payload []byte, count int32, mutate func(*kmsg.RecordBatch)) []byte {
	b := kmsg.RecordBatch{
		Magic: 2, PartitionLeaderEpoch: -1, LastOffsetDelta: count - 1,
		FirstTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: count, Records: payload,
	}
	if mutate != nil {
		mutate(&b)
	}
	return encodeKmsgBatch(b)
}

func encodeRecords(recs ...Record) []byte {
	var out []byte
	for _, r := range recs {
		out = append(out, kmsgRecord(r)...)
	}
	return out
}

func TestValidateFranzBatches(t *testing.T) {
	recs := testRecords(40)
	for _, codec := range allCodecs {
		t.Run(CodecName(codec), func(t *testing.T) {
			batch := kmsgBatch(t, codec, recs, nil)
			s, err := ValidateSummary(batch, ValidateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Header.RecordCount != 40 || s.Header.Codec() != codec || s.Header.FirstTimestamp != 1_700_000_000_000 {
				t.Fatalf("header %+v", s.Header)
			}
			if s.MaxTimestamp != 1_700_000_000_039 || s.MaxTimestampIndex != 39 {
				t.Fatalf("max timestamp %d at %d", s.MaxTimestamp, s.MaxTimestampIndex)
			}
			if want := len(encodeRecords(recs...)); s.UncompressedBytes != want {
				t.Fatalf("uncompressed %d bytes, want %d", s.UncompressedBytes, want)
			}
			h, got, err := Records(batch)
			if err != nil {
				t.Fatal(err)
			}
			if h != s.Header {
				t.Fatalf("Records header %+v, Validate header %+v", h, s.Header)
			}
			sameRecords(t, got, recs)
		})
	}
}

// checkErr asserts err wraps want and maps to Kafka code.
func checkErr(t *testing.T, name string, err, want error, code int16) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", name, err, want)
		return
	}
	if got, ok := ErrorCode(err); !ok || got != code {
		t.Errorf("%s: Kafka code %d (%v), want %d", name, got, ok, code)
	}
}

func TestValidateHeaderErrors(t *testing.T) {
	recs := testRecords(3)
	good := kmsgBatch(t, shalelog.CodecNone, recs, nil)
	corrupt := shalelog.ErrCorruptMessage
	invalid := shalelog.ErrInvalidRecord
	cases := []struct {
		name  string
		batch []byte
		opt   ValidateOptions
		want  error
		code  int16
	}{
		{"short", good[:40], ValidateOptions{}, corrupt, 2},
		{"magic 1", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.Magic = 1 }), ValidateOptions{}, corrupt, 2},
		{"truncated", good[:len(good)-1], ValidateOptions{}, corrupt, 2},
		{"crc", func() []byte { b := append([]byte(nil), good...); b[len(b)-1] ^= 1; return b }(), ValidateOptions{}, corrupt, 2},
		{"zero count", rawBatch(nil, 0, nil), ValidateOptions{}, invalid, 87},
		{"last offset delta", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.LastOffsetDelta = 5 }), ValidateOptions{}, invalid, 87},
		{"trailing bytes", append(append([]byte(nil), good...), 1, 2, 3), ValidateOptions{}, corrupt, 2},
		{"two batches", append(append([]byte(nil), good...), good...), ValidateOptions{}, invalid, 87},
		{"base offset", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.FirstOffset = 7 }), ValidateOptions{}, invalid, 87},
		{"control", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.Attributes |= shalelog.AttrControl }), ValidateOptions{}, invalid, 87},
		{"sequence", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.ProducerID = 9; b.FirstSequence = -1 }), ValidateOptions{}, invalid, 87},
		{"codec 6", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.Attributes |= 6 }), ValidateOptions{}, ErrUnsupportedCompression, 76},
		{"garbage gzip", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.Attributes |= shalelog.CodecGzip }), ValidateOptions{}, corrupt, 2},
		{"garbage zstd", kmsgBatch(t, 0, recs, func(b *kmsg.RecordBatch) { b.Attributes |= shalelog.CodecZstd }), ValidateOptions{}, corrupt, 2},
	}
	for _, c := range cases {
		_, err := Validate(c.batch, c.opt)
		checkErr(t, c.name, err, c.want, c.code)
	}
	// The client-only checks do not apply to the broker's own batches.
	for _, mutate := range []func(*kmsg.RecordBatch){
		func(b *kmsg.RecordBatch) { b.FirstOffset = 7 },
		func(b *kmsg.RecordBatch) { b.Attributes |= shalelog.AttrControl },
		func(b *kmsg.RecordBatch) { b.ProducerID = 9; b.FirstSequence = -1 },
	} {
		if _, err := Validate(kmsgBatch(t, 0, recs, mutate), ValidateOptions{Internal: true}); err != nil {
			t.Errorf("internal batch rejected: %v", err)
		}
	}
	// A producer's batch with a sequence is fine.
	idem := kmsgBatch(t, shalelog.CodecLZ4, recs, func(b *kmsg.RecordBatch) { b.ProducerID = 9; b.ProducerEpoch = 0; b.FirstSequence = 0 })
	if _, err := Validate(idem, ValidateOptions{}); err != nil {
		t.Errorf("idempotent batch: %v", err)
	}
	// Too big once decompressed.
	small := newCodecs(t, Config{MaxDecompressedBytes: 100})
	_, err := small.Validate(kmsgBatch(t, shalelog.CodecZstd, testRecords(50), nil), ValidateOptions{})
	checkErr(t, "decompressed too large", err, shalelog.ErrMessageTooLarge, 10)
}

func TestValidateRecordStructure(t *testing.T) {
	one := Record{Key: []byte("k"), Value: []byte("v")}
	two := Record{OffsetDelta: 1, Key: []byte("k"), Value: []byte("v")}
	enc := encodeRecords(one)
	withLen := func(body []byte) []byte { return append(binary.AppendVarint(nil, int64(len(body))), body...) }
	body := enc[1:] // one's fields without its length (short record: 1-byte length)

	cases := []struct {
		name    string
		payload []byte
		count   int32
		msg     string
	}{
		{"fewer records than counted", encodeRecords(Record{Value: make([]byte, 30)}), 2, "payload ends"},
		{"more records than counted", encodeRecords(one, two), 1, "left after"},
		{"offset gap", encodeRecords(one, Record{OffsetDelta: 2}), 2, "offset delta 2"},
		{"offset from 1", encodeRecords(Record{OffsetDelta: 1}), 1, "offset delta 1"},
		{"length too long", append(withLen(append(append([]byte(nil), body...), 0)), 0), 1, "leaves 1 bytes"},
		{"length past payload", append([]byte{0x7e}, body...), 1, "does not fit"},
		{"length too short", withLen(body[:len(body)-1]), 1, ""},
		{"negative length", append(binary.AppendVarint(nil, -3), body...), 1, "does not fit"},
		{"overlong varint", append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, body...), 1, "length varint"},
		{"key past record", withLen([]byte{0, 0, 0, 40, 'k', 2, 'v', 0}), 1, "malformed key"},
		{"negative header count", withLen([]byte{0, 0, 0, 2, 'k', 2, 'v', 1}), 1, "header count -1"},
		{"header count too big", withLen([]byte{0, 0, 0, 2, 'k', 2, 'v', 20}), 1, "header count 10"},
		{"negative header key", withLen([]byte{0, 0, 0, 2, 'k', 2, 'v', 2, 1, 0}), 1, "negative key length"},
		{"header value past record", withLen([]byte{0, 0, 0, 2, 'k', 2, 'v', 2, 0, 40}), 1, "header 0: malformed value"},
		{"count beyond payload", encodeRecords(one), 1000, "cannot fit"},
	}
	for _, c := range cases {
		for _, codec := range []int{shalelog.CodecNone, shalelog.CodecSnappy} {
			payload, _ := Compress(codec, c.payload, nil)
			batch := rawBatch(payload, c.count, func(b *kmsg.RecordBatch) { b.Attributes = int16(codec) })
			_, err := Validate(batch, ValidateOptions{})
			checkErr(t, c.name, err, shalelog.ErrInvalidRecord, 87)
			if err != nil && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: message %q lacks %q", c.name, err, c.msg)
			}
			var ve *ValidationError
			if errors.As(err, &ve) {
				t.Errorf("%s: structural damage reported per record", c.name)
			}
			// Records rejects the same damage (it does not insist on offset order).
			if _, _, err := Records(batch); err == nil && !strings.HasPrefix(c.name, "offset") {
				t.Errorf("%s: Records accepted it", c.name)
			}
		}
	}
	// Null and empty keys, values and headers are all fine.
	batch := rawBatch(encodeRecords(testRecords(10)...), 10, nil)
	if _, err := Validate(batch, ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestValidateCompacted(t *testing.T) {
	recs := testRecords(10) // records 1 and 6 have null keys; 3 and 8 empty ones
	batch := kmsgBatch(t, shalelog.CodecGzip, recs, nil)
	if _, err := Validate(batch, ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := Validate(batch, ValidateOptions{Compacted: true})
	checkErr(t, "compacted", err, shalelog.ErrInvalidRecord, 87)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%T is not a *ValidationError", err)
	}
	if len(ve.Records) != 2 || ve.Records[0].Index != 1 || ve.Records[1].Index != 6 {
		t.Fatalf("record errors %+v", ve.Records)
	}
	if !strings.Contains(ve.Message(), "2 record errors") {
		t.Errorf("message %q", ve.Message())
	}
}

func TestValidateTimestamps(t *testing.T) {
	const now = 1_700_000_000_000
	mk := func(first int64, deltas ...int64) []byte {
		recs := make([]Record, len(deltas))
		for i, d := range deltas {
			recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: d, Key: []byte("k")}
		}
		return kmsgBatch(t, shalelog.CodecNone, recs, func(b *kmsg.RecordBatch) { b.FirstTimestamp = first })
	}
	batch := mk(now-5000, 0, 4000, 10_000) // -5s, -1s, +5s
	cases := []struct {
		name    string
		opt     ValidateOptions
		indexes []int
	}{
		{"unbounded", ValidateOptions{NowMs: now}, nil},
		{"diff 10s", ValidateOptions{NowMs: now, MaxTimestampDiffMs: 10_000}, nil},
		{"diff 2s", ValidateOptions{NowMs: now, MaxTimestampDiffMs: 2000}, []int{0, 2}},
		{"before 2s", ValidateOptions{NowMs: now, MaxTimestampBeforeMs: 2000}, []int{0}},
		{"after 2s", ValidateOptions{NowMs: now, MaxTimestampAfterMs: 2000}, []int{2}},
		{"diff tighter than before", ValidateOptions{NowMs: now, MaxTimestampDiffMs: 500, MaxTimestampBeforeMs: 60_000}, []int{0, 1, 2}},
		{"log append time topic", ValidateOptions{NowMs: now, MaxTimestampDiffMs: 1, LogAppendTime: true}, nil},
	}
	for _, c := range cases {
		_, err := Validate(batch, c.opt)
		if c.indexes == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		checkErr(t, c.name, err, ErrInvalidTimestamp, 32)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %T", c.name, err)
			continue
		}
		var got []int
		for _, r := range ve.Records {
			got = append(got, r.Index)
		}
		if len(got) != len(c.indexes) {
			t.Errorf("%s: rejected %v, want %v", c.name, got, c.indexes)
			continue
		}
		for i := range got {
			if got[i] != c.indexes[i] {
				t.Errorf("%s: rejected %v, want %v", c.name, got, c.indexes)
			}
		}
	}
	// Records without a timestamp (-1) are not range-checked.
	noTS := mk(-1, 0)
	if _, err := Validate(noTS, ValidateOptions{NowMs: now, MaxTimestampDiffMs: 1}); err != nil {
		t.Errorf("no timestamp: %v", err)
	}
	// Extreme timestamps must not overflow the range arithmetic.
	for _, first := range []int64{-1 << 63, 1<<63 - 1} {
		_, err := Validate(mk(first, 0), ValidateOptions{NowMs: now, MaxTimestampDiffMs: 1000})
		checkErr(t, "extreme timestamp", err, ErrInvalidTimestamp, 32)
	}
	// A producer stamping LogAppendTime: refused on a LogAppendTime topic (and for
	// records without a timestamp), range-checked on its max timestamp otherwise.
	lat := kmsgBatch(t, shalelog.CodecNone, testRecords(2), func(b *kmsg.RecordBatch) {
		b.Attributes |= shalelog.AttrTimestampType
		b.MaxTimestamp = now
	})
	_, err := Validate(lat, ValidateOptions{NowMs: now, LogAppendTime: true})
	checkErr(t, "producer LogAppendTime", err, ErrInvalidTimestamp, 32)
	if _, err := Validate(lat, ValidateOptions{NowMs: now, MaxTimestampDiffMs: 10}); err != nil {
		t.Errorf("producer LogAppendTime on a CreateTime topic: %v", err)
	}
	// Key and timestamp errors together: the batch fails as INVALID_TIMESTAMP.
	mixed := kmsgBatch(t, shalelog.CodecNone, []Record{{OffsetDelta: 0}, {OffsetDelta: 1, Key: []byte("k"), TimestampDelta: 1 << 40}}, nil)
	_, err = Validate(mixed, ValidateOptions{Compacted: true, NowMs: now, MaxTimestampDiffMs: 1000})
	checkErr(t, "mixed", err, ErrInvalidTimestamp, 32)
	var ve *ValidationError
	if errors.As(err, &ve) && (len(ve.Records) != 2 || !strings.Contains(ve.Message(), "invalid timestamp")) {
		t.Errorf("mixed: %+v %q", ve.Records, ve.Message())
	}
}

func TestErrorCodeUnknown(t *testing.T) {
	if _, ok := ErrorCode(errors.New("other")); ok {
		t.Error("unrelated error mapped")
	}
	if code, ok := ErrorCode(nil); !ok || code != 0 {
		t.Error("nil error")
	}
}
