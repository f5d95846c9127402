package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSwapRecovery crashes a cleaning pass at a fuzzed step of a fuzzed swap, then
// damages what the crash left behind: an uncommitted .cleaned file cut or extended with
// garbage (which a crash can leave), and, out of the crash model, stray .swap files of
// garbage. Open must succeed and leave no .cleaned or .swap file; within the crash model
// the key -> value table read from the log must be exactly the model's, and outside it
// the log must still read back as increasing offsets of records that were appended.
func FuzzSwapRecovery(f *testing.F) {
	for stage := range byte(8) {
		f.Add(stage, uint16(0), []byte(nil), false)
		f.Add(stage, uint16(100), []byte("garbage"), false)
	}
	f.Add(byte(1), uint16(7), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, true)
	f.Add(byte(2), uint16(3000), make([]byte, 200), true)
	f.Fuzz(func(t *testing.T, stage byte, cut uint16, garbage []byte, stray bool) {
		clock := newFakeClock(1_000_000)
		cfg := testConfig(clock)
		cfg.SegmentBytes = 900
		dir := t.TempDir()
		l := mustOpen(t, dir, cfg)
		appended := map[int64]testRecord{}
		latest := map[string]testRecord{}
		for i := range 80 {
			r := testRecord{key: fmt.Sprintf("k%d", i%7), value: fmt.Appendf(nil, "v%d", i)}
			if i%11 == 10 {
				r.value = nil
			}
			info := mustAppend(t, l, keyedBatch(t, clock.Now().UnixMilli(), -1, []testRecord{r}), 0)
			r.offset = info.BaseOffset
			appended[r.offset], latest[r.key] = r, r
		}
		end := l.EndOffset()
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		crashAt := []string{"", "cleaned", "committed", "indexes-removed"}[stage%4]
		skip := int(stage/4) % 3
		testSwapHook = func(s string) error {
			if s != crashAt {
				return nil
			}
			if skip > 0 {
				skip--
				return nil
			}
			return errTestCrash
		}
		_, err := l.Clean(cleanOpts(end, 0))
		testSwapHook = nil
		if err != nil && !errors.Is(err, errTestCrash) {
			t.Fatal(err)
		}
		l.crashForTest()

		// What the crash left, damaged.
		names := mustReadDir(t, dir)
		for _, n := range names {
			if !strings.HasSuffix(n, cleanedSuffix) {
				continue
			}
			p := filepath.Join(dir, n)
			if st, err := os.Stat(p); err == nil && st.Size() > 0 {
				os.Truncate(p, int64(cut)%st.Size())
			}
			if fh, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0); err == nil {
				fh.Write(garbage)
				fh.Close()
			}
		}
		if stray {
			os.WriteFile(filepath.Join(dir, segmentFileName(int64(cut)%end, indexSuffix+swapSuffix)), garbage, 0o644)
			os.WriteFile(filepath.Join(dir, "notasegment.log"+swapSuffix), garbage, 0o644)
			os.WriteFile(filepath.Join(dir, segmentFileName(end+1000, logSuffix+swapSuffix)), garbage, 0o644)
		}

		l2, err := Open(dir, cfg)
		if err != nil {
			if stray {
				return // a garbage segment may be refused
			}
			t.Fatalf("Open after a crash at %q: %v", crashAt, err)
		}
		defer l2.Close()
		for _, n := range mustReadDir(t, dir) {
			if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
				t.Fatalf("%s left after Open", n)
			}
		}
		table := map[string]testRecord{}
		last := int64(-1)
		for _, r := range readRecords(t, l2) {
			if r.offset <= last {
				t.Fatalf("offset %d after %d", r.offset, last)
			}
			last = r.offset
			if r.offset >= end {
				continue // a stray segment made of garbage that happened to parse
			}
			a, ok := appended[r.offset]
			if !ok || a.key != r.key || (a.value == nil) != (r.value == nil) {
				t.Fatalf("offset %d reads %+v, appended %+v", r.offset, r, a)
			}
			table[r.key] = r
		}
		if stray {
			return
		}
		if l2.EndOffset() != end {
			t.Fatalf("end offset %d, want %d", l2.EndOffset(), end)
		}
		for k, want := range latest {
			got, ok := table[k]
			if want.value == nil {
				if ok && got.value != nil {
					t.Fatalf("deleted key %s reads offset %d", k, got.offset)
				}
				continue
			}
			if !ok || got.offset != want.offset {
				t.Fatalf("key %s: latest %d, read %+v", k, want.offset, got)
			}
		}
	})
}
