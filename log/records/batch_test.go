package records

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

func testHeader() shalelog.Header {
	return shalelog.Header{
		BaseOffset:           0,
		PartitionLeaderEpoch: 4,
		Attributes:           shalelog.AttrTransactional,
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_099,
		ProducerID:           77,
		ProducerEpoch:        3,
		BaseSequence:         1000,
	}
}

// kmsgDecode reads a batch with franz-go alone: kmsg for the header and records and
// franz-go's decompressor for the payload.
func kmsgDecode(t *testing.T, batch []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	raw := franzDecompress(t, int(b.Attributes&7), b.Records)
	var recs []kmsg.Record
	for len(raw) > 0 {
		var r kmsg.Record
		if err := r.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		n := int(r.Length) + varintLen(int64(r.Length))
		recs = append(recs, r)
		raw = raw[n:]
	}
	return b, recs
}

func TestBuildRoundTrip(t *testing.T) {
	recs := testRecords(25)
	for _, codec := range allCodecs {
		t.Run(CodecName(codec), func(t *testing.T) {
			h := testHeader()
			batch, err := Build(h, codec, recs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := shalelog.ValidateHeader(batch)
			if err != nil {
				t.Fatal(err)
			}
			want := h
			want.Attributes |= int16(codec)
			want.Length, want.Magic, want.CRC = got.Length, 2, got.CRC
			want.LastOffsetDelta, want.RecordCount = 24, 25
			if got != want {
				t.Fatalf("header\n got %+v\nwant %+v", got, want)
			}
			if got.Size() != len(batch) {
				t.Fatalf("size %d, batch %d bytes", got.Size(), len(batch))
			}
			if _, err := Validate(batch, ValidateOptions{}); err != nil {
				t.Fatal(err)
			}
			_, dec, err := Records(batch)
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, dec, recs)

			// franz-go reads the same thing.
			kb, krecs := kmsgDecode(t, batch)
			if kb.ProducerID != 77 || kb.FirstSequence != 1000 || kb.NumRecords != 25 || int(kb.CRC) != int(int32(got.CRC)) {
				t.Fatalf("kmsg header %+v", kb)
			}
			if len(krecs) != len(recs) {
				t.Fatalf("kmsg found %d records", len(krecs))
			}
			for i, kr := range krecs {
				if !bytes.Equal(kr.Value, recs[i].Value) || (kr.Key == nil) != (recs[i].Key == nil) ||
					kr.OffsetDelta != recs[i].OffsetDelta || kr.TimestampDelta64 != recs[i].TimestampDelta ||
					len(kr.Headers) != len(recs[i].Headers) {
					t.Fatalf("kmsg record %d: %+v", i, kr)
				}
			}
			// And the bytes match kmsg's own encoding of the same records.
			if codec == shalelog.CodecNone {
				if !bytes.Equal(batch[shalelog.BatchHeaderSize:], encodeRecords(recs...)) {
					t.Fatal("record encoding differs from kmsg's")
				}
			}
		})
	}
}

func TestBuildEdgeCases(t *testing.T) {
	// No records (what compaction can leave): header's LastOffsetDelta is kept.
	h := testHeader()
	h.LastOffsetDelta = 9
	batch, err := Build(h, shalelog.CodecZstd, nil)
	if err != nil {
		t.Fatal(err)
	}
	hh, recs, err := Records(batch)
	if err != nil || len(recs) != 0 || hh.LastOffsetDelta != 9 || hh.RecordCount != 0 {
		t.Fatalf("empty batch: %+v %v %v", hh, recs, err)
	}
	if _, err := Validate(batch, ValidateOptions{}); !errors.Is(err, shalelog.ErrInvalidRecord) {
		t.Errorf("empty batch validated: %v", err)
	}
	if _, err := Build(h, 5, nil); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 5: %v", err)
	}
	// Codec bits in h are replaced, other attributes kept.
	h.Attributes = shalelog.AttrControl | shalelog.CodecGzip
	batch, _ = Build(h, shalelog.CodecNone, []Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}})
	if hh, _ := shalelog.ParseHeader(batch); hh.Attributes != shalelog.AttrControl {
		t.Errorf("attributes %#x", hh.Attributes)
	}
	// A nil header key is written as empty (Kafka header keys are never null).
	batch, _ = Build(testHeader(), shalelog.CodecNone, []Record{{Headers: []Header{{Key: nil, Value: []byte("v")}}}})
	_, recs, err = Records(batch)
	if err != nil || recs[0].Headers[0].Key == nil || len(recs[0].Headers[0].Key) != 0 {
		t.Fatalf("nil header key: %+v %v", recs, err)
	}
	// Large negative deltas and big values survive.
	big := []Record{{TimestampDelta: -1 << 62, OffsetDelta: 0, Value: bytes.Repeat([]byte("x"), 1<<20)}}
	batch, _ = Build(testHeader(), shalelog.CodecLZ4, big)
	if _, recs, err = Records(batch); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, recs, big)
}

func TestRecompressEveryPair(t *testing.T) {
	recs := testRecords(60)
	for _, from := range allCodecs {
		src := kmsgBatch(t, from, recs, func(b *kmsg.RecordBatch) {
			b.ProducerID, b.ProducerEpoch, b.FirstSequence = 5, 1, 42
			b.PartitionLeaderEpoch = 8
			b.Attributes |= shalelog.AttrTransactional
		})
		srcHeader, _ := shalelog.ParseHeader(src)
		for _, to := range allCodecs {
			t.Run(CodecName(from)+"->"+CodecName(to), func(t *testing.T) {
				out, err := Recompress(src, to)
				if err != nil {
					t.Fatal(err)
				}
				h, err := Validate(out, ValidateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := srcHeader
				want.Attributes = want.Attributes&^7 | int16(to)
				want.Length, want.CRC = h.Length, h.CRC
				if h != want {
					t.Fatalf("header\n got %+v\nwant %+v", h, want)
				}
				if from == to && &out[0] != &src[0] {
					t.Error("same codec: batch was copied")
				}
				_, got, err := Records(out)
				if err != nil {
					t.Fatal(err)
				}
				sameRecords(t, got, recs)
				// The decompressed payload is byte-identical to the original's.
				a, _ := Decompress(from, src[shalelog.BatchHeaderSize:], nil)
				b, _ := Decompress(to, out[shalelog.BatchHeaderSize:], nil)
				if !bytes.Equal(a, b) {
					t.Fatal("records payload changed")
				}
				_, krecs := kmsgDecode(t, out)
				if len(krecs) != len(recs) {
					t.Fatalf("franz-go sees %d records", len(krecs))
				}
			})
		}
	}
}

func TestRecompressCompactedAndBroken(t *testing.T) {
	// A compacted batch: offset deltas 0, 3, 7 with lastOffsetDelta 9.
	h := testHeader()
	h.LastOffsetDelta = 9
	recs := []Record{{OffsetDelta: 0, Key: []byte("a")}, {OffsetDelta: 3, Key: []byte("b")}, {OffsetDelta: 7, Key: []byte("c")}}
	batch, err := Build(h, shalelog.CodecNone, recs)
	if err != nil {
		t.Fatal(err)
	}
	// Build takes LastOffsetDelta from the last record; put the compaction gap back.
	hb := append([]byte(nil), batch...)
	hb[23+3] = 9
	hb, _ = finishBatch(hb)
	out, err := Recompress(hb, shalelog.CodecSnappy)
	if err != nil {
		t.Fatal(err)
	}
	oh, got, err := Records(out)
	if err != nil || oh.LastOffsetDelta != 9 || oh.RecordCount != 3 {
		t.Fatalf("%+v %v", oh, err)
	}
	sameRecords(t, got, recs)

	bad := append([]byte(nil), out...)
	bad[len(bad)-1] ^= 1
	if _, err := Recompress(bad, shalelog.CodecNone); !errors.Is(err, shalelog.ErrCorruptMessage) {
		t.Errorf("bad crc: %v", err)
	}
	if _, err := Recompress(append(out, 0), shalelog.CodecNone); !errors.Is(err, shalelog.ErrCorruptMessage) {
		t.Errorf("trailing byte: %v", err)
	}
	if _, err := Recompress(out, 7); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 7: %v", err)
	}
	if _, _, err := Records(out[:30]); !errors.Is(err, shalelog.ErrCorruptMessage) {
		t.Errorf("short: %v", err)
	}
}

func TestTargetCodec(t *testing.T) {
	lz4Batch := shalelog.Header{Attributes: shalelog.CodecLZ4}
	control := shalelog.Header{Attributes: shalelog.AttrControl}
	cases := []struct {
		topic string
		h     shalelog.Header
		want  int
		ok    bool
	}{
		{"producer", lz4Batch, shalelog.CodecLZ4, true},
		{"zstd", lz4Batch, shalelog.CodecZstd, true},
		{"uncompressed", lz4Batch, shalelog.CodecNone, true},
		{"gzip", control, shalelog.CodecNone, true},
		{"brotli", lz4Batch, 0, false},
	}
	for _, c := range cases {
		got, ok := TargetCodec(c.topic, c.h)
		if got != c.want || ok != c.ok {
			t.Errorf("TargetCodec(%q, %#x) = %d, %v; want %d, %v", c.topic, c.h.Attributes, got, ok, c.want, c.ok)
		}
	}
}
