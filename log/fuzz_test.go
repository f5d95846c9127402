package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzSeedLog is a small valid segment: a few batches of different shapes.
func fuzzSeedLog(t testing.TB) []byte {
	var out []byte
	next := int64(0)
	for i, n := range []int{1, 3, 2, 5} {
		b := makeBatch(t, batchSpec{base: next, records: n, valueSize: 5 + 9*i, timestamp: int64(1000 + i)})
		out = append(out, b...)
		next += int64(n)
	}
	return out
}

// fuzzSeedIndex is an offset index for fuzzSeedLog with IndexIntervalBytes=1.
func fuzzSeedIndex(t testing.TB, seg []byte) []byte {
	r := scanSegment(seg, 0, 1<<62, 1)
	var out []byte
	for _, e := range r.offsets {
		out = binary.BigEndian.AppendUint32(out, uint32(e.offset))
		out = binary.BigEndian.AppendUint32(out, uint32(e.pos))
	}
	return out
}

// FuzzRecovery writes arbitrary bytes as a segment (and an offset index) and opens the
// log: Open must not fail or panic, and what remains must be exactly the valid prefix,
// with indexes that match it.
func FuzzRecovery(f *testing.F) {
	seg := fuzzSeedLog(f)
	idx := fuzzSeedIndex(f, seg)
	f.Add(seg, idx)
	f.Add(seg[:len(seg)-7], idx)
	f.Add(append(bytes.Clone(seg), make([]byte, 300)...), []byte(nil))
	flipped := bytes.Clone(seg)
	flipped[len(seg)/2] ^= 0x10
	f.Add(flipped, idx[:len(idx)/2])
	f.Add([]byte{}, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data, index []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentFileName(0, logSuffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(index) > 0 {
			if err := os.WriteFile(filepath.Join(dir, segmentFileName(0, indexSuffix)), index, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := testConfig(nil)
		cfg.IndexIntervalBytes = 1
		l, err := openLog(dir, cfg, noSyncFS{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		_, want := validPrefix(data, 0)
		got := readAll(t, l, 0)
		if len(got) != len(want) {
			t.Fatalf("%d batches remain, the valid prefix has %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch %d differs from the valid prefix", i)
			}
		}
		checkIndexes(t, l)
		if _, err := l.Append(makeBatch(t, batchSpec{}), 0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// FuzzBatchHeader checks the header decoder against its own invariants and against
// kmsg's independent RecordBatch decoder.
func FuzzBatchHeader(f *testing.F) {
	seg := fuzzSeedLog(f)
	f.Add(seg)
	f.Add(seg[:BatchHeaderSize])
	f.Add(seg[:BatchHeaderSize-1])
	f.Add(makeBatch(f, batchSpec{records: 1}))
	f.Add(make([]byte, BatchHeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data)
		if err == nil {
			if h.Magic != 2 || h.Length < BatchHeaderSize-logOverhead || h.Size() > len(data) {
				t.Fatalf("ParseHeader accepted %+v for %d bytes", h, len(data))
			}
			var k kmsg.RecordBatch
			if kerr := k.ReadFrom(data[:h.Size()]); kerr != nil {
				t.Fatalf("kmsg rejects what ParseHeader accepts: %v", kerr)
			}
			if k.FirstOffset != h.BaseOffset || k.Length != h.Length || k.PartitionLeaderEpoch != h.PartitionLeaderEpoch ||
				uint32(k.CRC) != h.CRC || k.Attributes != h.Attributes || k.LastOffsetDelta != h.LastOffsetDelta ||
				k.FirstTimestamp != h.FirstTimestamp || k.MaxTimestamp != h.MaxTimestamp || k.ProducerID != h.ProducerID ||
				k.ProducerEpoch != h.ProducerEpoch || k.FirstSequence != h.BaseSequence || k.NumRecords != h.RecordCount {
				t.Fatalf("ParseHeader %+v disagrees with kmsg %+v", h, k)
			}
		}
		v, verr := ValidateHeader(data)
		if verr == nil {
			if err != nil || v != h {
				t.Fatalf("ValidateHeader accepted what ParseHeader rejects: %v", err)
			}
			if ComputeCRC(data[:v.Size()]) != v.CRC || v.RecordCount <= 0 || v.LastOffsetDelta != v.RecordCount-1 {
				t.Fatalf("ValidateHeader accepted an invalid batch %+v", v)
			}
			// Rewriting the fields outside the CRC keeps the batch valid.
			b := bytes.Clone(data[:v.Size()])
			SetBaseOffset(b, 12345)
			SetPartitionLeaderEpoch(b, 77)
			w, err := ValidateHeader(b)
			if err != nil || w.BaseOffset != 12345 || w.PartitionLeaderEpoch != 77 {
				t.Fatalf("after rewriting offset and epoch: %+v %v", w, err)
			}
			SetLogAppendTime(b, 999)
			w, err = ValidateHeader(b)
			if err != nil || !w.LogAppendTime() || w.MaxTimestamp != 999 {
				t.Fatalf("after SetLogAppendTime: %+v %v", w, err)
			}
		} else if err == nil && ComputeCRC(data[:h.Size()]) == h.CRC && h.RecordCount > 0 && h.LastOffsetDelta == h.RecordCount-1 {
			t.Fatalf("ValidateHeader rejected a valid batch: %v", verr)
		}
		parts, serr := SplitBatches(data)
		if serr == nil {
			if !bytes.Equal(bytes.Join(parts, nil), data) {
				t.Fatal("SplitBatches lost or added bytes")
			}
			for _, p := range parts {
				ph, err := ParseHeader(p)
				if err != nil || ph.Size() != len(p) {
					t.Fatalf("SplitBatches returned a part that is not one batch: %v", err)
				}
			}
		} else if len(data) > 0 && err == nil && h.Size() == len(data) {
			t.Fatalf("SplitBatches rejected one whole batch: %v", serr)
		}
	})
}

// TestWriteFuzzCorpus regenerates the committed seed corpora under testdata/fuzz when
// SHALE_WRITE_FUZZ_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("SHALE_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set SHALE_WRITE_FUZZ_CORPUS=1 to regenerate testdata/fuzz")
	}
	seg := fuzzSeedLog(t)
	idx := fuzzSeedIndex(t, seg)
	torn := bytes.Clone(seg)
	clear(torn[len(torn)-20:])
	gap := append(bytes.Clone(seg), makeBatch(t, batchSpec{base: 100, records: 2})...)
	backwards := append(bytes.Clone(seg), makeBatch(t, batchSpec{base: 2, records: 2})...)
	write := func(target, name string, values ...[]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, v := range values {
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("FuzzRecovery", "valid", seg, idx)
	write("FuzzRecovery", "torn-tail", torn, idx)
	write("FuzzRecovery", "zero-tail", append(bytes.Clone(seg), make([]byte, 512)...), nil)
	write("FuzzRecovery", "offset-gap", gap, nil)
	write("FuzzRecovery", "offsets-backwards", backwards, idx)
	write("FuzzRecovery", "garbage-index", seg, bytes.Repeat([]byte{0xff, 0, 7}, 11))
	write("FuzzBatchHeader", "valid-batches", seg)
	write("FuzzBatchHeader", "one-batch", makeBatch(t, batchSpec{records: 3, valueSize: 4}))
	write("FuzzBatchHeader", "header-only", seg[:BatchHeaderSize])
	write("FuzzBatchHeader", "torn", torn)
	write("FuzzBatchHeader", "zeros", make([]byte, 64))
}
