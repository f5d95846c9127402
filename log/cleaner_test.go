package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is one record as the tests write and read it.
type testRecord struct {
	offset int64
	key    string
	value  []byte // nil: a tombstone
}

// keyedBatch builds an uncompressed batch of keyed records (a nil value is a tombstone),
// with offset deltas 0..n-1 and the given producer id (-1 for none).
func keyedBatch(t testing.TB, ts int64, producer int64, recs []testRecord) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte(r.key), Value: r.value}
		body := kr.AppendTo(nil)
		kr.Length = int32(len(body) - 1)
		raw = kr.AppendTo(raw)
	}
	b := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(len(recs)-1),
		ProducerID: producer, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: raw,
	}
	if producer >= 0 {
		b.ProducerEpoch, b.FirstSequence = 0, 0
	}
	b.Length = int32(49 + len(raw))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offCRC:], ComputeCRC(out))
	return out
}

// rawRecord is a record's position in an uncompressed batch's payload.
type rawRecord struct {
	offsetDelta int32
	key         []byte
	tombstone   bool
	bytes       []byte // the whole encoded record
}

// parseRaw decodes the records of an uncompressed batch (the tests never compress; the
// codecs are log/records' business and tested there).
func parseRaw(batch []byte) (Header, []rawRecord, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return h, nil, err
	}
	if h.Codec() != CodecNone {
		return h, nil, errors.New("test filter: compressed batch")
	}
	p := batch[BatchHeaderSize:h.Size()]
	var out []rawRecord
	for len(p) > 0 {
		length, n := binary.Varint(p)
		if n <= 0 || int(length) > len(p)-n {
			return h, nil, fmt.Errorf("bad record length")
		}
		rec := p[:n+int(length)]
		body := p[n : n+int(length)]
		p = p[n+int(length):]
		q := body[1:]            // attributes
		_, m := binary.Varint(q) // timestamp delta
		q = q[m:]
		od, m := binary.Varint(q)
		q = q[m:]
		kl, m := binary.Varint(q)
		q = q[m:]
		var key []byte
		if kl >= 0 {
			key, q = q[:kl], q[kl:]
		}
		vl, _ := binary.Varint(q)
		out = append(out, rawRecord{offsetDelta: int32(od), key: key, tombstone: vl < 0, bytes: rec})
	}
	return h, out, nil
}

// testFilter is a RecordFilter for uncompressed batches.
type testFilter struct{}

func (testFilter) Records(batch []byte, fn func(int64, []byte, bool)) error {
	h, recs, err := parseRaw(batch)
	for _, r := range recs {
		fn(h.BaseOffset+int64(r.offsetDelta), r.key, r.tombstone)
	}
	return err
}

func (testFilter) Filter(batch []byte, keep func(int64, []byte, bool) bool) ([]byte, int, error) {
	h, recs, err := parseRaw(batch)
	if err != nil {
		return nil, 0, err
	}
	out := append([]byte(nil), batch[:BatchHeaderSize]...)
	kept := 0
	for _, r := range recs {
		if keep(h.BaseOffset+int64(r.offsetDelta), r.key, r.tombstone) {
			out = append(out, r.bytes...)
			kept++
		}
	}
	if kept == len(recs) {
		return batch, kept, nil
	}
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(kept))
	binary.BigEndian.PutUint32(out[offCRC:], ComputeCRC(out))
	return out, kept, nil
}

// readRecords reads every record of the log from its start.
func readRecords(t testing.TB, l *Log) []testRecord {
	t.Helper()
	var out []testRecord
	for _, b := range readAll(t, l, l.StartOffset()) {
		h, recs, err := parseRaw(b)
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		for _, r := range recs {
			var v []byte
			if !r.tombstone {
				v = r.bytes
			}
			out = append(out, testRecord{offset: h.BaseOffset + int64(r.offsetDelta), key: string(r.key), value: v})
		}
	}
	return out
}

func cleanOpts(upper int64, retention int64) CleanOptions {
	return CleanOptions{UpperBound: upper, Filter: testFilter{}, Map: NewOffsetMap(1 << 16), DeleteRetentionMs: retention}
}

// TestCleanerModel appends random keyed records and tombstones, cleans, crashes at
// random steps of a swap and reopens, and checks after each step that reading the log
// from its start gives the model's key -> value table, that every record read is the
// one appended at its offset, and that offsets only grow.
func TestCleanerModel(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	var swapped, removed, crashes, merges int64
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			st := runCleanerModel(t, uint64(seed))
			swapped += st.Segments
			removed += st.RecordsRemoved
			crashes += st.crashes
			merges += st.merges
		})
	}
	t.Logf("%d segments swapped, %d records removed, %d crashes, %d passes merged segments", swapped, removed, crashes, merges)
	if swapped == 0 || removed == 0 || crashes == 0 || merges == 0 {
		t.Fatalf("the model test exercised nothing: %d swaps, %d records removed, %d crashes", swapped, removed, crashes)
	}
}

type modelStats struct {
	Segments       int64
	RecordsRemoved int64
	crashes        int64
	merges         int64
}

var errTestCrash = errors.New("test crash")

func runCleanerModel(t *testing.T, seed uint64) (ms modelStats) {
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentBytes = int64(600 + rng.IntN(1500))
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()

	appended := map[int64]testRecord{} // every record ever appended, by offset
	latest := map[string]testRecord{}  // the model: key -> latest record
	var next int64
	check := func(when string) {
		t.Helper()
		if l.EndOffset() != next {
			t.Fatalf("%s: end offset %d, model %d", when, l.EndOffset(), next)
		}
		table := map[string]testRecord{}
		last := int64(-1)
		for _, r := range readRecords(t, l) {
			if r.offset <= last {
				t.Fatalf("%s: offset %d after %d", when, r.offset, last)
			}
			last = r.offset
			a, ok := appended[r.offset]
			if !ok || a.key != r.key || (a.value == nil) != (r.value == nil) {
				t.Fatalf("%s: offset %d holds key %q (tombstone %v), appended was %+v", when, r.offset, r.key, r.value == nil, a)
			}
			table[r.key] = r
		}
		for k, want := range latest {
			got, ok := table[k]
			if want.value == nil {
				if ok && got.value != nil {
					t.Fatalf("%s: key %q deleted at %d, still reads value from %d", when, k, want.offset, got.offset)
				}
				continue
			}
			if !ok || got.offset != want.offset {
				t.Fatalf("%s: key %q: latest is offset %d, read %+v (present %v)", when, k, want.offset, got, ok)
			}
		}
	}

	keys := 5 + rng.IntN(30)
	defer func() { testSwapHook = nil }()
	for step := 0; step < 120; step++ {
		n := 1 + rng.IntN(4)
		recs := make([]testRecord, n)
		for i := range recs {
			recs[i] = testRecord{key: fmt.Sprintf("key-%d", rng.IntN(keys))}
			if rng.IntN(5) > 0 {
				recs[i].value = fmt.Appendf(nil, "v%d-%d", step, i)
			}
		}
		producer := int64(-1)
		if rng.IntN(3) == 0 {
			producer = 42
		}
		info := mustAppend(t, l, keyedBatch(t, clock.Now().UnixMilli(), producer, recs), 0)
		for i, r := range recs {
			r.offset = info.BaseOffset + int64(i)
			appended[r.offset] = r
			latest[r.key] = r
		}
		next = info.LastOffset + 1
		clock.Advance(time.Duration(rng.IntN(1000)) * time.Millisecond)

		if rng.IntN(6) != 0 {
			continue
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		crashAt := ""
		if rng.IntN(3) == 0 {
			crashAt = []string{"cleaned", "committed", "indexes-removed"}[rng.IntN(3)]
		}
		skip := rng.IntN(3)
		testSwapHook = func(stage string) error {
			if stage != crashAt {
				return nil
			}
			if skip > 0 {
				skip--
				return nil
			}
			return errTestCrash
		}
		upper := next - int64(rng.IntN(5)) // a high watermark a little behind
		retention := []int64{-1, 0, 2000}[rng.IntN(3)]
		before := l.NumSegments()
		st, err := l.Clean(cleanOpts(upper, retention))
		if err == nil && l.NumSegments() < before {
			ms.merges++
		}
		testSwapHook = nil
		ms.Segments += int64(st.Segments)
		ms.RecordsRemoved += st.RecordsRemoved
		switch {
		case errors.Is(err, errTestCrash):
			ms.crashes++
			l.crashForTest()
			l = mustOpen(t, dir, cfg)
			check(fmt.Sprintf("step %d: reopened after a crash at %s", step, crashAt))
		case err != nil:
			t.Fatalf("step %d: Clean: %v", step, err)
		default:
			check(fmt.Sprintf("step %d: cleaned", step))
		}
		if rng.IntN(4) == 0 {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, dir, cfg)
			check(fmt.Sprintf("step %d: reopened clean", step))
		}
	}
	checkIndexes(t, l)
	for _, e := range mustReadDir(t, dir) {
		if strings.HasSuffix(e, cleanedSuffix) || strings.HasSuffix(e, swapSuffix) {
			if _, err := os.Stat(filepath.Join(dir, e)); err == nil && l.NumSegments() > 0 {
				// Only a crash leaves these, and every crash was followed by an Open.
				t.Fatalf("leftover %s", e)
			}
		}
	}
	return ms
}

func mustReadDir(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestOffsetMapBounded fills a map past its buffer: it grows to the bound, refuses new
// keys beyond it, still updates the keys it has, and forgets everything on Reset.
func TestOffsetMapBounded(t *testing.T) {
	m := NewOffsetMap(24 * 10000)
	if m.Capacity() != 9000 {
		t.Fatalf("capacity %d, want 9000 (10000 slots at a 0.9 load factor)", m.Capacity())
	}
	for i := range m.Capacity() {
		if !m.Put(fmt.Appendf(nil, "key-%d", i), int64(i)) {
			t.Fatalf("Put %d refused below capacity", i)
		}
	}
	if len(m.slots) != 10000 {
		t.Fatalf("table has %d slots, want the bound 10000", len(m.slots))
	}
	if m.Put([]byte("one-too-many"), 1) {
		t.Fatal("a full map took a new key")
	}
	if !m.Put([]byte("key-5"), 99999) {
		t.Fatal("a full map refused to update a key it has")
	}
	for i := range m.Capacity() {
		want := int64(i)
		if i == 5 {
			want = 99999
		}
		if got, ok := m.Get(fmt.Appendf(nil, "key-%d", i)); !ok || got != want {
			t.Fatalf("key-%d: %d %v, want %d", i, got, ok, want)
		}
	}
	if _, ok := m.Get([]byte("one-too-many")); ok {
		t.Fatal("a refused key is found")
	}
	if m.Latest() != 99999 {
		t.Fatalf("latest %d", m.Latest())
	}
	m.Reset()
	if _, ok := m.Get([]byte("key-1")); ok || m.Len() != 0 || m.Latest() != -1 {
		t.Fatal("Reset left keys behind")
	}
}

// TestCleanViewSurvivesSwap holds a View over a segment while it is cleaned and swapped:
// the View keeps reading the old bytes, and a new read sees the cleaned segment.
func TestCleanViewSurvivesSwap(t *testing.T) {
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentBytes = 1024
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := range 60 {
		mustAppend(t, l, keyedBatch(t, clock.Now().UnixMilli(), -1, []testRecord{{key: fmt.Sprint(i % 3), value: []byte("value")}}), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	v, err := l.Read(0, 1<<20, l.EndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	before := append([]byte(nil), v.Chunks[0]...)
	st, err := l.Clean(cleanOpts(l.EndOffset(), -1))
	if err != nil || st.Segments == 0 {
		t.Fatalf("Clean: %+v, %v", st, err)
	}
	if !bytes.Equal(before, v.Chunks[0]) {
		t.Fatal("a View's bytes changed under it")
	}
	v.Release()
	recs := readRecords(t, l)
	if len(recs) >= 60 {
		t.Fatalf("%d records after cleaning", len(recs))
	}
	checkIndexes(t, l)
}

// TestCleanConcurrentAppendsAndReads cleans repeatedly while an appender and readers
// run; the race detector and the final table check the rest.
func TestCleanConcurrentAppendsAndReads(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 2048
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := l.Read(l.StartOffset(), 1<<20, l.EndOffset(), true)
			if err != nil {
				t.Error(err)
				return
			}
			for _, c := range v.Chunks {
				if _, err := SplitBatches(c); err != nil {
					t.Error(err)
				}
			}
			v.Release()
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := l.Flush(); err != nil {
				t.Error(err)
				return
			}
			if _, err := l.Clean(cleanOpts(l.EndOffset(), 0)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	latest := map[string]int64{}
	for i := range 3000 {
		k := fmt.Sprint(i % 17)
		info := mustAppend(t, l, keyedBatch(t, int64(i), -1, []testRecord{{key: k, value: []byte("v")}}), 0)
		latest[k] = info.BaseOffset
	}
	close(stop)
	wg.Wait()
	got := map[string]int64{}
	for _, r := range readRecords(t, l) {
		got[r.key] = r.offset
	}
	for k, off := range latest {
		if got[k] != off {
			t.Fatalf("key %s: latest %d, read %d", k, off, got[k])
		}
	}
}

// TestCleanAfterTruncationBelowCleaned truncates below the cleaned offset and appends
// new records at the same offsets: the next pass treats them as dirty, so a tombstone
// among them cannot be taken for the only record of its key.
func TestCleanAfterTruncationBelowCleaned(t *testing.T) {
	clock := newFakeClock(1_000_000)
	cfg := testConfig(clock)
	cfg.SegmentBytes = 600
	l := mustOpen(t, t.TempDir(), cfg)
	defer func() { l.Close() }()
	for i := range 40 {
		mustAppend(t, l, keyedBatch(t, clock.Now().UnixMilli(), -1, []testRecord{{key: fmt.Sprint(i % 4), value: []byte("v")}}), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(cleanOpts(l.EndOffset(), -1)); err != nil {
		t.Fatal(err)
	}
	cleaned := l.firstDirty()
	if cleaned <= 10 {
		t.Fatalf("cleaned only to %d", cleaned)
	}
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if got := l.cleaner.cleaned.Load(); got > l.EndOffset() {
		t.Fatalf("dirty section starts at %d, beyond the end %d after truncation", got, l.EndOffset())
	}
	// Persisted: a reopened log has it too.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, l.Dir(), cfg)
	if l.firstDirty(); l.cleaner.cleaned.Load() > l.EndOffset() {
		got := l.cleaner.cleaned.Load()
		t.Fatalf("after reopen the dirty section starts at %d, beyond the end %d", got, l.EndOffset())
	}
}

// TestAppendReplicaTakesCompactedBatches: a follower of a compacted leader receives
// batches with offset gaps inside them and header-only batches; it appends them at the
// leader's offsets and finds them again after a crash (recovery accepts them too), while
// a produced batch must still satisfy Kafka's count invariants.
func TestAppendReplicaTakesCompactedBatches(t *testing.T) {
	cfg := testConfig(nil)
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	full := keyedBatch(t, 1000, 42, []testRecord{{key: "a", value: []byte("1")}, {key: "b", value: []byte("2")}, {key: "a", value: []byte("3")}})
	SetBaseOffset(full, 10)
	gapped, n, err := testFilter{}.Filter(full, func(off int64, _ []byte, _ bool) bool { return off != 10 })
	if err != nil || n != 2 {
		t.Fatal(n, err)
	}
	empty, n, err := testFilter{}.Filter(full, func(int64, []byte, bool) bool { return false })
	if err != nil || n != 0 {
		t.Fatal(n, err)
	}
	SetBaseOffset(empty, 20)
	if _, err := l.Append(empty, 0); err == nil {
		t.Fatal("Append took a batch with no records")
	}
	for _, b := range [][]byte{gapped, empty} {
		if _, err := l.AppendReplica(b); err != nil {
			t.Fatalf("AppendReplica: %v", err)
		}
	}
	if l.EndOffset() != 23 {
		t.Fatalf("end offset %d, want 23", l.EndOffset())
	}
	l.crashForTest()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != 23 {
		t.Fatalf("after recovery the end offset is %d, want 23", l.EndOffset())
	}
	recs := readRecords(t, l)
	if len(recs) != 2 || recs[0].offset != 11 || recs[1].offset != 12 {
		t.Fatalf("read back %+v", recs)
	}
}
