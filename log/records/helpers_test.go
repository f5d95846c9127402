package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

var allCodecs = []int{shalelog.CodecNone, shalelog.CodecGzip, shalelog.CodecSnappy, shalelog.CodecLZ4, shalelog.CodecZstd}

// franzCompress compresses with franz-go's own compressor: an implementation independent
// of ours, configured the way a franz-go producer is.
func franzCompress(t testing.TB, codec int, src []byte) []byte {
	t.Helper()
	var cc kgo.CompressionCodec
	switch codec {
	case shalelog.CodecNone:
		return append([]byte(nil), src...)
	case shalelog.CodecGzip:
		cc = kgo.GzipCompression()
	case shalelog.CodecSnappy:
		cc = kgo.SnappyCompression()
	case shalelog.CodecLZ4:
		cc = kgo.Lz4Compression()
	case shalelog.CodecZstd:
		cc = kgo.ZstdCompression()
	}
	c, err := kgo.DefaultCompressor(cc)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	out, used := c.Compress(&buf, src)
	if int(used) != codec {
		t.Fatalf("franz-go compressed %s as codec %d", CodecName(codec), used)
	}
	return append([]byte(nil), out...)
}

func franzDecompress(t testing.TB, codec int, src []byte) []byte {
	t.Helper()
	out, err := kgo.DefaultDecompressor().Decompress(src, kgo.CompressionCodecType(codec))
	if err != nil {
		t.Fatalf("franz-go cannot decompress our %s: %v", CodecName(codec), err)
	}
	return out
}

// kmsgRecord encodes one record with franz-go's kmsg encoder, computing its length.
func kmsgRecord(r Record) []byte {
	kr := kmsg.Record{
		Attributes:       r.Attributes,
		TimestampDelta64: r.TimestampDelta,
		OffsetDelta:      r.OffsetDelta,
		Key:              r.Key,
		Value:            r.Value,
	}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
	}
	body := kr.AppendTo(nil)
	kr.Length = int32(len(body) - 1) // Length 0 encoded as one varint byte
	return kr.AppendTo(nil)
}

// kmsgBatch builds a batch with kmsg and franz-go's compressor: records encoded by
// kmsg, header encoded by kmsg, CRC computed by package log. mutate may adjust the
// kmsg batch (before the CRC is computed) to make it invalid in some way.
func kmsgBatch(t testing.TB, codec int, recs []Record, mutate func(*kmsg.RecordBatch)) []byte {
	t.Helper()
	var raw []byte
	for _, r := range recs {
		raw = append(raw, kmsgRecord(r)...)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_000 + int64(len(recs)),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              franzCompress(t, codec, raw),
	}
	if mutate != nil {
		mutate(&b)
	}
	return encodeKmsgBatch(b)
}

// encodeKmsgBatch serialises b with the correct length and CRC.
func encodeKmsgBatch(b kmsg.RecordBatch) []byte {
	b.Length = int32(shalelog.BatchHeaderSize - 12 + len(b.Records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], shalelog.ComputeCRC(out))
	return out
}

// testRecords makes n records with a mix of null/empty keys and values and headers.
func testRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := Record{
			TimestampDelta: int64(i),
			OffsetDelta:    int32(i),
			Key:            []byte(fmt.Sprintf("key-%d", i)),
			Value:          []byte(fmt.Sprintf(`{"n":%d,"payload":"%s"}`, i, bytes.Repeat([]byte{'a' + byte(i%26)}, i%50))),
		}
		switch i % 5 {
		case 1:
			r.Key = nil
		case 2:
			r.Value = nil
		case 3:
			r.Key, r.Value = []byte{}, []byte{}
			r.Headers = []Header{{Key: []byte("h1"), Value: []byte("v1")}, {Key: []byte("h2"), Value: nil}}
		case 4:
			r.Headers = []Header{{Key: []byte{}, Value: []byte{}}}
		}
		recs[i] = r
	}
	return recs
}

// benchRecords makes n records of about size bytes each, compressible like typical
// JSON events: a fixed shape with random identifiers and numbers.
func benchRecords(n, size int, rng *rand.Rand) []Record {
	recs := make([]Record, n)
	for i := range recs {
		var v bytes.Buffer
		for v.Len() < size {
			fmt.Fprintf(&v, `{"user":"u%08x","event":"page_view","ms":%d,"path":"/items/%d","ok":true},`,
				rng.Uint32(), rng.IntN(100000), rng.IntN(5000))
		}
		recs[i] = Record{
			TimestampDelta: int64(i),
			OffsetDelta:    int32(i),
			Key:            []byte(fmt.Sprintf("user-%d", rng.IntN(1000))),
			Value:          v.Bytes()[:size],
		}
	}
	return recs
}

func sameRecords(t testing.TB, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Attributes != w.Attributes || g.TimestampDelta != w.TimestampDelta || g.OffsetDelta != w.OffsetDelta {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		sameBytes(t, fmt.Sprintf("record %d key", i), g.Key, w.Key)
		sameBytes(t, fmt.Sprintf("record %d value", i), g.Value, w.Value)
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			sameBytes(t, fmt.Sprintf("record %d header %d key", i, j), g.Headers[j].Key, w.Headers[j].Key)
			sameBytes(t, fmt.Sprintf("record %d header %d value", i, j), g.Headers[j].Value, w.Headers[j].Value)
		}
	}
}

// sameBytes compares including the null/empty distinction.
func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s: got %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}

func newCodecs(t testing.TB, cfg Config) *Codecs {
	t.Helper()
	c, err := NewCodecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
