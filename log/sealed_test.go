package log

import (
	"os"
	"testing"
)

// SealedSegments lists every segment but the active one, with the offsets, size and
// newest timestamp of each and the paths of its files.
func TestSealedSegments(t *testing.T) {
	cfg := testConfig(newFakeClock(1000))
	cfg.SegmentBytes = 1024
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	if got := l.SealedSegments(); len(got) != 0 {
		t.Fatalf("sealed segments of an empty log: %+v", got)
	}
	for i := range 20 {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 3, valueSize: 100, timestamp: int64(100 + i)}), 0)
	}
	sealed := l.SealedSegments()
	if len(sealed) != l.NumSegments()-1 || len(sealed) < 2 {
		t.Fatalf("%d sealed segments of %d", len(sealed), l.NumSegments())
	}
	next := int64(0)
	for _, s := range sealed {
		if s.BaseOffset != next || s.NextOffset <= s.BaseOffset || s.NextOffset%3 != 0 {
			t.Fatalf("segment %+v after %d", s, next)
		}
		next = s.NextOffset
		fi, err := os.Stat(s.Log)
		if err != nil || fi.Size() < s.Size || s.Size <= 0 || s.Size > cfg.SegmentBytes {
			t.Fatalf("segment %d: log file %v (%v), size %d", s.BaseOffset, fi, err, s.Size)
		}
		for _, p := range []string{s.OffsetIndex, s.TimeIndex} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("segment %d: %v", s.BaseOffset, err)
			}
		}
		// The newest timestamp is that of the segment's last batch (3 records each,
		// timestamps 100+i .. 102+i).
		if want := 100 + s.NextOffset/3 - 1 + 2; s.MaxTimestamp != want {
			t.Fatalf("segment %d: max timestamp %d, want %d", s.BaseOffset, s.MaxTimestamp, want)
		}
	}
}

// A closed or deleted log lists no sealed segments (the tiered uploader may ask one that
// a topic deletion or a shutdown has just closed); it used to panic on the empty list.
func TestSealedSegmentsClosedLog(t *testing.T) {
	for _, how := range []string{"close", "delete"} {
		cfg := testConfig(newFakeClock(1000))
		cfg.SegmentBytes = 1024
		l := mustOpen(t, t.TempDir(), cfg)
		for i := range 20 {
			mustAppend(t, l, makeBatch(t, batchSpec{records: 3, valueSize: 100, timestamp: int64(100 + i)}), 0)
		}
		var err error
		if how == "close" {
			err = l.Close()
		} else {
			err = l.Delete()
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := l.SealedSegments(); len(got) != 0 {
			t.Fatalf("after %s: sealed segments %+v", how, got)
		}
	}
}
