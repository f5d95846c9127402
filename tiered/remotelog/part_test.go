package remotelog

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/tiered/objstore"
)

// part is the model of a segment's part from its k-th batch, as the uploader uploads a
// local segment that begins inside the remote log.
func (ts testSegment) part(k int) testSegment {
	cut := ts.batches[k]
	out := testSegment{files: ts.files, data: ts.data[cut.pos:]}
	out.files.LogPosition = cut.pos
	out.seg = ts.seg
	out.seg.UploadID = NewUploadID()
	out.seg.BaseOffset, out.seg.SizeBytes, out.seg.MaxTimestamp, out.seg.Epochs = cut.base, ts.seg.SizeBytes-cut.pos, -1, nil
	for _, b := range ts.batches[k:] {
		b.pos -= cut.pos
		out.batches = append(out.batches, b)
		out.seg.MaxTimestamp = max(out.seg.MaxTimestamp, b.maxTs)
		if n := len(out.seg.Epochs); n == 0 || out.seg.Epochs[n-1].Epoch != b.epoch {
			out.seg.Epochs = append(out.seg.Epochs, EpochEntry{Epoch: b.epoch, StartOffset: b.base})
		}
	}
	return out
}

// TestUploadPartOfASegment: an upload from a batch inside a segment holds only the
// batches from there, and reads, timestamp lookups and aborted transactions of the part
// match the model, with the indexes rebuilt relative to the part.
func TestUploadPartOfASegment(t *testing.T) {
	ctx := context.Background()
	l, segs := buildLog(t, 6)
	store := objstore.NewMemory()
	r := NewReader(Direct(store))
	for _, whole := range segs {
		for _, k := range []int{1, len(whole.batches) / 3, len(whole.batches) - 1} {
			s := whole.part(k)
			if err := Upload(ctx, store, s.seg, s.files); err != nil {
				t.Fatalf("upload segment %d from batch %d: %v", whole.seg.BaseOffset, k, err)
			}
			m, err := r.manifest(ctx, s.seg)
			if err != nil {
				t.Fatal(err)
			}
			if m.Objects[suffixLog] != int64(len(s.data)) {
				t.Fatalf("part of %d bytes uploaded as %d", len(s.data), m.Objects[suffixLog])
			}
			if s.seg.SizeBytes > 2*shalelog.DefaultIndexIntervalBytes && (m.Objects[suffixIndex] == 0 || m.Objects[suffixTimeIndex] == 0) {
				t.Fatalf("part of %d bytes without rebuilt indexes: %v", s.seg.SizeBytes, m.Objects)
			}
			for _, b := range s.batches {
				for off := b.base; off <= b.last; off++ {
					for _, maxBytes := range []int{1, 700, 5000, 1 << 20} {
						got, err := r.Read(ctx, s.seg, off, maxBytes)
						if err != nil {
							t.Fatal(err)
						}
						if want := s.expectRead(off, maxBytes); !bytes.Equal(got, want) {
							t.Fatalf("part %d of segment %d: read %d max %d: %d bytes, want %d", s.seg.BaseOffset, whole.seg.BaseOffset, off, maxBytes, len(got), len(want))
						}
					}
				}
			}
			for ts := s.batches[0].maxTs - 3; ts <= s.seg.MaxTimestamp+2; ts++ {
				var want int64
				found := false
				for _, b := range s.batches {
					if b.maxTs >= ts {
						want, found = b.base, true
						break
					}
				}
				got, ok, err := r.OffsetForTimestamp(ctx, s.seg, ts)
				if err != nil || ok != found || got != want {
					t.Fatalf("part %d: timestamp %d: (%d, %v, %v), want (%d, %v)", s.seg.BaseOffset, ts, got, ok, err, want, found)
				}
			}
			// The aborts whose markers are in the part, as the local log has them.
			txns, _, err := r.AbortedTxns(ctx, s.seg, 0, s.seg.EndOffset+1)
			if err != nil {
				t.Fatal(err)
			}
			all, err := l.AbortedTxns(0, l.EndOffset())
			if err != nil {
				t.Fatal(err)
			}
			var want []shalelog.AbortedTxn
			for _, a := range all {
				if a.LastOffset >= s.seg.BaseOffset && a.LastOffset <= s.seg.EndOffset {
					want = append(want, a)
				}
			}
			if !reflect.DeepEqual(txns, want) {
				t.Fatalf("part %d-%d: aborted transactions %+v, want %+v", s.seg.BaseOffset, s.seg.EndOffset, txns, want)
			}
		}
	}
}

// TestUploadPartMustBeginAtABatch: a position that is not where the part's base
// offset's batch begins is refused, nothing uploaded.
func TestUploadPartMustBeginAtABatch(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 7)
	store := objstore.NewMemory()
	s := segs[0].part(2)
	s.seg.BaseOffset = segs[0].batches[1].base
	if err := Upload(ctx, store, s.seg, s.files); !errors.Is(err, ErrInvalidSegment) {
		t.Fatalf("upload of a part whose position holds another batch: %v, want invalid", err)
	}
	objs, err := store.List(ctx, "")
	if err != nil || len(objs) != 0 {
		t.Fatalf("%d objects left, %v", len(objs), err)
	}
}
