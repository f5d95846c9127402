package s3server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/objstore/objstoretest"
	"github.com/shalelog/shale/tiered/remotelog"
)

func TestConformanceAgainstVersitygw(t *testing.T) {
	srv := Start(t)
	store := srv.NewStore(t, "conformance")
	objstoretest.Run(t, func(*testing.T) objstore.Store { return store }, objstoretest.Options{})
}

func TestStopEndsTheProcess(t *testing.T) {
	srv := Start(t)
	srv.Stop()
	select {
	case <-srv.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Get(srv.Endpoint + "/health"); err == nil {
		resp.Body.Close()
		t.Fatalf("the server still answers after Stop: %s", resp.Status)
	}
	srv.Stop() // harmless twice
}

// The script that builds the binary and the Go code that finds it agree on the version.
func TestBuildScriptVersion(t *testing.T) {
	b, err := os.ReadFile("build-versitygw.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VERSITYGW_VERSION=\$\{VERSITYGW_VERSION:-(v[0-9.]+)\}`).FindSubmatch(b)
	if m == nil || string(m[1]) != Version {
		t.Fatalf("build-versitygw.sh builds %q, s3server.Version is %s", m, Version)
	}
}

// Segments of a real log go to the real server and come back byte for byte, through
// the chunk cache; the orphan of a second upload is found and deleted.
func TestRemoteLogAgainstVersitygw(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	store := srv.NewStore(t, "cluster")

	dir := t.TempDir()
	cfg := shalelog.DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := shalelog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 600; i++ {
		recs := []records.Record{{Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i)}, 100+i%700)}}
		h := shalelog.Header{Magic: 2, FirstTimestamp: int64(1000 + i), MaxTimestamp: int64(1000 + i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}
		batch, err := records.Build(h, shalelog.CodecNone, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, 1); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments", l.NumSegments())
	}

	// The sealed segments, described by the headers the log itself scans.
	type seg struct {
		remotelog.Segment
		files remotelog.Files
	}
	var segs []seg
	var cur *seg
	topic := [16]byte{9, 9, 9}
	err = l.ScanHeaders(0, func(h shalelog.Header) bool {
		name, _, _ := shalelog.SegmentFileNames(h.BaseOffset)
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			segs = append(segs, seg{Segment: remotelog.Segment{TopicID: topic, Partition: 0, UploadID: remotelog.NewUploadID(),
				BaseOffset: h.BaseOffset, MaxTimestamp: -1, Epochs: []remotelog.EpochEntry{{Epoch: 1, StartOffset: h.BaseOffset}}}})
			cur = &segs[len(segs)-1]
			logName, idx, tidx := shalelog.SegmentFileNames(h.BaseOffset)
			cur.files = remotelog.Files{Log: filepath.Join(dir, logName), OffsetIndex: filepath.Join(dir, idx), TimeIndex: filepath.Join(dir, tidx)}
		}
		cur.EndOffset = h.LastOffset()
		cur.SizeBytes += int64(h.Size())
		cur.MaxTimestamp = max(cur.MaxTimestamp, h.MaxTimestamp)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	segs = segs[:len(segs)-1] // the active one
	for _, s := range segs {
		if err := remotelog.Upload(ctx, store, s.Segment, s.files); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := remotelog.NewChunkCache(store, remotelog.CacheConfig{Dir: t.TempDir(), ChunkBytes: 16 << 10, MaxBytes: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	r := remotelog.NewReader(cache)
	for _, s := range segs {
		// A consumer reading the segment from its start, 5000 bytes a fetch.
		for off := s.BaseOffset; off <= s.EndOffset; {
			got, err := r.Read(ctx, s.Segment, off, 5000)
			if err != nil {
				t.Fatal(err)
			}
			v, err := l.Read(off, 5000, s.EndOffset+1, true)
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.Join(v.Chunks, nil)
			next := v.NextOffset
			v.Release()
			if !bytes.Equal(got, want) {
				t.Fatalf("segment %d offset %d: %d bytes from versitygw, %d local", s.BaseOffset, off, len(got), len(want))
			}
			off = next
		}
		if off, ok, err := r.OffsetForTimestamp(ctx, s.Segment, s.MaxTimestamp); err != nil || !ok || off != s.EndOffset {
			t.Fatalf("offset for the segment's largest timestamp: %d, %v, %v; want %d", off, ok, err, s.EndOffset)
		}
	}
	if st := cache.Stats(); st.Prefetches == 0 || st.Hits == 0 || st.Bytes > 128<<10 {
		t.Fatalf("cache stats: %+v", st)
	}

	orphan := segs[0].Segment
	orphan.UploadID = remotelog.NewUploadID()
	if err := remotelog.Upload(ctx, store, orphan, segs[0].files); err != nil {
		t.Fatal(err)
	}
	refs, err := remotelog.ListUploads(ctx, store, topic, 0)
	if err != nil || len(refs) != len(segs)+1 {
		t.Fatalf("%d uploads listed (%v), want %d", len(refs), err, len(segs)+1)
	}
	if err := remotelog.Delete(ctx, store, orphan); err != nil {
		t.Fatal(err)
	}
	if refs, err := remotelog.ListUploads(ctx, store, topic, 0); err != nil || len(refs) != len(segs) {
		t.Fatalf("%d uploads listed after deleting the orphan (%v), want %d", len(refs), err, len(segs))
	}
}
