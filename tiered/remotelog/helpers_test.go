package remotelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/tiered/objstore"
)

// testBatch is a batch as the model sees it: where it is in its segment file.
type testBatch struct {
	base, last, maxTs int64
	epoch             int32
	pos, size         int64
}

// testSegment is a sealed segment of a real log, with the model of its batches.
type testSegment struct {
	seg     Segment
	files   Files
	data    []byte // the log file's first SizeBytes bytes
	batches []testBatch
}

// buildLog writes a real log (package log) with small segments, a small index
// interval, batches of varied sizes, non-monotonic timestamps, several leader epochs and
// aborted-transaction entries, and returns it (open, so that its sealed segments may
// still be preallocated past their data) with its sealed segments.
func buildLog(t *testing.T, seed uint64) (*shalelog.Log, []testSegment) {
	t.Helper()
	dir := t.TempDir()
	cfg := shalelog.DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 300
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := shalelog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rng := rand.New(rand.NewPCG(seed, 1))
	ts := int64(1_700_000_000_000)
	epoch := int32(3)
	for i := 0; i < 400; i++ {
		if i%90 == 89 {
			epoch += 1 + int32(rng.IntN(2))
		}
		n := 1 + rng.IntN(6)
		ts += int64(rng.IntN(50)) - 10 // now and then earlier than the batch before
		var recs []records.Record
		for j := 0; j < n; j++ {
			recs = append(recs, records.Record{TimestampDelta: int64(j), OffsetDelta: int32(j),
				Key: []byte("k" + strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i)}, rng.IntN(600))})
		}
		h := shalelog.Header{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1),
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(n)}
		b, err := records.Build(h, shalelog.CodecNone, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, epoch); err != nil {
			t.Fatal(err)
		}
	}
	// Aborted transactions: every 37 offsets, one that began 20 offsets earlier.
	for last := int64(30); last < l.EndOffset()-200; last += 37 {
		a := shalelog.AbortedTxn{ProducerID: last % 5, FirstOffset: last - 20, LastOffset: last, LastStableOffset: last - 20 + int64(rng.IntN(21))}
		if err := l.AppendAbortedTxn(a); err != nil {
			t.Fatal(err)
		}
	}
	var bases []int64
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if stem, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			base, err := strconv.ParseInt(stem, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	if len(bases) < 5 {
		t.Fatalf("only %d segments", len(bases))
	}
	topic := [16]byte{0xab, 1, 2, 3}
	var segs []testSegment
	for _, base := range bases[:len(bases)-1] { // the last is active
		logName, idxName, timeName := shalelog.SegmentFileNames(base)
		ts := testSegment{files: Files{
			Log: filepath.Join(dir, logName), OffsetIndex: filepath.Join(dir, idxName),
			TimeIndex: filepath.Join(dir, timeName), TxnIndex: filepath.Join(dir, shalelog.TxnIndexFileName(base)),
		}}
		raw, err := os.ReadFile(ts.files.Log)
		if err != nil {
			t.Fatal(err)
		}
		seg := Segment{TopicID: topic, Partition: 7, UploadID: NewUploadID(), BaseOffset: base, MaxTimestamp: -1}
		for pos := int64(0); pos+shalelog.BatchHeaderSize <= int64(len(raw)); {
			h, err := shalelog.ParseHeader(raw[pos:])
			if err != nil {
				break // the preallocated tail
			}
			b := testBatch{base: h.BaseOffset, last: h.LastOffset(), maxTs: h.MaxTimestamp, epoch: h.PartitionLeaderEpoch, pos: pos, size: int64(h.Size())}
			ts.batches = append(ts.batches, b)
			seg.MaxTimestamp = max(seg.MaxTimestamp, b.maxTs)
			if n := len(seg.Epochs); n == 0 || seg.Epochs[n-1].Epoch != b.epoch {
				seg.Epochs = append(seg.Epochs, EpochEntry{Epoch: b.epoch, StartOffset: b.base})
			}
			seg.EndOffset = b.last
			pos += b.size
			seg.SizeBytes = pos
		}
		ts.data = raw[:seg.SizeBytes]
		ts.files.ProducerSnapshot = binary.BigEndian.AppendUint64([]byte("snapshot at "), uint64(seg.EndOffset+1))
		ts.seg = seg
		segs = append(segs, ts)
	}
	return l, segs
}

// expectRead is the model of Reader.Read.
func (ts testSegment) expectRead(offset int64, maxBytes int) []byte {
	for i, b := range ts.batches {
		if b.last < offset {
			continue
		}
		end := b.pos + b.size
		for _, c := range ts.batches[i+1:] {
			if c.pos+c.size-b.pos > int64(maxBytes) {
				break
			}
			end = c.pos + c.size
		}
		return ts.data[b.pos:end]
	}
	return nil
}

func uploadAll(t *testing.T, ctx context.Context, store objstore.Store, segs []testSegment) {
	t.Helper()
	for _, s := range segs {
		if err := Upload(ctx, store, s.seg, s.files); err != nil {
			t.Fatalf("upload segment %d: %v", s.seg.BaseOffset, err)
		}
	}
}
