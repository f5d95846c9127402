package log_test

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// cleanerBenchBytes is the dirty log each op of BenchmarkCleaner cleans (and reads).
const cleanerBenchBytes = 32 << 20

// buildDirtyLog writes cleanerBenchBytes of keyed records to a fresh log: batches of 10
// records with 100-byte random values over 50,000 keys,
// uncompressed or with codec, in 1 MiB segments, flushed so that every sealed segment
// may be cleaned. It returns the log's directory and config.
func buildDirtyLog(b *testing.B, codec int) (string, shalelog.Config) {
	b.Helper()
	dir, err := os.MkdirTemp(b.TempDir(), "log")
	if err != nil {
		b.Fatal(err)
	}
	cfg := shalelog.DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.Logger = discard()
	l, err := shalelog.Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	now := time.Now().UnixMilli()
	// Random values, so that a codec compresses them about as little as real data and
	// the dirty bytes stand for about as many records in every codec.
	rng := rand.New(rand.NewPCG(1, 2))
	values := make([][]byte, 64)
	for i := range values {
		values[i] = make([]byte, 100)
		for j := range values[i] {
			values[i][j] = byte(rng.IntN(256))
		}
	}
	key := 0
	for l.Size() < cleanerBenchBytes {
		recs := make([]records.Record, 10)
		for i := range recs {
			recs[i] = records.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%06d", key%50000), Value: values[key%len(values)]}
			key += 7
		}
		batch, err := records.Build(shalelog.Header{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, codec, recs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	return dir, cfg
}

// BenchmarkCleaner cleans a 32 MiB dirty log and, in the same run, reads a log of the
// same bytes sequentially from its start (Read, copying every chunk out as a fetch
// would); clean-MB/s and read-MB/s are both per byte of dirty log, ratio is clean/read.
func BenchmarkCleaner(b *testing.B) {
	for _, codec := range []int{shalelog.CodecNone, shalelog.CodecLZ4} {
		b.Run(records.CodecName(codec), func(b *testing.B) {
			var cleanTime, readTime time.Duration
			var dirty, written int64
			buf := make([]byte, 1<<20)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir, cfg := buildDirtyLog(b, codec)
				l, err := shalelog.Open(dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				size := l.Size()
				dirty += size
				b.StartTimer()

				start := time.Now()
				for off := l.StartOffset(); off < l.EndOffset(); {
					v, err := l.Read(off, len(buf), math.MaxInt64, true)
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range v.Chunks {
						copy(buf, c)
					}
					off = v.NextOffset
					v.Release()
				}
				readTime += time.Since(start)

				start = time.Now()
				st, err := l.Clean(shalelog.CleanOptions{UpperBound: l.EndOffset(), Filter: records.CompactionFilter{}, Map: shalelog.NewOffsetMap(128 << 20), DeleteRetentionMs: -1})
				if err != nil {
					b.Fatal(err)
				}
				cleanTime += time.Since(start)
				written += st.BytesWritten
				b.StopTimer()
				l.Close()
				os.RemoveAll(filepath.Dir(dir))
				b.StartTimer()
			}
			mb := float64(dirty) / (1 << 20)
			b.ReportMetric(mb/cleanTime.Seconds(), "clean-MB/s")
			b.ReportMetric(mb/readTime.Seconds(), "read-MB/s")
			b.ReportMetric(readTime.Seconds()/cleanTime.Seconds(), "ratio")
			b.ReportMetric(float64(written)/float64(dirty), "written/dirty")
		})
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
