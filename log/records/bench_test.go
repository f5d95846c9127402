package records

import (
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"

	shalelog "github.com/shalelog/shale/log"
)

// Benchmarks use 16 records of 1 KiB JSON-like values: a ~16 KiB batch, a typical
// producer batch. Throughput (MB/s) is of the uncompressed records payload, so codecs
// compare on the data a producer hands over; "ratio" is uncompressed/compressed.

const (
	benchRecordCount = 16
	benchRecordSize  = 1024
)

type benchBatch struct {
	batch   []byte
	rawSize int // uncompressed records payload
}

func benchBatches(b *testing.B) map[int]benchBatch {
	b.Helper()
	recs := benchRecords(benchRecordCount, benchRecordSize, rand.New(rand.NewPCG(7, 7)))
	raw, _ := appendRecords(nil, recs)
	h := shalelog.Header{FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_015, ProducerID: 1, ProducerEpoch: 0}
	out := map[int]benchBatch{}
	for _, codec := range allCodecs {
		batch, err := Build(h, codec, recs)
		if err != nil {
			b.Fatal(err)
		}
		out[codec] = benchBatch{batch: batch, rawSize: len(raw)}
	}
	return out
}

func reportRatio(b *testing.B, bb benchBatch) {
	b.ReportMetric(float64(bb.rawSize)/float64(len(bb.batch)-shalelog.BatchHeaderSize), "ratio")
}

// BenchmarkValidateHeader is the floor: the CRC and header checks alone.
func BenchmarkValidateHeader(b *testing.B) {
	bb := benchBatches(b)[shalelog.CodecNone]
	b.SetBytes(int64(bb.rawSize))
	for b.Loop() {
		if _, err := shalelog.ValidateHeader(bb.batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	batches := benchBatches(b)
	opt := ValidateOptions{Compacted: true, MaxTimestampDiffMs: 1 << 40, NowMs: 1_700_000_000_000}
	for _, codec := range allCodecs {
		bb := batches[codec]
		b.Run(CodecName(codec), func(b *testing.B) {
			b.SetBytes(int64(bb.rawSize))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(bb.batch, opt); err != nil {
					b.Fatal(err)
				}
			}
			reportRatio(b, bb)
		})
	}
}

func BenchmarkRecords(b *testing.B) {
	batches := benchBatches(b)
	for _, codec := range allCodecs {
		bb := batches[codec]
		b.Run(CodecName(codec), func(b *testing.B) {
			b.SetBytes(int64(bb.rawSize))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Records(bb.batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecompress(b *testing.B) {
	batches := benchBatches(b)
	pairs := [][2]int{
		{shalelog.CodecNone, shalelog.CodecZstd},
		{shalelog.CodecNone, shalelog.CodecLZ4},
		{shalelog.CodecNone, shalelog.CodecSnappy},
		{shalelog.CodecNone, shalelog.CodecGzip},
		{shalelog.CodecGzip, shalelog.CodecLZ4},
		{shalelog.CodecSnappy, shalelog.CodecZstd},
		{shalelog.CodecLZ4, shalelog.CodecZstd},
		{shalelog.CodecZstd, shalelog.CodecLZ4},
		{shalelog.CodecZstd, shalelog.CodecNone},
	}
	for _, p := range pairs {
		bb := batches[p[0]]
		b.Run(CodecName(p[0])+"->"+CodecName(p[1]), func(b *testing.B) {
			b.SetBytes(int64(bb.rawSize))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Recompress(bb.batch, p[1]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	recs := benchRecords(benchRecordCount, benchRecordSize, rand.New(rand.NewPCG(7, 7)))
	raw, _ := appendRecords(nil, recs)
	h := shalelog.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	for _, codec := range allCodecs {
		b.Run(CodecName(codec), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(h, codec, recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSnappyBlockDecode compares the strict snappy decoder we use (it rejects s2
// extensions Java consumers cannot read) with the faster, lenient s2 decoder.
func BenchmarkSnappyBlockDecode(b *testing.B) {
	recs := benchRecords(benchRecordCount, benchRecordSize, rand.New(rand.NewPCG(7, 7)))
	raw, _ := appendRecords(nil, recs)
	block := snappy.Encode(nil, raw)
	dst := make([]byte, len(raw))
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := snappy.DecodeStrict(dst, block); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("s2", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := s2.Decode(dst, block); err != nil {
				b.Fatal(err)
			}
		}
	})
}
