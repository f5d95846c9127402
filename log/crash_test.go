package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// crashFixture is a log with three segments, left as a killed process leaves it.
type crashFixture struct {
	dir      string
	cfg      Config
	batches  [][]byte // everything appended, as stored
	lastPath string   // the active segment's file
	lastBase int64
	lastPos  int64 // where the last batch starts in it
	lastSize int64 // bytes of batches in it
}

func newCrashFixture(t *testing.T) crashFixture {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 100
	// The rolled segments are trimmed and synced before the crash, every time: the tests
	// forge recovery points that trust them.
	cfg.Background = Inline{}
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 22; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{records: 1 + i%3, valueSize: 60 + 7*i, timestamp: int64(1000 + 10*i)}), 1)
	}
	// A small last batch keeps the every-byte tests short.
	mustAppend(t, l, makeBatch(t, batchSpec{records: 2, valueSize: 8, timestamp: 2000}), 1)
	f := crashFixture{dir: dir, cfg: cfg, batches: readAll(t, l, 0)}
	a := l.active()
	f.lastBase, f.lastSize = a.base, a.size.Load()
	f.lastPath = a.logPath()
	f.lastPos = f.lastSize - int64(len(f.batches[len(f.batches)-1]))
	if l.NumSegments() < 3 || f.lastPos == 0 {
		t.Fatalf("fixture needs several segments and batches in the last: %d segments", l.NumSegments())
	}
	l.crashForTest()
	return f
}

// reopenAndCheck opens a damaged copy and checks that exactly want remains, that the
// indexes match the data, and that appends continue right after it.
func reopenAndCheck(t *testing.T, dir string, cfg Config, want [][]byte) {
	t.Helper()
	// These tests damage files by hand, so fsync buys nothing and costs most of the time.
	l, err := openLog(dir, cfg, noSyncFS{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d batches remain, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	wantEnd := int64(0)
	if len(want) > 0 {
		h, _ := ParseHeader(want[len(want)-1])
		wantEnd = h.LastOffset() + 1
	}
	if l.EndOffset() != wantEnd {
		t.Fatalf("end offset %d, want %d", l.EndOffset(), wantEnd)
	}
	checkIndexes(t, l)
	for i, b := range want {
		h, _ := ParseHeader(b)
		from := h.BaseOffset
		if i > 0 { // with a gap before the batch, offsets in the gap read it too
			p, _ := ParseHeader(want[i-1])
			from = p.LastOffset() + 1
		}
		for _, off := range []int64{from, h.LastOffset()} {
			v, err := l.Read(off, 1, wantEnd, true)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if len(v.Chunks) == 0 || !bytes.Equal(v.Chunks[0], b) {
				t.Fatalf("Read(%d) did not return batch %d", off, i)
			}
			v.Release()
		}
	}
	info := mustAppend(t, l, makeBatch(t, batchSpec{records: 2}), 2)
	if info.BaseOffset != wantEnd {
		t.Fatalf("append after recovery at %d, want %d", info.BaseOffset, wantEnd)
	}
}

func TestCrashCutLastBatchAtEveryByte(t *testing.T) {
	f := newCrashFixture(t)
	lastName := filepath.Base(f.lastPath)
	for cut := f.lastPos; cut <= f.lastSize; cut++ {
		want := f.batches[:len(f.batches)-1]
		if cut == f.lastSize {
			want = f.batches
		}
		// A torn write leaves either a short file or zeros where pages never landed.
		for _, mode := range []string{"short file", "zeros"} {
			dir := copyDir(t, f.dir)
			p := filepath.Join(dir, lastName)
			if mode == "short file" {
				if err := os.Truncate(p, cut); err != nil {
					t.Fatal(err)
				}
			} else {
				data, _ := os.ReadFile(p)
				if allZero(data[cut:f.lastSize]) { // the batch ends in zero bytes already
					want = f.batches
				}
				clear(data[cut:f.lastSize])
				os.WriteFile(p, data, 0o644)
			}
			t.Run(mode, func(t *testing.T) { reopenAndCheck(t, dir, f.cfg, want) })
			os.RemoveAll(dir)
		}
	}
}

func TestCrashBitFlipsInLastBatch(t *testing.T) {
	f := newCrashFixture(t)
	lastName := filepath.Base(f.lastPath)
	pristine, err := os.ReadFile(f.lastPath)
	if err != nil {
		t.Fatal(err)
	}
	earlier := 0
	for _, b := range f.batches {
		h, _ := ParseHeader(b)
		if h.BaseOffset < f.lastBase {
			earlier++
		}
	}
	for pos := f.lastPos; pos < f.lastSize; pos++ {
		data := bytes.Clone(pristine)
		data[pos] ^= 1 << (pos % 8)
		// The oracle: earlier segments intact, then the valid prefix of this one.
		_, prefix := validPrefix(data[:f.lastSize], f.lastBase)
		want := append(append([][]byte(nil), f.batches[:earlier]...), prefix...)
		dir := copyDir(t, f.dir)
		os.WriteFile(filepath.Join(dir, lastName), data, 0o644)
		t.Run("", func(t *testing.T) { reopenAndCheck(t, dir, f.cfg, want) })
		// Only the header fields outside the CRC (base offset, leader epoch) can change
		// without the batch being dropped.
		inCRC := pos-f.lastPos >= offAttributes || (pos-f.lastPos >= offLength && pos-f.lastPos < offPartitionLeaderEpoch) || pos-f.lastPos >= offMagic
		if inCRC && len(prefix) != len(f.batches)-1-earlier {
			t.Fatalf("flip at batch byte %d kept the damaged batch", pos-f.lastPos)
		}
		os.RemoveAll(dir)
	}
}

func TestCrashDamageInMiddleSegmentDropsTheRest(t *testing.T) {
	f := newCrashFixture(t)
	dir := copyDir(t, f.dir)
	os.Remove(filepath.Join(dir, recoveryPointFile)) // crashed before any flush
	names := segmentFiles(t, dir, logSuffix)
	middle := filepath.Join(dir, names[1])
	data, _ := os.ReadFile(middle)
	base, _, _ := parseSegmentFileName(names[1])
	_, inMiddle := validPrefix(data, base)
	// Damage the second batch of the middle segment.
	data[len(inMiddle[0])+offAttributes+3] ^= 0x40
	os.WriteFile(middle, data, 0o644)
	var want [][]byte
	for _, b := range f.batches {
		if h, _ := ParseHeader(b); h.BaseOffset < base {
			want = append(want, b)
		}
	}
	want = append(want, inMiddle[0])
	reopenAndCheck(t, dir, f.cfg, want)
	if got := segmentFiles(t, dir, logSuffix); len(got) != 2 {
		t.Fatalf("segments after recovery: %v", got)
	}
}

func TestCrashDuringRollKeepsLaterSegments(t *testing.T) {
	f := newCrashFixture(t)
	dir := copyDir(t, f.dir)
	os.Remove(filepath.Join(dir, recoveryPointFile)) // crashed before the roll's flush
	// The first segment's trim never reached the disk: it is still preallocated.
	first := filepath.Join(dir, segmentFiles(t, dir, logSuffix)[0])
	if err := os.Truncate(first, f.cfg.SegmentBytes); err != nil {
		t.Fatal(err)
	}
	reopenAndCheck(t, dir, f.cfg, f.batches)
	if st, _ := os.Stat(first); st.Size() == f.cfg.SegmentBytes {
		t.Fatal("the untrimmed segment was not trimmed")
	}
}

func TestCrashGarbageAfterTailDoesNotComeBack(t *testing.T) {
	f := newCrashFixture(t)
	dir := copyDir(t, f.dir)
	p := filepath.Join(dir, filepath.Base(f.lastPath))
	data, _ := os.ReadFile(p)
	// The last batch is torn, and an old valid-looking batch lies beyond it.
	clear(data[f.lastPos+20 : f.lastPos+40])
	old := makeBatch(t, batchSpec{base: 1000, records: 1})
	copy(data[f.lastSize+64:], old)
	os.WriteFile(p, data, 0o644)
	want := f.batches[:len(f.batches)-1]
	reopenAndCheck(t, dir, f.cfg, want) // appends one 2-record batch, then closes
	// Crash again after new appends: the stale batch must not reappear.
	l := mustOpen(t, dir, f.cfg)
	for i := 0; i < 3; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{valueSize: 5}), 3)
	}
	end := l.EndOffset()
	l.crashForTest()
	l = mustOpen(t, dir, f.cfg)
	defer l.Close()
	if l.EndOffset() != end {
		t.Fatalf("end %d after second crash, want %d", l.EndOffset(), end)
	}
	checkIndexes(t, l)
}

// TestCrashMissingRecoveryPointScansEverything: without a usable recovery point every
// segment is scanned, so damage in the first one is found at open and the log is cut
// there; skipping the scan would keep the damaged batch and the segments after it. A
// recovery point beyond the data trusts the sealed segments, but the active one is
// always scanned.
func TestCrashMissingRecoveryPointScansEverything(t *testing.T) {
	f := newCrashFixture(t)
	names := segmentFiles(t, f.dir, logSuffix)
	first, _, _ := parseSegmentFileName(names[0])
	second, _, _ := parseSegmentFileName(names[1])
	var inFirst [][]byte
	for _, b := range f.batches {
		if h, _ := ParseHeader(b); h.BaseOffset < second {
			inFirst = append(inFirst, b)
		}
	}
	if first != 0 || len(inFirst) < 2 {
		t.Fatalf("fixture: first segment at %d with %d batches", first, len(inFirst))
	}
	for _, content := range []string{"", "garbage\n", checkpointVersion + "\n-5\n", checkpointVersion + "\n99999999\n"} {
		dir := copyDir(t, f.dir)
		os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte(content), 0o644)
		if content == "" {
			os.Remove(filepath.Join(dir, recoveryPointFile))
		}
		var want [][]byte
		if content == checkpointVersion+"\n99999999\n" {
			// Damage the active segment's last batch.
			p := filepath.Join(dir, filepath.Base(f.lastPath))
			data, _ := os.ReadFile(p)
			data[f.lastPos+offAttributes+1] ^= 0x40
			os.WriteFile(p, data, 0o644)
			want = f.batches[:len(f.batches)-1]
		} else {
			// Damage the first segment's last batch: it and everything after go.
			p := filepath.Join(dir, names[0])
			data, _ := os.ReadFile(p)
			pos := 0
			for _, b := range inFirst[:len(inFirst)-1] {
				pos += len(b)
			}
			data[pos+offAttributes+1] ^= 0x40
			os.WriteFile(p, data, 0o644)
			want = inFirst[:len(inFirst)-1]
		}
		t.Run(content, func(t *testing.T) { reopenAndCheck(t, dir, f.cfg, want) })
	}
}

// TestRecoveryIsFromCheckpoint checks that segments below the recovery point are not
// scanned: damage there is only found when the segment is read.
func TestRecoveryIsFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 2048
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 12; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{valueSize: 300}), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != 12 {
		t.Fatalf("recovery point %d", l.RecoveryPoint())
	}
	l.crashForTest()
	first := filepath.Join(dir, segmentFiles(t, dir, logSuffix)[0])
	st, _ := os.Stat(first)
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if st2, _ := os.Stat(first); st2.ModTime() != st.ModTime() || st2.Size() != st.Size() {
		t.Fatal("a segment below the recovery point was rewritten")
	}
	if l.EndOffset() != 12 {
		t.Fatalf("end %d", l.EndOffset())
	}
}
