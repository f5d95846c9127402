package remotelog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/tiered/objstore"
)

func TestUploadReadMatchesTheLocalSegment(t *testing.T) {
	ctx := context.Background()
	l, segs := buildLog(t, 1)
	store := objstore.NewMemory()
	uploadAll(t, ctx, store, segs)
	r := NewReader(Direct(store))
	preallocated := 0
	for _, s := range segs {
		m, err := r.manifest(ctx, s.seg)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(s.files.OffsetIndex); err != nil {
			t.Fatal(err)
		} else if fi.Size() > m.Objects[suffixIndex] {
			preallocated++
		}
		if m.Objects[suffixIndex] < 8*int64(len(s.batches)/20) || m.Objects[suffixTimeIndex] < 12*2 {
			t.Fatalf("segment %d of %d batches: %d bytes of offset index, %d of time index",
				s.seg.BaseOffset, len(s.batches), m.Objects[suffixIndex], m.Objects[suffixTimeIndex])
		}
		got, err := ReadManifest(ctx, store, s.seg)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s.seg) {
			t.Fatalf("manifest describes %+v, uploaded %+v", got, s.seg)
		}
		for _, b := range s.batches {
			for off := b.base; off <= b.last; off++ {
				for _, maxBytes := range []int{0, 1, 700, 5000, 1 << 20} {
					want := s.expectRead(off, maxBytes)
					got, err := r.Read(ctx, s.seg, off, maxBytes)
					if err != nil {
						t.Fatalf("read segment %d offset %d max %d: %v", s.seg.BaseOffset, off, maxBytes, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("read segment %d offset %d max %d: %d bytes, want %d", s.seg.BaseOffset, off, maxBytes, len(got), len(want))
					}
				}
			}
		}
		// What the local log returns for the segment's first offset, whole.
		v, err := l.Read(s.seg.BaseOffset, int(s.seg.SizeBytes), s.seg.EndOffset+1, true)
		if err != nil {
			t.Fatal(err)
		}
		var local []byte
		for _, c := range v.Chunks {
			local = append(local, c...)
		}
		v.Release()
		remote, err := r.Read(ctx, s.seg, s.seg.BaseOffset, int(s.seg.SizeBytes))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(remote, local) {
			t.Fatalf("segment %d: remote read of %d bytes differs from the local read of %d", s.seg.BaseOffset, len(remote), len(local))
		}
	}
	t.Logf("%d of %d segments had index files preallocated past their entries", preallocated, len(segs))
}

func TestReadOutsideTheSegment(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 2)
	store := objstore.NewMemory()
	uploadAll(t, ctx, store, segs[:1])
	r := NewReader(Direct(store))
	s := segs[0].seg
	for _, off := range []int64{s.BaseOffset - 1, s.EndOffset + 1} {
		if _, err := r.Read(ctx, s, off, 1000); !errors.Is(err, shalelog.ErrOffsetOutOfRange) {
			t.Fatalf("read at %d of segment %d-%d: %v, want offset out of range", off, s.BaseOffset, s.EndOffset, err)
		}
	}
	// A segment never uploaded: not found, as the store says.
	if _, err := r.Read(ctx, segs[1].seg, segs[1].seg.BaseOffset, 1000); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("read of a segment not uploaded: %v, want not found", err)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 3)
	store := objstore.NewMemory()
	uploadAll(t, ctx, store, segs)
	r := NewReader(Direct(store))
	for _, s := range segs {
		lo, hi := s.batches[0].maxTs-3, s.seg.MaxTimestamp+2
		for ts := lo; ts <= hi; ts++ {
			var want int64
			found := false
			for _, b := range s.batches {
				if b.maxTs >= ts {
					want, found = b.base, true
					break
				}
			}
			got, ok, err := r.OffsetForTimestamp(ctx, s.seg, ts)
			if err != nil {
				t.Fatal(err)
			}
			if ok != found || got != want {
				t.Fatalf("segment %d timestamp %d: (%d, %v), want (%d, %v)", s.seg.BaseOffset, ts, got, ok, want, found)
			}
		}
	}
}

func TestAbortedTxnsMatchTheLocalLog(t *testing.T) {
	ctx := context.Background()
	l, segs := buildLog(t, 4)
	store := objstore.NewMemory()
	uploadAll(t, ctx, store, segs)
	r := NewReader(Direct(store))
	withTxns := 0
	for _, s := range segs {
		if m, err := r.manifest(ctx, s.seg); err != nil {
			t.Fatal(err)
		} else if m.Objects[suffixTxnIndex] > 0 {
			withTxns++
		}
	}
	if withTxns < 3 {
		t.Fatalf("only %d segments have aborted transactions", withTxns)
	}
	// Aborts end 200 offsets before the log end, so every one a read of the uploaded
	// segments spans is in an uploaded segment.
	end := segs[len(segs)-1].seg.EndOffset + 1
	for from := segs[0].seg.BaseOffset; from < end; from += 7 {
		for _, n := range []int64{1, 15, 60, 400} {
			to := min(from+n, end)
			want, err := l.AbortedTxns(from, to)
			if err != nil {
				t.Fatal(err)
			}
			var got []shalelog.AbortedTxn
			for _, s := range segs {
				if s.seg.EndOffset < from {
					continue
				}
				txns, done, err := r.AbortedTxns(ctx, s.seg, from, to)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, txns...)
				if done {
					break
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("aborted transactions in [%d, %d): %+v, the local log says %+v", from, to, got, want)
			}
		}
	}
}

func TestProducerSnapshot(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 5)
	store := objstore.NewMemory()
	s0, s1 := segs[0], segs[1]
	s1.files.ProducerSnapshot = nil
	uploadAll(t, ctx, store, []testSegment{s0, s1})
	r := NewReader(Direct(store))
	got, err := r.ProducerSnapshot(ctx, s0.seg)
	if err != nil || !bytes.Equal(got, s0.files.ProducerSnapshot) {
		t.Fatalf("snapshot %q, %v; want %q", got, err, s0.files.ProducerSnapshot)
	}
	if got, err := r.ProducerSnapshot(ctx, s1.seg); err != nil || got != nil {
		t.Fatalf("snapshot of a segment uploaded without one: %q, %v", got, err)
	}
}

// failingStore fails the Put of keys with a suffix, as a store that went away midway.
type failingStore struct {
	objstore.Store
	suffix string
}

var errInjected = errors.New("injected put failure")

func (f failingStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if strings.HasSuffix(key, f.suffix) {
		return errInjected
	}
	return f.Store.Put(ctx, key, body, size)
}

func TestListUploadsFindsOrphansAndDeleteRemovesThem(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 6)
	store := objstore.NewMemory()
	s := segs[1]
	committed := s.seg
	if err := Upload(ctx, store, committed, s.files); err != nil {
		t.Fatal(err)
	}
	// A retry of the same segment under a new id, and one that failed before its
	// manifest; another partition's upload, which must not be listed.
	retried := s.seg
	retried.UploadID = NewUploadID()
	if err := Upload(ctx, store, retried, s.files); err != nil {
		t.Fatal(err)
	}
	failed := segs[0].seg
	failed.UploadID = NewUploadID()
	if err := Upload(ctx, failingStore{store, suffixManifest}, failed, segs[0].files); !errors.Is(err, errInjected) {
		t.Fatalf("upload with a failing manifest put: %v", err)
	}
	other := segs[2].seg
	other.Partition = 8
	if err := Upload(ctx, store, other, segs[2].files); err != nil {
		t.Fatal(err)
	}

	refs, err := ListUploads(ctx, store, s.seg.TopicID, s.seg.Partition)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		base     int64
		id       [16]byte
		complete bool
	}
	var got []summary
	for _, r := range refs {
		got = append(got, summary{r.Segment.BaseOffset, r.Segment.UploadID, r.Complete})
		if r.Bytes < r.Segment.SizeBytes || r.Objects < 3 {
			t.Fatalf("upload %+v: %d objects of %d bytes", r.Segment, r.Objects, r.Bytes)
		}
	}
	want := []summary{{failed.BaseOffset, failed.UploadID, false}}
	a, b := summary{committed.BaseOffset, committed.UploadID, true}, summary{retried.BaseOffset, retried.UploadID, true}
	if bytes.Compare(a.id[:], b.id[:]) > 0 {
		a, b = b, a
	}
	want = append(want, a, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("uploads %+v, want %+v", got, want)
	}

	// The orphans go, twice (a delete is retried after any failure); the committed
	// upload stays readable.
	for range 2 {
		for _, r := range refs {
			if r.Segment.UploadID != committed.UploadID {
				if err := Delete(ctx, store, r.Segment); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	refs, err = ListUploads(ctx, store, s.seg.TopicID, s.seg.Partition)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].Segment.UploadID != committed.UploadID {
		t.Fatalf("after deleting the orphans: %+v", refs)
	}
	if _, err := NewReader(Direct(store)).Read(ctx, committed, committed.BaseOffset, 100); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, store, committed); err != nil {
		t.Fatal(err)
	}
	if objs, err := store.List(ctx, PartitionPrefix(s.seg.TopicID, s.seg.Partition)); err != nil || len(objs) != 0 {
		t.Fatalf("after deleting everything: %v, %v", objs, err)
	}
}

func TestUploadRejectsAnInconsistentSegment(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 7)
	s := segs[0]
	for name, mutate := range map[string]func(*Segment){
		"end offset too small": func(g *Segment) { g.EndOffset-- },
		"end offset too large": func(g *Segment) { g.EndOffset++ },
		"size mid-batch":       func(g *Segment) { g.SizeBytes -= 5 },
		"size past the data":   func(g *Segment) { g.SizeBytes += 100 },
		"zero upload id":       func(g *Segment) { g.UploadID = [16]byte{} },
		"base past the data":   func(g *Segment) { g.BaseOffset++ },
	} {
		store := objstore.NewMemory()
		seg := s.seg
		mutate(&seg)
		if err := Upload(ctx, store, seg, s.files); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: %v, want an invalid segment", name, err)
		}
		if objs, _ := store.List(ctx, ""); len(objs) != 0 {
			t.Errorf("%s: %d objects stored", name, len(objs))
		}
	}
}

// A sealed segment whose files are still preallocated (zeros past the data, until the
// log's background trim) uploads as the trimmed one does.
func TestUploadCutsPreallocatedFiles(t *testing.T) {
	ctx := context.Background()
	_, segs := buildLog(t, 8)
	s := segs[2]
	dir := t.TempDir()
	grown := s.files
	for _, p := range []*string{&grown.Log, &grown.OffsetIndex, &grown.TimeIndex} {
		b, err := os.ReadFile(*p)
		if err != nil {
			t.Fatal(err)
		}
		*p = dir + "/" + filepath.Base(*p)
		if err := os.WriteFile(*p, append(b, make([]byte, 4096)...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trimmed, prealloc := objstore.NewMemory(), objstore.NewMemory()
	if err := Upload(ctx, trimmed, s.seg, s.files); err != nil {
		t.Fatal(err)
	}
	if err := Upload(ctx, prealloc, s.seg, grown); err != nil {
		t.Fatal(err)
	}
	a, _ := trimmed.List(ctx, "")
	b, _ := prealloc.List(ctx, "")
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("uploaded from preallocated files: %+v; from trimmed ones: %+v", b, a)
	}
	for _, o := range a {
		x, _ := NewReader(Direct(trimmed)).src.ReadAt(ctx, o.Key, 0, int(o.Size))
		y, _ := NewReader(Direct(prealloc)).src.ReadAt(ctx, o.Key, 0, int(o.Size))
		if !bytes.Equal(x, y) {
			t.Fatalf("object %s differs", o.Key)
		}
	}
}
