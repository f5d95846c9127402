package log

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Benchmarks measure the log beside the plain operation it replaces, in the same run,
// and report the ratio: machines differ and are noisy, ratios much less.
//
//	go test -run '^$' -bench . ./log/

// appendBenchBytes is one benchmark op of BenchmarkAppend: this many bytes through each
// side, alternating in appendBenchSlice pieces so that noise (other processes, page
// cache writeback) hits both alike. An op is big enough to mean something even with
// -benchtime 2x.
const (
	appendBenchBytes = 4 << 20
	appendBenchSlice = 512 << 10
)

// BenchmarkAppend appends batches of each size to a log and writes the same bytes
// with os.File.Write to a plain file in the same directory, in the same run. log-MB/s
// and file-MB/s are the two speeds; ratio is log/file (the goal is >= 0.8).
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 1 << 10, 16 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			dir := b.TempDir()
			cfg := DefaultConfig()
			cfg.Logger = discardLogger()
			l := mustOpen(b, filepath.Join(dir, "log"), cfg)
			defer l.Close()
			f, err := os.Create(filepath.Join(dir, "plain"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			batch := sizedBatch(b, size, time.Now().UnixMilli())
			perSlice := appendBenchSlice / size
			// Warm both paths to their steady state (the log's reservation running ahead),
			// so that even -benchtime 2x measures that.
			for n := 0; n < 2*appendBenchBytes; n += size {
				mustAppend(b, l, batch, 0)
				f.Write(batch)
			}

			var logTime, fileTime time.Duration
			var written int64
			b.SetBytes(appendBenchBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for s := 0; s < appendBenchBytes/appendBenchSlice; s++ {
					start := time.Now()
					for j := 0; j < perSlice; j++ {
						if _, err := l.Append(batch, 1); err != nil {
							b.Fatal(err)
						}
					}
					logTime += time.Since(start)
					start = time.Now()
					for j := 0; j < perSlice; j++ {
						if _, err := f.Write(batch); err != nil {
							b.Fatal(err)
						}
					}
					fileTime += time.Since(start)
					written += int64(perSlice * size)
				}
			}
			b.StopTimer()
			logMBps := float64(written) / 1e6 / logTime.Seconds()
			fileMBps := float64(written) / 1e6 / fileTime.Seconds()
			b.ReportMetric(logMBps, "log-MB/s")
			b.ReportMetric(fileMBps, "file-MB/s")
			b.ReportMetric(logMBps/fileMBps, "ratio")
		})
	}
}

// BenchmarkRead reads a log sequentially in 1 MiB fetches and copies each view into a
// buffer (as a socket write would), beside a plain copy of the same bytes from memory.
// ratio is read/copy (the goal is >= 0.5).
func BenchmarkRead(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Logger = discardLogger()
			cfg.SegmentBytes = 16 << 20 // several segments
			l := mustOpen(b, b.TempDir(), cfg)
			defer l.Close()
			batch := sizedBatch(b, size, time.Now().UnixMilli())
			const total = 64 << 20
			for n := 0; n < total; n += size {
				mustAppend(b, l, batch, 0)
			}
			// The same bytes in ordinary memory, for the copy side.
			src := make([]byte, 0, total)
			for _, bt := range readAll(b, l, 0) {
				src = append(src, bt...)
			}
			const fetch = 1 << 20
			dst := make([]byte, fetch+size)
			end := l.EndOffset()

			var readTime, copyTime time.Duration
			var readBytes, copyBytes int64
			b.SetBytes(int64(len(src)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				for off := int64(0); off < end; {
					v, err := l.Read(off, fetch, end, true)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for _, c := range v.Chunks {
						n += copy(dst[n:], c)
					}
					readBytes += int64(n)
					off = v.NextOffset
					v.Release()
				}
				readTime += time.Since(start)
				start = time.Now()
				for p := 0; p < len(src); p += fetch {
					copyBytes += int64(copy(dst, src[p:min(p+fetch, len(src))]))
				}
				copyTime += time.Since(start)
			}
			b.StopTimer()
			if readBytes != copyBytes {
				b.Fatalf("read %d bytes, copied %d", readBytes, copyBytes)
			}
			readMBps := float64(readBytes) / 1e6 / readTime.Seconds()
			copyMBps := float64(copyBytes) / 1e6 / copyTime.Seconds()
			b.ReportMetric(readMBps, "read-MB/s")
			b.ReportMetric(copyMBps, "copy-MB/s")
			b.ReportMetric(readMBps/copyMBps, "ratio")
		})
	}
}

// BenchmarkRecovery1GiB reopens, after an unclean shutdown, a log whose active segment
// holds 1 GiB of 1 KiB batches: every batch's CRC is verified and both indexes are
// rebuilt. The goal is under 1 s per reopen (with the data in the page cache).
func BenchmarkRecovery1GiB(b *testing.B) {
	dir := b.TempDir()
	cfg := DefaultConfig()
	cfg.Logger = discardLogger()
	l := mustOpen(b, dir, cfg)
	const size = 1 << 10
	batch := sizedBatch(b, size, time.Now().UnixMilli())
	for l.Size()+size <= cfg.SegmentBytes {
		mustAppend(b, l, batch, 0)
	}
	if l.NumSegments() != 1 {
		b.Fatalf("%d segments; want one full active segment", l.NumSegments())
	}
	end, bytes := l.EndOffset(), l.Size()
	l.crashForTest()
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := Open(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if l.EndOffset() != end {
			b.Fatalf("recovered end offset %d, want %d", l.EndOffset(), end)
		}
		l.crashForTest() // stays unclean for the next round
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/reopen")
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
