package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchSpec describes a RecordBatch v2 for makeBatch.
type batchSpec struct {
	base      int64
	records   int
	valueSize int
	timestamp int64 // first timestamp; record i is timestamp+i
	epoch     int32
	producer  int64
}

// makeBatch builds a valid RecordBatch v2 with kmsg.
func makeBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	if s.records <= 0 {
		s.records = 1
	}
	var recs []byte
	for i := 0; i < s.records; i++ {
		value := bytes.Repeat([]byte{byte('a' + i%26)}, s.valueSize)
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: fmt.Appendf(nil, "k%d", i), Value: value}
		body := r.AppendTo(nil) // with Length 0, which encodes as one byte
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	pid := s.producer
	if pid == 0 {
		pid = -1
	}
	b := kmsg.RecordBatch{
		FirstOffset:          s.base,
		PartitionLeaderEpoch: s.epoch,
		Magic:                2,
		LastOffsetDelta:      int32(s.records - 1),
		FirstTimestamp:       s.timestamp,
		MaxTimestamp:         s.timestamp + int64(s.records-1),
		ProducerID:           pid,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(s.records),
		Records:              recs,
	}
	b.Length = int32(49 + len(recs))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offCRC:], ComputeCRC(out))
	if _, err := ValidateHeader(out); err != nil {
		t.Fatalf("makeBatch built an invalid batch: %v", err)
	}
	return out
}

// sizedBatch builds a one-record batch of exactly size bytes (size >= 80).
func sizedBatch(t testing.TB, size int, ts int64) []byte {
	t.Helper()
	b := makeBatch(t, batchSpec{records: 1, valueSize: 1, timestamp: ts})
	grow := size - len(b)
	if grow < 0 {
		t.Fatalf("sizedBatch: %d bytes is below the minimum %d", size, len(b))
	}
	for v := grow; v >= 0; v-- {
		b = makeBatch(t, batchSpec{records: 1, valueSize: 1 + v, timestamp: ts})
		if len(b) == size {
			return b
		}
		if len(b) < size {
			break
		}
	}
	t.Fatalf("sizedBatch: cannot make %d bytes", size)
	return nil
}

// testConfig is a small-segment configuration with a fixed clock.
func testConfig(clock *fakeClock) Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.SegmentIndexBytes = 4 << 10
	cfg.IndexIntervalBytes = 256
	cfg.Logger = discardLogger()
	if clock != nil {
		cfg.Now = clock.Now
	}
	return cfg
}

type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(ms int64) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(ms)
	return c
}
func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func mustOpen(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.Append(b, epoch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return info
}

// readAll returns every batch from offset to the end, one by one.
func readAll(t testing.TB, l *Log, offset int64) [][]byte {
	t.Helper()
	v, err := l.Read(offset, math.MaxInt32, l.EndOffset(), true)
	if err != nil {
		t.Fatalf("Read(%d): %v", offset, err)
	}
	defer v.Release()
	var out [][]byte
	for _, c := range v.Chunks {
		bs, err := SplitBatches(c)
		if err != nil {
			t.Fatalf("Read returned a chunk that is not whole batches: %v", err)
		}
		for _, b := range bs {
			out = append(out, bytes.Clone(b))
		}
	}
	return out
}

// crashForTest abandons the log as a killed process would: nothing is trimmed, synced
// or marked clean. The page cache keeps what was written, as after a process crash.
func (l *Log) crashForTest() { l.Abandon() }

// checkIndexes verifies that every segment's indexes are exactly what a rebuild from
// its data gives, and that the segments chain up to the log's end offset.
func checkIndexes(t testing.TB, l *Log) {
	t.Helper()
	segs := l.segments()
	interval := int64(l.config().IndexIntervalBytes)
	for i, s := range segs {
		if !s.acquire() {
			t.Fatalf("segment %d: cannot acquire", s.base)
		}
		if err := s.use(interval); err != nil {
			t.Fatalf("segment %d: load: %v", s.base, err)
		}
		size := s.size.Load()
		limit := int64(math.MaxInt64)
		if i+1 < len(segs) {
			limit = segs[i+1].base
		}
		r := scanSegment(s.data[:size], s.base, limit, interval)
		if r.valid != size {
			t.Fatalf("segment %d: %d of %d bytes valid: %v", s.base, r.valid, size, r.stop)
		}
		if got := s.offsets.entries(); got != int64(len(r.offsets)) {
			t.Fatalf("segment %d: offset index has %d entries, rebuild gives %d", s.base, got, len(r.offsets))
		}
		for j, e := range r.offsets {
			off, pos := s.offsets.at(int64(j))
			if off != e.offset || pos != e.pos {
				t.Fatalf("segment %d: offset entry %d is (%d,%d), rebuild gives (%d,%d)", s.base, j, off, pos, e.offset, e.pos)
			}
		}
		checkTimeIndex(t, s, size, r.state.maxTs, i < len(segs)-1)
		if got := s.maxTimestamp.Load(); got != r.state.maxTs {
			t.Fatalf("segment %d: max timestamp %d, data says %d", s.base, got, r.state.maxTs)
		}
		if i == len(segs)-1 && r.next > l.EndOffset() {
			t.Fatalf("last segment ends at %d beyond the end offset %d", r.next, l.EndOffset())
		}
		s.unuse()
		s.release()
	}
}

// validPrefix is the recovery oracle, written apart from scanSegment: the longest run of
// batches from the start of data that pass ValidateHeader with increasing offsets
// storable relative to base.
func validPrefix(data []byte, base int64) (n int, batches [][]byte) {
	next := base
	for n < len(data) {
		h, err := ValidateHeader(data[n:])
		if err != nil || h.BaseOffset < next || h.LastOffset()-base > math.MaxUint32 {
			break
		}
		batches = append(batches, data[n:n+h.Size()])
		next = h.LastOffset() + 1
		n += h.Size()
	}
	return n, batches
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// faultFS wraps the real file system to inject the failures of a full or broken disk.
type faultFS struct {
	osFS
	mu       sync.Mutex
	budget   int64 // bytes Allocate and WriteAt may still use; < 0 means unlimited
	syncErr  error // returned by every Sync when set
	syncs    atomic.Int64
	allocErr error // returned by Allocate when the budget is exhausted
	// beforeSync, when set, runs at the start of every Sync (on the syncing goroutine).
	beforeSync func()
}

func newFaultFS() *faultFS { return &faultFS{budget: -1, allocErr: syscall.ENOSPC} }

func (f *faultFS) setBudget(n int64) {
	f.mu.Lock()
	f.budget = n
	f.mu.Unlock()
}

func (f *faultFS) take(n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.budget < 0 {
		return nil
	}
	if n > f.budget {
		return f.allocErr
	}
	f.budget -= n
	return nil
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	inner, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: inner, fs: f}, nil
}

type faultFile struct {
	file
	fs *faultFS
}

func (f *faultFile) Allocate(off, n int64) error {
	if err := f.fs.take(n); err != nil {
		return err
	}
	return f.file.Allocate(off, n)
}

// WriteAt charges the budget for the bytes that extend the file: writes inside a
// preallocated file land in blocks Allocate already charged (a simplification: holes
// are not tracked).
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	size, err := fileSize(f.file)
	if err != nil {
		return 0, err
	}
	if grow := off + int64(len(p)) - size; grow > 0 {
		if err := f.fs.take(grow); err != nil {
			return 0, err
		}
	}
	return f.file.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if f.fs.beforeSync != nil {
		f.fs.beforeSync()
	}
	f.fs.syncs.Add(1)
	f.fs.mu.Lock()
	err := f.fs.syncErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.file.Sync()
}

// copyDir copies the regular files of src into a new directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return dst
}

func isErr(err, target error) bool { return errors.Is(err, target) }

var errEIO = syscall.EIO

// noSyncFS is the real file system without fsync, for tests that simulate crashes by
// editing files and so gain nothing from durability.
type noSyncFS struct{ osFS }

func (noSyncFS) SyncDir(string) error { return nil }

func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := n.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ file }

func (noSyncFile) Sync() error { return nil }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// checkTimeIndex verifies the time index's meaning rather than its exact entries (a
// segment that was sealed and reopened keeps its seal entry in the middle): timestamps
// strictly increase, each entry (T, O) names a batch O whose timestamp is T with every
// batch before it below T, and a sealed segment's last entry is its largest timestamp.
func checkTimeIndex(t testing.TB, s *segment, size, maxTs int64, sealed bool) {
	t.Helper()
	type batchTs struct{ base, ts int64 }
	var batches []batchTs
	for pos := int64(0); pos < size; {
		b, ok := batchAt(s.data, pos, size)
		if !ok {
			t.Fatalf("segment %d: no batch at %d", s.base, pos)
		}
		batches = append(batches, batchTs{b.base, maxTimestampAt(s.data, pos)})
		pos += b.size
	}
	prev := int64(-1)
	for i := int64(0); i < s.times.entries(); i++ {
		ts, off := s.times.at(i)
		if ts <= prev {
			t.Fatalf("segment %d: time entry %d timestamp %d after %d", s.base, i, ts, prev)
		}
		prev = ts
		found := false
		for _, b := range batches {
			if b.base == off {
				if b.ts != ts {
					t.Fatalf("segment %d: time entry %d (%d, %d) but the batch's timestamp is %d", s.base, i, ts, off, b.ts)
				}
				found = true
				break
			}
			if b.ts >= ts {
				t.Fatalf("segment %d: time entry %d (%d, %d) but batch %d before it has timestamp %d", s.base, i, ts, off, b.base, b.ts)
			}
		}
		if !found {
			t.Fatalf("segment %d: time entry %d names offset %d, which starts no batch", s.base, i, off)
		}
	}
	if sealed && maxTs >= 0 && prev != maxTs {
		t.Fatalf("sealed segment %d: last time entry %d, largest timestamp %d", s.base, prev, maxTs)
	}
}

// waitFlushed waits for the group commit to cover everything appended so far.
func waitFlushed(t testing.TB, l *Log) {
	t.Helper()
	want := l.EndOffset()
	deadline := time.Now().Add(30 * time.Second)
	for l.FlushedOffset() < want {
		if err := l.SyncErr(); err != nil {
			t.Fatalf("waiting for the flushed offset to reach %d: %v", want, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flushed offset is %d after 30s, want %d", l.FlushedOffset(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitSyncErr waits for a group commit to fail, and returns its error.
func waitSyncErr(t testing.TB, l *Log) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := l.SyncErr(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("no group commit failed within 30s (flushed offset %d, end %d)", l.FlushedOffset(), l.EndOffset())
		}
		time.Sleep(time.Millisecond)
	}
}
