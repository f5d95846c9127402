package s3server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/tiered/remotelog"
)

// benchSegment writes a log whose first segment (sealed) holds about segBytes of
// 4 KiB-value batches and returns the log and that segment's description and files.
func benchSegment(b *testing.B, segBytes int64) (*shalelog.Log, remotelog.Segment, remotelog.Files) {
	b.Helper()
	dir := b.TempDir()
	cfg := shalelog.DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := shalelog.Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	value := bytes.Repeat([]byte("shale tiered storage benchmark "), 4096/31)
	for i := 0; l.NumSegments() < 2; i++ {
		recs := make([]records.Record, 4)
		for j := range recs {
			recs[j] = records.Record{OffsetDelta: int32(j), Key: []byte(strconv.Itoa(i)), Value: value}
		}
		h := shalelog.Header{Magic: 2, LastOffsetDelta: 3, FirstTimestamp: int64(i), MaxTimestamp: int64(i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 4}
		batch, err := records.Build(h, shalelog.CodecNone, recs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	seg := remotelog.Segment{TopicID: [16]byte{1}, MaxTimestamp: -1, Epochs: []remotelog.EpochEntry{{Epoch: 1}}}
	err = l.ScanHeaders(0, func(h shalelog.Header) bool {
		if h.BaseOffset > 0 {
			name, _, _ := shalelog.SegmentFileNames(h.BaseOffset)
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return false // the second segment starts here
			}
		}
		seg.EndOffset = h.LastOffset()
		seg.SizeBytes += int64(h.Size())
		seg.MaxTimestamp = max(seg.MaxTimestamp, h.MaxTimestamp)
		return true
	})
	if err != nil {
		b.Fatal(err)
	}
	logName, idx, tidx := shalelog.SegmentFileNames(0)
	files := remotelog.Files{Log: filepath.Join(dir, logName), OffsetIndex: filepath.Join(dir, idx), TimeIndex: filepath.Join(dir, tidx)}
	return l, seg, files
}

// BenchmarkTieredThroughput compares, in one run, uploading a 32 MiB segment to
// versitygw and reading it back as a sequential consumer does (1 MiB fetches): from
// the store directly, through a cold chunk cache (with prefetch), through a warm one,
// and from the local log. MB/s is segment bytes per second.
//
//	go test -run '^$' -bench TieredThroughput -benchtime 5x ./tests/s3server/
func BenchmarkTieredThroughput(b *testing.B) {
	ctx := context.Background()
	srv := Start(b)
	store := srv.NewStore(b, "bench")
	l, seg, files := benchSegment(b, 32<<20)
	const fetch = 1 << 20

	uploaded := seg
	uploaded.UploadID = remotelog.NewUploadID()
	if err := remotelog.Upload(ctx, store, uploaded, files); err != nil {
		b.Fatal(err)
	}
	consume := func(b *testing.B, read func(off int64) ([]byte, error)) {
		for off := seg.BaseOffset; off <= seg.EndOffset; {
			got, err := read(off)
			if err != nil {
				b.Fatal(err)
			}
			last := off
			shalelog.SplitBatches(got) // the consumer's parse, for all alike
			for len(got) > 0 {
				h, err := shalelog.ParseHeader(got)
				if err != nil {
					b.Fatal(err)
				}
				last = h.LastOffset()
				got = got[h.Size():]
			}
			off = last + 1
		}
	}

	b.Run("upload/versitygw", func(b *testing.B) {
		b.SetBytes(seg.SizeBytes)
		for range b.N {
			s := seg
			s.UploadID = remotelog.NewUploadID()
			if err := remotelog.Upload(ctx, store, s, files); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := remotelog.Delete(ctx, store, s); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("read/versitygw-direct", func(b *testing.B) {
		b.SetBytes(seg.SizeBytes)
		for range b.N {
			r := remotelog.NewReader(remotelog.Direct(store))
			consume(b, func(off int64) ([]byte, error) { return r.Read(ctx, uploaded, off, fetch) })
		}
	})
	b.Run("read/versitygw-cache-cold", func(b *testing.B) {
		b.SetBytes(seg.SizeBytes)
		for range b.N {
			b.StopTimer()
			cache, err := remotelog.NewChunkCache(store, remotelog.CacheConfig{Dir: b.TempDir(), ChunkBytes: 1 << 20, Prefetch: 2})
			if err != nil {
				b.Fatal(err)
			}
			r := remotelog.NewReader(cache)
			b.StartTimer()
			consume(b, func(off int64) ([]byte, error) { return r.Read(ctx, uploaded, off, fetch) })
			b.StopTimer()
			cache.Close()
			b.StartTimer()
		}
	})
	b.Run("read/versitygw-cache-warm", func(b *testing.B) {
		cache, err := remotelog.NewChunkCache(store, remotelog.CacheConfig{Dir: b.TempDir(), ChunkBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer cache.Close()
		r := remotelog.NewReader(cache)
		read := func(off int64) ([]byte, error) { return r.Read(ctx, uploaded, off, fetch) }
		consume(b, read)
		b.SetBytes(seg.SizeBytes)
		b.ResetTimer()
		for range b.N {
			consume(b, read)
		}
	})
	b.Run("read/local", func(b *testing.B) {
		b.SetBytes(seg.SizeBytes)
		for range b.N {
			consume(b, func(off int64) ([]byte, error) {
				v, err := l.Read(off, fetch, seg.EndOffset+1, true)
				if err != nil {
					return nil, err
				}
				// A copy, as the remote reads return one.
				out := bytes.Join(v.Chunks, nil)
				v.Release()
				return out, nil
			})
		}
	})
}
