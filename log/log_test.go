package log

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestAppendAssignsOffsetsAndEpoch(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	var want [][]byte
	next := int64(0)
	for i := 0; i < 50; i++ {
		b := makeBatch(t, batchSpec{base: 999, records: 1 + i%4, valueSize: 10 * i, timestamp: int64(1000 + i), epoch: 77})
		orig := bytes.Clone(b)
		info := mustAppend(t, l, b, 5)
		if !bytes.Equal(b, orig) {
			t.Fatal("Append modified the caller's batch")
		}
		n := int64(1 + i%4)
		if info.BaseOffset != next || info.LastOffset != next+n-1 || info.RecordCount != int32(n) || info.Size != len(b) {
			t.Fatalf("append %d: %+v, want base %d last %d", i, info, next, next+n-1)
		}
		if info.MaxTimestamp != int64(1000+i)+n-1 {
			t.Fatalf("append %d: MaxTimestamp %d", i, info.MaxTimestamp)
		}
		SetBaseOffset(orig, next)
		SetPartitionLeaderEpoch(orig, 5)
		want = append(want, orig)
		next += n
	}
	if l.EndOffset() != next || l.StartOffset() != 0 {
		t.Fatalf("offsets [%d, %d), want [0, %d)", l.StartOffset(), l.EndOffset(), next)
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
		if _, err := ValidateHeader(got[i]); err != nil {
			t.Fatalf("batch %d no longer valid: %v", i, err)
		}
	}
	checkIndexes(t, l)
}

func TestAppendRejectsInvalidBatches(t *testing.T) {
	cfg := testConfig(nil)
	cfg.MaxMessageBytes = 2000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	good := makeBatch(t, batchSpec{records: 3, valueSize: 20})
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	setCount := func(n int32) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint32(b[offRecordCount:], uint32(n))
		binary.BigEndian.PutUint32(b[offCRC:], ComputeCRC(b))
		return b
	}
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"empty", nil, ErrCorruptMessage},
		{"short header", good[:40], ErrCorruptMessage},
		{"truncated", good[:len(good)-1], ErrCorruptMessage},
		{"trailing bytes", append(bytes.Clone(good), 0), ErrCorruptMessage},
		{"two batches", append(bytes.Clone(good), good...), ErrCorruptMessage},
		{"bad crc", flip(offCRC), ErrCorruptMessage},
		{"bad record byte", flip(len(good) - 1), ErrCorruptMessage},
		{"magic 1", func() []byte { b := bytes.Clone(good); b[offMagic] = 1; return b }(), ErrCorruptMessage},
		{"record count mismatch", setCount(2), ErrInvalidRecord},
		{"zero records", setCount(0), ErrInvalidRecord},
		{"too large", makeBatch(t, batchSpec{valueSize: 3000}), ErrMessageTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Append(tc.batch, 1)
			if !isErr(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if l.EndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("a rejected batch changed the log: end %d size %d", l.EndOffset(), l.Size())
			}
		})
	}
	mustAppend(t, l, good, 1)
}

func TestReadSemantics(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	// Ten batches of 3 records: offsets 0-2, 3-5, ..., 27-29.
	var sizes []int
	for i := 0; i < 10; i++ {
		b := makeBatch(t, batchSpec{records: 3, valueSize: 100, timestamp: int64(i * 10)})
		mustAppend(t, l, b, 0)
		sizes = append(sizes, len(b))
	}
	sz := sizes[0]
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		maxOffset int64
		minOne    bool
		wantErr   error
		wantFirst int64
		wantN     int // batches
	}{
		{name: "from start", offset: 0, maxBytes: 1 << 20, maxOffset: 30, wantFirst: 0, wantN: 10},
		{name: "inside a batch", offset: 4, maxBytes: 1 << 20, maxOffset: 30, wantFirst: 3, wantN: 9},
		{name: "last record", offset: 29, maxBytes: 1 << 20, maxOffset: 30, wantFirst: 27, wantN: 1},
		{name: "at end is empty", offset: 30, maxBytes: 1 << 20, maxOffset: 30, wantFirst: 30, wantN: 0},
		{name: "beyond end", offset: 31, maxBytes: 1 << 20, maxOffset: 30, wantErr: ErrOffsetOutOfRange},
		{name: "negative", offset: -1, maxBytes: 1 << 20, maxOffset: 30, wantErr: ErrOffsetOutOfRange},
		{name: "maxBytes two batches", offset: 0, maxBytes: 2*sz + sz/2, maxOffset: 30, wantFirst: 0, wantN: 2},
		{name: "maxBytes exact", offset: 0, maxBytes: 3 * sz, maxOffset: 30, wantFirst: 0, wantN: 3},
		{name: "maxBytes too small", offset: 0, maxBytes: sz - 1, maxOffset: 30, wantFirst: 0, wantN: 0},
		{name: "minOne", offset: 0, maxBytes: sz - 1, maxOffset: 30, minOne: true, wantFirst: 0, wantN: 1},
		{name: "minOne zero bytes", offset: 6, maxBytes: 0, maxOffset: 30, minOne: true, wantFirst: 6, wantN: 1},
		{name: "high watermark", offset: 0, maxBytes: 1 << 20, maxOffset: 9, wantFirst: 0, wantN: 3},
		{name: "high watermark inside batch", offset: 0, maxBytes: 1 << 20, maxOffset: 10, wantFirst: 0, wantN: 4},
		{name: "at high watermark", offset: 9, maxBytes: 1 << 20, maxOffset: 9, wantFirst: 9, wantN: 0},
		{name: "maxOffset beyond end", offset: 27, maxBytes: 1 << 20, maxOffset: math.MaxInt64, wantFirst: 27, wantN: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := l.Read(tc.offset, tc.maxBytes, tc.maxOffset, tc.minOne)
			if tc.wantErr != nil {
				if !isErr(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			var n, size int
			for _, c := range v.Chunks {
				bs, err := SplitBatches(c)
				if err != nil {
					t.Fatal(err)
				}
				n += len(bs)
				size += len(c)
			}
			if n != tc.wantN || v.FirstOffset != tc.wantFirst || v.Size != size {
				t.Fatalf("got %d batches from %d (size %d/%d), want %d from %d", n, v.FirstOffset, v.Size, size, tc.wantN, tc.wantFirst)
			}
			wantNext := tc.offset // empty
			if n > 0 {
				wantNext = tc.wantFirst + int64(3*n)
			}
			if v.NextOffset != wantNext {
				t.Fatalf("NextOffset %d, want %d", v.NextOffset, wantNext)
			}
			if !tc.minOne && v.Size > tc.maxBytes {
				t.Fatalf("size %d exceeds maxBytes %d", v.Size, tc.maxBytes)
			}
		})
	}
}

func TestRollBySizeAndReadAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Background = Inline{} // sealed segments are trimmed in the background: at once here
	l := mustOpen(t, dir, cfg)
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, b, 0)
	}
	// Four 1000-byte batches fit in 4096 bytes.
	if got := l.NumSegments(); got != 5 {
		t.Fatalf("%d segments, want 5", got)
	}
	names := segmentFiles(t, dir, logSuffix)
	want := []string{"00000000000000000000.log", "00000000000000000004.log", "00000000000000000008.log", "00000000000000000012.log", "00000000000000000016.log"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("segment files %v, want %v", names, want)
	}
	// Sealed segments are trimmed to their contents; the active one is preallocated.
	for _, n := range want[:4] {
		if st, _ := os.Stat(filepath.Join(dir, n)); st.Size() != 4000 {
			t.Fatalf("%s has %d bytes, want 4000", n, st.Size())
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, want[4])); st.Size() != 4096 {
		t.Fatalf("active segment has %d bytes, want the preallocated 4096", st.Size())
	}
	v, err := l.Read(2, 1<<20, l.EndOffset(), false)
	if err != nil {
		t.Fatal(err)
	}
	if v.FirstOffset != 2 || v.Size != 18000 || len(v.Chunks) != 5 {
		t.Fatalf("read from 2: first %d size %d chunks %d", v.FirstOffset, v.Size, len(v.Chunks))
	}
	v.Release()
	if got := l.Size(); got != 20000 {
		t.Fatalf("Size %d, want 20000", got)
	}
	checkIndexes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, want[4])); st.Size() != 4000 {
		t.Fatalf("after Close the active segment has %d bytes, want 4000", st.Size())
	}
}

func TestOversizedBatchGetsItsOwnSegment(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1024
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, sizedBatch(t, 500, 1), 0)
	mustAppend(t, l, sizedBatch(t, 3000, 1), 0)
	mustAppend(t, l, sizedBatch(t, 500, 1), 0)
	if got := len(readAll(t, l, 0)); got != 3 {
		t.Fatalf("read %d batches", got)
	}
	if l.NumSegments() != 3 {
		t.Fatalf("%d segments, want 3", l.NumSegments())
	}
	checkIndexes(t, l)
}

func TestRollBySegmentMs(t *testing.T) {
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentMs = 1000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, batchSpec{timestamp: clock.ms.Load()}), 0)
	clock.Advance(500 * time.Millisecond)
	mustAppend(t, l, makeBatch(t, batchSpec{timestamp: clock.ms.Load()}), 0)
	if l.NumSegments() != 1 {
		t.Fatal("rolled too early")
	}
	clock.Advance(600 * time.Millisecond)
	mustAppend(t, l, makeBatch(t, batchSpec{timestamp: clock.ms.Load()}), 0)
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments after segment.ms, want 2", l.NumSegments())
	}
	// EnforceRetention rolls too, without an append.
	clock.Advance(2 * time.Second)
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 3 {
		t.Fatalf("%d segments after EnforceRetention, want 3", l.NumSegments())
	}
	// An empty active segment is not rolled.
	clock.Advance(2 * time.Second)
	l.EnforceRetention()
	if l.NumSegments() != 3 {
		t.Fatalf("rolled an empty segment")
	}
}

func TestRollWhenIndexFull(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentIndexBytes = 4 * offsetEntrySize // 4 offset entries; 2 time entries
	cfg.IndexIntervalBytes = 1
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 20; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{timestamp: int64(i)}), 0)
	}
	if l.NumSegments() < 5 {
		t.Fatalf("%d segments: full indexes did not roll", l.NumSegments())
	}
	checkIndexes(t, l)
	if got := len(readAll(t, l, 0)); got != 20 {
		t.Fatalf("read %d batches", got)
	}
}

func TestReopenClean(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 8192
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 300, timestamp: int64(i)}), 3)
	}
	before := readAll(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after Close: %v", err)
	}
	l = mustOpen(t, dir, cfg)
	// The marker stays until the first change: a crash before one needs no recovery.
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("clean-shutdown marker gone before any change: %v", err)
	}
	if l.RecoveredFrom() != 60 {
		t.Fatalf("recovered from %d after a clean shutdown, want the end 60", l.RecoveredFrom())
	}
	if l.EndOffset() != 60 {
		t.Fatalf("end offset %d after reopen, want 60", l.EndOffset())
	}
	after := readAll(t, l, 0)
	if len(after) != len(before) {
		t.Fatalf("%d batches after reopen, want %d", len(after), len(before))
	}
	for i := range before {
		if !bytes.Equal(before[i], after[i]) {
			t.Fatalf("batch %d differs after reopen", i)
		}
	}
	checkIndexes(t, l)
	info := mustAppend(t, l, makeBatch(t, batchSpec{timestamp: 99}), 3)
	if info.BaseOffset != 60 {
		t.Fatalf("append after reopen got offset %d", info.BaseOffset)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("clean-shutdown marker still there after an append: %v", err)
	}
	checkIndexes(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(makeBatch(t, batchSpec{}), 0); !isErr(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := l.Read(0, 100, 1, true); !isErr(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

func TestReopenRebuildsMissingAndCorruptIndexes(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		for _, damage := range []string{"remove", "garbage", "truncate"} {
			t.Run(map[bool]string{false: "clean", true: "unclean"}[unclean]+"/"+damage, func(t *testing.T) {
				dir := t.TempDir()
				cfg := testConfig(nil)
				cfg.SegmentBytes = 4096
				l := mustOpen(t, dir, cfg)
				for i := 0; i < 40; i++ {
					mustAppend(t, l, makeBatch(t, batchSpec{valueSize: 200, timestamp: int64(1000 + i)}), 0)
				}
				before := readAll(t, l, 0)
				if unclean {
					l.crashForTest()
				} else if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				for _, name := range append(segmentFiles(t, dir, indexSuffix), segmentFiles(t, dir, timeIndexSuffix)...) {
					p := filepath.Join(dir, name)
					switch damage {
					case "remove":
						os.Remove(p)
					case "garbage":
						os.WriteFile(p, bytes.Repeat([]byte{0xff, 1, 2}, 40), 0o644)
					case "truncate":
						if st, _ := os.Stat(p); st.Size() > 0 {
							os.Truncate(p, st.Size()-3)
						}
					}
				}
				l = mustOpen(t, dir, cfg)
				defer l.Close()
				after := readAll(t, l, 0)
				if len(after) != len(before) {
					t.Fatalf("%d batches after reopen, want %d", len(after), len(before))
				}
				for off := int64(0); off < l.EndOffset(); off++ {
					v, err := l.Read(off, 1, l.EndOffset(), true)
					if err != nil || v.FirstOffset != off {
						t.Fatalf("Read(%d): first %d err %v", off, v.FirstOffset, err)
					}
					v.Release()
				}
				if off, ok, err := l.OffsetForTimestamp(1020); err != nil || !ok || off != 20 {
					t.Fatalf("OffsetForTimestamp(1020) = %d %v %v", off, ok, err)
				}
				checkIndexes(t, l)
			})
		}
	}
}

func TestRetentionBytes(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 20; i++ { // five segments of 4000 bytes
		mustAppend(t, l, b, 0)
	}
	cfg.RetentionBytes = 9000
	cfg.RetentionMs = -1 // the batches' timestamps are from 1970
	l.SetConfig(cfg)
	n, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	// 20000 bytes: dropping two segments leaves 12000 >= 9000, a third would leave 8000.
	if n != 2 || l.NumSegments() != 3 || l.StartOffset() != 8 || l.Size() != 12000 {
		t.Fatalf("deleted %d: %d segments, start %d, size %d", n, l.NumSegments(), l.StartOffset(), l.Size())
	}
	if _, err := l.Read(7, 100, l.EndOffset(), true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below start: %v", err)
	}
	cfg.RetentionBytes = 1
	l.SetConfig(cfg)
	l.EnforceRetention()
	if l.NumSegments() != 1 || l.StartOffset() != 16 {
		t.Fatalf("the active segment must stay: %d segments, start %d", l.NumSegments(), l.StartOffset())
	}
}

func TestRetentionMs(t *testing.T) {
	clock := newFakeClock(10_000_000)
	cfg := testConfig(clock)
	cfg.SegmentBytes = 4096
	cfg.RetentionMs = 60_000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	// Segment i holds timestamps around 10_000_000 + i*20_000.
	for i := 0; i < 5; i++ {
		for j := 0; j < 4; j++ {
			mustAppend(t, l, sizedBatch(t, 1000, 10_000_000+int64(i)*20_000+int64(j)), 0)
		}
	}
	if l.NumSegments() != 5 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	clock.ms.Store(10_000_000 + 100_000)
	n, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	// Largest timestamps: +3, +20003, +40003, +60003, (active). now-ts > 60000 for the
	// first two only.
	if n != 2 || l.StartOffset() != 8 {
		t.Fatalf("deleted %d, start %d", n, l.StartOffset())
	}
	cfg.RetentionMs = -1
	l.SetConfig(cfg)
	clock.Advance(1000 * time.Hour)
	if n, _ := l.EnforceRetention(); n != 0 {
		t.Fatalf("retention.ms=-1 deleted %d segments", n)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	l := mustOpen(t, dir, cfg)
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, b, 0)
	}
	if err := l.DeleteRecordsBefore(21); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond end: %v", err)
	}
	if err := l.DeleteRecordsBefore(9); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 9 || l.NumSegments() != 3 {
		t.Fatalf("start %d, %d segments", l.StartOffset(), l.NumSegments())
	}
	if _, err := l.Read(8, 100, 20, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	v, err := l.Read(9, 100, 20, true)
	if err != nil || v.FirstOffset != 9 {
		t.Fatalf("read at start: %v %d", err, v.FirstOffset)
	}
	v.Release()
	if err := l.DeleteRecordsBefore(5); err != nil || l.StartOffset() != 9 {
		t.Fatalf("lowering is a no-op: %v, start %d", err, l.StartOffset())
	}
	// The start offset survives an unclean restart.
	l.crashForTest()
	l = mustOpen(t, dir, cfg)
	if l.StartOffset() != 9 || l.EndOffset() != 20 {
		t.Fatalf("after reopen start %d end %d", l.StartOffset(), l.EndOffset())
	}
	// Deleting everything frees the active segment too.
	if err := l.DeleteRecordsBefore(20); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 20 || l.Size() != 0 || l.NumSegments() != 1 {
		t.Fatalf("start %d size %d segments %d", l.StartOffset(), l.Size(), l.NumSegments())
	}
	if info := mustAppend(t, l, b, 0); info.BaseOffset != 20 {
		t.Fatalf("append after deleting all got %d", info.BaseOffset)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.StartOffset() != 20 || l.EndOffset() != 21 {
		t.Fatalf("after clean reopen start %d end %d", l.StartOffset(), l.EndOffset())
	}
}

func TestTruncate(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	setup := func(t *testing.T) (*Log, string) {
		dir := t.TempDir()
		l := mustOpen(t, dir, cfg)
		// 15 batches of 2 records (offsets 0..29), four per segment.
		for i := 0; i < 15; i++ {
			mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 450, timestamp: int64(100 + i)}), int32(i))
		}
		return l, dir
	}
	tests := []struct {
		name     string
		offset   int64
		wantEnd  int64
		wantSegs int
	}{
		{"beyond end", 40, 30, 4},
		{"at end", 30, 30, 4},
		{"active segment boundary", 26, 26, 4},
		{"inside active batch", 27, 26, 4},
		{"sealed segment, inside a batch", 11, 10, 2},
		{"sealed segment start", 8, 8, 2},
		{"first segment", 1, 0, 1},
		{"zero", 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, dir := setup(t)
			if err := l.Truncate(tc.offset); err != nil {
				t.Fatal(err)
			}
			if l.EndOffset() != tc.wantEnd || l.NumSegments() != tc.wantSegs {
				t.Fatalf("end %d segments %d, want %d %d", l.EndOffset(), l.NumSegments(), tc.wantEnd, tc.wantSegs)
			}
			checkIndexes(t, l)
			got := readAll(t, l, 0)
			if int64(len(got))*2 != tc.wantEnd {
				t.Fatalf("read %d batches", len(got))
			}
			// Appends continue at the new end, in whichever segment is now active.
			info := mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 450, timestamp: 500}), 99)
			if info.BaseOffset != tc.wantEnd {
				t.Fatalf("append after truncate at %d", info.BaseOffset)
			}
			checkIndexes(t, l)
			// Neither a clean nor an unclean restart brings cut batches back.
			for _, crash := range []bool{true, false} {
				if crash {
					l.crashForTest()
				} else if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = mustOpen(t, dir, cfg)
				if l.EndOffset() != tc.wantEnd+2 {
					t.Fatalf("after reopen (crash=%v) end %d, want %d", crash, l.EndOffset(), tc.wantEnd+2)
				}
				bs := readAll(t, l, 0)
				h, _ := ParseHeader(bs[len(bs)-1])
				if h.PartitionLeaderEpoch != 99 {
					t.Fatalf("last batch has epoch %d", h.PartitionLeaderEpoch)
				}
				checkIndexes(t, l)
			}
			l.Close()
		})
	}
}

func TestTruncateBelowFirstSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	l := mustOpen(t, dir, cfg)
	if err := l.TruncateFully(100); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 100 || l.EndOffset() != 100 {
		t.Fatalf("start %d end %d", l.StartOffset(), l.EndOffset())
	}
	mustAppend(t, l, makeBatch(t, batchSpec{records: 5}), 0)
	if err := l.Truncate(50); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 50 || l.EndOffset() != 50 || l.Size() != 0 {
		t.Fatalf("start %d end %d size %d", l.StartOffset(), l.EndOffset(), l.Size())
	}
	l.crashForTest()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.StartOffset() != 50 || l.EndOffset() != 50 {
		t.Fatalf("after reopen start %d end %d", l.StartOffset(), l.EndOffset())
	}
}

func TestAppendReplica(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	b := makeBatch(t, batchSpec{base: 0, records: 3, epoch: 7})
	if info, err := l.AppendReplica(b); err != nil || info.BaseOffset != 0 || info.LastOffset != 2 {
		t.Fatalf("%+v %v", info, err)
	}
	if _, err := l.AppendReplica(b); !isErr(err, ErrUnexpectedOffset) || !isErr(err, ErrInvalidRecord) {
		t.Fatalf("stale base offset: %v", err)
	}
	// A gap is kept, as a leader with a compacted log would send.
	gap := makeBatch(t, batchSpec{base: 10, records: 2, epoch: 8})
	if info, err := l.AppendReplica(gap); err != nil || info.BaseOffset != 10 {
		t.Fatalf("%+v %v", info, err)
	}
	if l.EndOffset() != 12 {
		t.Fatalf("end %d", l.EndOffset())
	}
	v, err := l.Read(5, 1<<20, 12, false)
	if err != nil || v.FirstOffset != 10 {
		t.Fatalf("read in the gap: first %d, %v", v.FirstOffset, err)
	}
	v.Release()
	bs := readAll(t, l, 0)
	for i, want := range []int32{7, 8} {
		h, _ := ParseHeader(bs[i])
		if h.PartitionLeaderEpoch != want {
			t.Fatalf("batch %d epoch %d, want the leader's %d", i, h.PartitionLeaderEpoch, want)
		}
	}
	// A gap too large for a segment's relative offsets starts a new segment.
	far := makeBatch(t, batchSpec{base: 12 + math.MaxUint32 + 5, records: 1})
	if _, err := l.AppendReplica(far); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 2 || l.segments()[1].base != 12+math.MaxUint32+5 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	checkIndexes(t, l)
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 1
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	// Batch i (offset i) has MaxTimestamp ts[i]; not monotonic on purpose.
	ts := []int64{100, 300, 200, 400, 400, 350, 800, 500, 900, 100, 1000, 950}
	for _, x := range ts {
		mustAppend(t, l, sizedBatch(t, 1000, x), 0)
	}
	for target := int64(0); target <= 1100; target += 25 {
		wantOff, wantOK := int64(0), false
		for i, x := range ts {
			if x >= target {
				wantOff, wantOK = int64(i), true
				break
			}
		}
		off, ok, err := l.OffsetForTimestamp(target)
		if err != nil || ok != wantOK || (ok && off != wantOff) {
			t.Fatalf("OffsetForTimestamp(%d) = %d %v %v, want %d %v", target, off, ok, err, wantOff, wantOK)
		}
	}
	// Batches below the log start offset do not count.
	if err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if off, ok, _ := l.OffsetForTimestamp(300); !ok || off != 5 {
		t.Fatalf("after DeleteRecordsBefore(5): %d %v", off, ok)
	}
}

func TestScanHeaders(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 2048
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 20; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 300, producer: int64(i)}), int32(i/5))
	}
	var got []int64
	err := l.ScanHeaders(7, func(h Header) bool {
		got = append(got, h.BaseOffset)
		if h.ProducerID != h.BaseOffset/2 || h.PartitionLeaderEpoch != int32(h.BaseOffset/10) {
			t.Fatalf("header %+v", h)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 17 || got[0] != 6 || got[16] != 38 {
		t.Fatalf("scanned %v", got)
	}
	got = nil
	l.ScanHeaders(0, func(h Header) bool { got = append(got, h.BaseOffset); return len(got) < 3 })
	if len(got) != 3 {
		t.Fatalf("stop after 3: %v", got)
	}
	if err := l.ScanHeaders(41, func(Header) bool { return true }); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond end: %v", err)
	}
}

func TestFlushPolicies(t *testing.T) {
	tests := []struct {
		name      string
		messages  int64
		ms        int64
		advance   time.Duration
		appends   int
		wantSyncs int64
	}{
		{"default leaves it to the OS", 0, 0, time.Second, 10, 0},
		{"flush.messages=1", 1, 0, 0, 10, 10},
		{"flush.messages=4 counts records", 4, 0, 0, 10, 5}, // 2 records per batch
		{"flush.ms", 0, 1000, 400 * time.Millisecond, 10, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFaultFS()
			clock := newFakeClock(0)
			cfg := testConfig(clock)
			cfg.FlushMessages, cfg.FlushMs = tc.messages, tc.ms
			// Each due flush runs its group commit at once: one fsync per due flush.
			cfg.Background = Inline{}
			l, err := openLog(t.TempDir(), cfg, fsys)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.mu.Lock() // wait for nothing in the background to sync
			l.mu.Unlock()
			base := fsys.syncs.Load()
			for i := 0; i < tc.appends; i++ {
				clock.Advance(tc.advance)
				mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 0)
			}
			if got := fsys.syncs.Load() - base; got != tc.wantSyncs {
				t.Fatalf("%d syncs, want %d", got, tc.wantSyncs)
			}
		})
	}
}

func TestFlushErrorIsStorageError(t *testing.T) {
	fsys := newFaultFS()
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fsys.syncErr = errEIO
	if _, err := l.Append(makeBatch(t, batchSpec{}), 0); err != nil {
		t.Fatalf("append with failing fsync: %v; the fsync is the group commit's", err)
	}
	if err := waitSyncErr(t, l); !isErr(err, ErrStorage) || !isErr(err, errEIO) {
		t.Fatalf("group commit with failing fsync: %v", err)
	}
	if l.FlushedOffset() != 0 {
		t.Fatalf("flushed offset %d after a failed fsync, want 0", l.FlushedOffset())
	}
	if err := l.Flush(); !isErr(err, ErrStorage) {
		t.Fatalf("Flush with failing fsync: %v", err)
	}
	fsys.syncErr = nil
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != l.EndOffset() {
		t.Fatalf("recovery point %d, end %d", l.RecoveryPoint(), l.EndOffset())
	}
}

func TestFlushAdvancesRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 10; i++ {
		mustAppend(t, l, sizedBatch(t, 1000, 1), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp, ok, err := readCheckpoint(osFS{}, dir, recoveryPointFile)
	if err != nil || !ok || rp != 10 {
		t.Fatalf("checkpoint %d %v %v", rp, ok, err)
	}
	l.crashForTest()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != 10 {
		t.Fatalf("end %d", l.EndOffset())
	}
}

func TestDelete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	l := mustOpen(t, dir, testConfig(nil))
	mustAppend(t, l, makeBatch(t, batchSpec{valueSize: 100}), 0)
	v, err := l.Read(0, 1000, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
	// The view still reads the (unlinked) mapping.
	if _, err := ValidateHeader(v.Chunks[0]); err != nil {
		t.Fatal(err)
	}
	v.Release()
	v.Release()
	if _, err := l.Append(makeBatch(t, batchSpec{}), 0); !isErr(err, ErrClosed) {
		t.Fatalf("append after Delete: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"zero config takes defaults", func(c *Config) { *c = Config{} }, true},
		{"tiny segment", func(c *Config) { c.SegmentBytes = 13 }, false},
		{"huge segment", func(c *Config) { c.SegmentBytes = math.MaxInt32 + 1 }, false},
		{"negative retention.ms", func(c *Config) { c.RetentionMs = -2 }, false},
		{"negative index interval", func(c *Config) { c.IndexIntervalBytes = -1 }, false},
		{"tiny index", func(c *Config) { c.SegmentIndexBytes = 3 }, false},
		{"negative flush.messages", func(c *Config) { c.FlushMessages = -1 }, false},
		{"negative flush.ms", func(c *Config) { c.FlushMs = -1 }, false},
		{"negative max.message.bytes", func(c *Config) { c.MaxMessageBytes = -1 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mod(&cfg)
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate: %v", err)
			}
			l, err := Open(t.TempDir(), cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("Open: %v", err)
			}
			if l != nil {
				l.Close()
			}
		})
	}
	d := Config{}.withDefaults()
	if d.SegmentBytes != 1<<30 || d.RetentionMs != 604800000 || d.RetentionBytes != -1 || d.FlushMessages != math.MaxInt64 ||
		d.MaxMessageBytes != 1048588 || d.IndexIntervalBytes != 4096 || d.SegmentIndexBytes != 10<<20 || d.SegmentMs != 604800000 {
		t.Fatalf("defaults %+v", d)
	}
}

func TestSetConfigIgnoresInvalid(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1
	l.SetConfig(cfg)
	if l.config().SegmentBytes != 64<<10 {
		t.Fatalf("invalid config applied: %d", l.config().SegmentBytes)
	}
	cfg.SegmentBytes = 2048
	l.SetConfig(cfg)
	if l.config().SegmentBytes != 2048 {
		t.Fatal("valid config not applied")
	}
}

func segmentFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestConfigChangesAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 16 << 10
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 10; i++ {
		mustAppend(t, l, sizedBatch(t, 1000, int64(i)), 0)
	}
	l.Close()
	// A smaller segment.bytes than the active segment holds: the next append rolls.
	cfg.SegmentBytes = 4096
	l = mustOpen(t, dir, cfg)
	mustAppend(t, l, sizedBatch(t, 1000, 10), 0)
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	l.crashForTest()
	// Kafka's minimum segment.bytes and segment.index.bytes: one batch per segment.
	cfg.SegmentBytes, cfg.SegmentIndexBytes = minSegmentBytes, minSegmentIndexBytes
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	for i := 0; i < 5; i++ {
		mustAppend(t, l, sizedBatch(t, 1000, int64(20+i)), 0)
	}
	if l.NumSegments() != 7 || len(readAll(t, l, 0)) != 16 {
		t.Fatalf("%d segments, %d batches", l.NumSegments(), len(readAll(t, l, 0)))
	}
	checkIndexes(t, l)
}
