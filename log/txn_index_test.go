package log

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

func abortedIn(t *testing.T, l *Log, from, to int64) []AbortedTxn {
	t.Helper()
	got, err := l.AbortedTxns(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTxnIndex(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1024
	l := mustOpen(t, dir, cfg)
	// One batch per segment: segment i holds offset i.
	for i := range 10 {
		mustAppend(t, l, sizedBatch(t, 600, 1000), 0)
		if n := l.NumSegments(); n != i+1 {
			t.Fatalf("%d segments after %d batches", n, i+1)
		}
	}
	a := AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}
	b := AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: 5, LastStableOffset: 4} // producer 3 open from 4
	c := AbortedTxn{ProducerID: 3, FirstOffset: 4, LastOffset: 8, LastStableOffset: 9}
	for _, x := range []AbortedTxn{a, b, c} {
		if err := l.AppendAbortedTxn(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 9, FirstOffset: 7, LastOffset: 8, LastStableOffset: 9}); err == nil {
		t.Error("an entry out of marker order was accepted")
	}
	check := func(what string, from, to int64, want ...AbortedTxn) {
		t.Helper()
		if got := abortedIn(t, l, from, to); !slices.Equal(got, want) {
			t.Errorf("%s: [%d, %d): %+v, want %+v", what, from, to, got, want)
		}
	}
	all := func(what string) {
		check(what, 0, 10, a, b, c)
		// From segment 3: the abort of producer 1 ended before; producer 3's began
		// inside the range and its marker lies beyond it.
		check(what, 3, 5, b, c)
		check(what, 6, 7, c)
		check(what, 9, 10)
	}
	all("appended")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	all("reopened")

	if err := l.Truncate(6); err != nil {
		t.Fatal(err)
	}
	check("truncated", 0, 10, a, b)
	if _, err := os.Stat(segmentPath(dir, 8, txnIndexSuffix)); !os.IsNotExist(err) {
		t.Errorf("the index of the truncated abort is still there: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	check("truncated and reopened", 0, 10, a, b)

	if err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	check("after deleting records", 4, 10, b)
	if _, err := os.Stat(segmentPath(dir, 2, txnIndexSuffix)); !os.IsNotExist(err) {
		t.Errorf("the index of a deleted segment is still there: %v", err)
	}

	// Replay: dropping the entries from an offset, then appending them again.
	if err := l.DropAbortedTxnsFrom(5); err != nil {
		t.Fatal(err)
	}
	check("dropped", 4, 10)
	if err := l.AppendAbortedTxn(b); err != nil {
		t.Fatal(err)
	}
	check("appended again", 4, 10, b)

	// An entry past the log end (its marker lost in a crash) is dropped on load.
	end := l.EndOffset()
	if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 5, FirstOffset: end - 1, LastOffset: end + 3, LastStableOffset: end + 4}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	check("past the end", 4, end+10, b)
	l.Close()

	if err := l.Truncate(0); err == nil {
		t.Error("truncate of a closed log")
	}
	l = mustOpen(t, dir, cfg)
	if err := l.TruncateFully(100); err != nil {
		t.Fatal(err)
	}
	check("truncated fully", 100, 200)
	l.Close()
}

func FuzzTxnIndex(f *testing.F) {
	var seed []byte
	for _, a := range []AbortedTxn{{1, 0, 2, 3}, {2, 3, 5, 4}, {3, 4, 8, 9}} {
		seed = encodeAbortedTxn(seed, a)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-5])
	f.Add(append(append([]byte(nil), seed...), seed[:txnEntrySize]...)) // out of order
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeTxnIndex(b)
		var enc []byte
		for _, a := range got {
			enc = encodeAbortedTxn(enc, a)
		}
		if !slices.Equal(enc, b[:len(enc)]) {
			t.Fatalf("the decoded prefix does not encode back to the input")
		}
		if err == nil && len(enc) != len(b) {
			t.Fatalf("no error, yet %d of %d bytes decoded", len(enc), len(b))
		}
		for i := 1; i < len(got); i++ {
			if got[i].LastOffset <= got[i-1].LastOffset {
				t.Fatalf("entries out of order: %+v", got)
			}
		}
	})
}

// withAttributes sets attribute bits on a batch and fixes its CRC.
func withAttributes(b []byte, attrs uint16) []byte {
	binary.BigEndian.PutUint16(b[offAttributes:], binary.BigEndian.Uint16(b[offAttributes:])|attrs)
	binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
	return b
}

// Compaction never lets an aborted record stand for its key: it drops the records of
// aborted transactions (found in the transaction index) and keeps the committed value
// they would otherwise have displaced, and the marker.
func TestCleanDropsAbortedRecords(t *testing.T) {
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentBytes = 600
	l := mustOpen(t, t.TempDir(), cfg)
	defer func() { l.Close() }()
	ts := clock.Now().UnixMilli()
	mustAppend(t, l, keyedBatch(t, ts, -1, []testRecord{{key: "a", value: []byte("committed")}}), 0)
	mustAppend(t, l, withAttributes(keyedBatch(t, ts, 5, []testRecord{{key: "a", value: []byte("aborted")}}), AttrTransactional), 0)
	marker := mustAppend(t, l, withAttributes(keyedBatch(t, ts, 5, []testRecord{{key: "", value: []byte{0, 0, 0, 0, 0, 0}}}), AttrTransactional|AttrControl), 0)
	if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 5, FirstOffset: 1, LastOffset: marker.BaseOffset, LastStableOffset: marker.BaseOffset + 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		mustAppend(t, l, keyedBatch(t, ts, -1, []testRecord{{key: fmt.Sprint("k", i%3), value: []byte("v")}}), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(cleanOpts(l.EndOffset(), -1)); err != nil {
		t.Fatal(err)
	}
	var a []string
	for _, r := range readRecords(t, l) {
		if r.key == "a" {
			a = append(a, fmt.Sprint(r.offset))
		}
	}
	if !slices.Equal(a, []string{"0"}) {
		t.Errorf("records of key a at offsets %v, want only the committed one at 0", a)
	}
	var control bool
	for _, b := range readAll(t, l, 0) {
		h, _ := ParseHeader(b)
		control = control || (h.IsControl() && h.BaseOffset == marker.BaseOffset)
	}
	if !control {
		t.Error("the abort marker was cleaned away")
	}
}

// An index file stays found when compaction merges its segment into an earlier one, and
// goes when retention deletes the merged segment.
func TestTxnIndexSurvivesSegmentMerge(t *testing.T) {
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentMs = 1000
	cfg.RetentionMs = -1
	l := mustOpen(t, t.TempDir(), cfg)
	defer func() { l.Close() }()
	// Small segments, rolled by time: each holds one batch of two records of one key.
	var bases []int64
	for i := range 6 {
		info := mustAppend(t, l, keyedBatch(t, clock.Now().UnixMilli(), -1, []testRecord{{key: "k", value: []byte("v")}, {key: fmt.Sprint("x", i), value: []byte("v")}}), 0)
		bases = append(bases, info.BaseOffset)
		clock.Advance(2 * time.Second)
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
	}
	// An abort whose marker went into the third segment.
	a := AbortedTxn{ProducerID: 5, FirstOffset: bases[2], LastOffset: bases[2] + 1, LastStableOffset: bases[2] + 2}
	if err := l.AppendAbortedTxn(a); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	before := l.NumSegments()
	if _, err := l.Clean(cleanOpts(l.EndOffset(), -1)); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() >= before {
		t.Fatalf("%d segments before cleaning, %d after: nothing merged", before, l.NumSegments())
	}
	for _, from := range []int64{0, bases[2], bases[2] + 1} {
		if got := abortedIn(t, l, from, l.EndOffset()); !slices.Equal(got, []AbortedTxn{a}) {
			t.Errorf("aborted from %d after the merge: %+v", from, got)
		}
	}
	if err := l.DeleteRecordsBefore(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segmentPath(l.Dir(), bases[2], txnIndexSuffix)); !os.IsNotExist(err) {
		t.Errorf("the index of a deleted merged segment is still there: %v", err)
	}
}
