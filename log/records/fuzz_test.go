package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

// Fuzz targets run with a 1 MiB decompression bound so a found bomb costs little.
const fuzzLimit = 1 << 20

// fixHeader makes b's length, magic and CRC consistent so the fuzzer gets past the
// header checks into the payload and records.
func fixHeader(b []byte) []byte {
	if len(b) < shalelog.BatchHeaderSize {
		return nil
	}
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[17:], shalelog.ComputeCRC(b))
	return b
}

// knownErr reports whether err is one of the errors callers map to Kafka codes.
func knownErr(err error) bool {
	_, ok := ErrorCode(err)
	return ok
}

func FuzzValidate(f *testing.F) {
	c := newCodecs(f, Config{MaxDecompressedBytes: fuzzLimit})
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := []ValidateOptions{{}, {Compacted: true, MaxTimestampDiffMs: 1000, NowMs: 1_700_000_000_000}, {Internal: true}}
		for _, in := range [][]byte{data, fixHeader(data)} {
			for _, opt := range opts {
				h, err := c.Validate(in, opt)
				if err != nil {
					if !knownErr(err) {
						t.Fatalf("unmapped error %v", err)
					}
					continue
				}
				checkValidBatch(t, c, in, h)
			}
		}
	})
}

// checkValidBatch asserts what must hold for any batch Validate accepted: it decodes,
// rebuilds to the same records, and recompresses losslessly.
func checkValidBatch(t *testing.T, c *Codecs, batch []byte, h shalelog.Header) {
	_, recs, err := c.Records(batch)
	if err != nil {
		t.Fatalf("validated batch does not decode: %v", err)
	}
	if len(recs) != int(h.RecordCount) {
		t.Fatalf("%d records, header says %d", len(recs), h.RecordCount)
	}
	rebuilt, err := c.Build(h, h.Codec(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Validate(rebuilt, ValidateOptions{Internal: true}); err != nil {
		t.Fatalf("rebuilt batch rejected: %v", err)
	}
	_, again, err := c.Records(rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, again, recs)
	for _, to := range []int{shalelog.CodecNone, shalelog.CodecZstd} {
		out, err := c.Recompress(batch, to)
		if err != nil {
			if errors.Is(err, ErrDecompressedTooLarge) {
				continue
			}
			t.Fatalf("recompress to %s: %v", CodecName(to), err)
		}
		_, got, err := c.Records(out)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, got, recs)
	}
}

func FuzzRecords(f *testing.F) {
	c := newCodecs(f, Config{MaxDecompressedBytes: fuzzLimit})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, fixHeader(data)} {
			h, recs, err := c.Records(in)
			if err != nil {
				if !knownErr(err) {
					t.Fatalf("unmapped error %v", err)
				}
				continue
			}
			out, err := c.Build(h, h.Codec(), recs)
			if err != nil {
				t.Fatal(err)
			}
			_, again, err := c.Records(out)
			if err != nil {
				t.Fatalf("rebuilt batch does not decode: %v", err)
			}
			sameRecords(t, again, recs)
		}
	})
}

func FuzzDecompress(f *testing.F) {
	c := newCodecs(f, Config{MaxDecompressedBytes: fuzzLimit})
	f.Fuzz(func(t *testing.T, codec uint8, data []byte) {
		out, err := c.Decompress(int(codec%8), data, nil)
		if err != nil {
			if !knownErr(err) {
				t.Fatalf("unmapped error %v", err)
			}
			return
		}
		if len(out) > fuzzLimit {
			t.Fatalf("%d bytes out, limit %d", len(out), fuzzLimit)
		}
		comp, err := c.Compress(int(codec%8), out, nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.Decompress(int(codec%8), comp, nil)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("recompressed output does not round-trip: %v", err)
		}
	})
}

// TestWriteFuzzSeeds regenerates the committed seed corpora under testdata/fuzz when
// RECORDS_WRITE_FUZZ_SEEDS=1; otherwise it checks they exist.
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	write := os.Getenv("RECORDS_WRITE_FUZZ_SEEDS") == "1"
	for target, entries := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		if !write {
			files, err := os.ReadDir(dir)
			if err != nil || len(files) < len(entries) {
				t.Errorf("%s: %d seed files, want %d (RECORDS_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds)", dir, len(files), len(entries))
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, args := range entries {
			var b bytes.Buffer
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte:
					fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
				case uint8:
					fmt.Fprintf(&b, "byte(%d)\n", v)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func fuzzSeeds(t *testing.T) map[string]map[string][]any {
	batches := map[string][]byte{}
	for _, codec := range allCodecs {
		batches["valid-"+CodecName(codec)] = kmsgBatch(t, codec, testRecords(6), nil)
	}
	batches["idempotent-lz4"] = kmsgBatch(t, shalelog.CodecLZ4, testRecords(3), func(b *kmsg.RecordBatch) {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = 1, 0, 0
	})
	// Raw snappy block instead of xerial framing.
	raw := encodeRecords(testRecords(4)...)
	batches["raw-snappy"] = rawBatch(snappy.Encode(nil, raw), 4, func(b *kmsg.RecordBatch) { b.Attributes = shalelog.CodecSnappy })
	batches["compacted-gap"] = rawBatch(encodeRecords(Record{OffsetDelta: 0, Key: []byte("a")}, Record{OffsetDelta: 5, Key: []byte("b")}), 2,
		func(b *kmsg.RecordBatch) { b.LastOffsetDelta = 1 })
	batches["no-key"] = rawBatch(encodeRecords(Record{}), 1, nil)
	batches["bad-crc"] = func() []byte { b := kmsgBatch(t, 0, testRecords(2), nil); b[30] ^= 1; return b }()
	batches["header-only"] = kmsgBatch(t, 0, testRecords(1), nil)[:shalelog.BatchHeaderSize]

	validate := map[string][]any{}
	for name, b := range batches {
		validate[name] = []any{b}
	}
	decompress := map[string][]any{}
	text := bytes.Repeat([]byte("record payload "), 300)
	for _, codec := range allCodecs {
		comp, err := Compress(codec, text, nil)
		if err != nil {
			t.Fatal(err)
		}
		decompress["text-"+CodecName(codec)] = []any{uint8(codec), comp}
	}
	decompress["raw-snappy"] = []any{uint8(shalelog.CodecSnappy), snappy.Encode(nil, text)}
	decompress["xerial-header"] = []any{uint8(shalelog.CodecSnappy), append(append([]byte(nil), xerialMagic...), xerialVersion...)}
	decompress["snappy-claim"] = []any{uint8(shalelog.CodecSnappy), binary.AppendUvarint(nil, 1<<32-1)}
	return map[string]map[string][]any{
		"FuzzValidate":   validate,
		"FuzzRecords":    validate,
		"FuzzDecompress": decompress,
	}
}
