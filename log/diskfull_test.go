package log

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// appendUntilFull appends batch until an append fails, returning what was acknowledged
// (as stored) and the error.
func appendUntilFull(t *testing.T, l *Log, batch []byte, limit int) ([][]byte, error) {
	t.Helper()
	var acked [][]byte
	for i := 0; i < limit; i++ {
		end, size := l.EndOffset(), l.Size()
		info, err := l.Append(batch, 4)
		if err != nil {
			if l.EndOffset() != end || l.Size() != size {
				t.Fatalf("failed append changed the log: end %d->%d size %d->%d", end, l.EndOffset(), size, l.Size())
			}
			return acked, err
		}
		b := bytes.Clone(batch)
		SetBaseOffset(b, info.BaseOffset)
		SetPartitionLeaderEpoch(b, 4)
		acked = append(acked, b)
	}
	t.Fatalf("no append failed in %d tries", limit)
	return nil, nil
}

func checkContent(t *testing.T, l *Log, want [][]byte) {
	t.Helper()
	got := readAll(t, l, l.StartOffset())
	if len(got) != len(want) {
		t.Fatalf("%d batches in the log, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
}

func TestDiskFullWithFaultInjection(t *testing.T) {
	for _, segmentBytes := range []int64{1 << 20, 20 << 10} { // fills mid-segment; fills at a roll
		t.Run("", func(t *testing.T) {
			dir := t.TempDir()
			fsys := newFaultFS()
			cfg := testConfig(nil)
			cfg.SegmentBytes = segmentBytes
			l, err := openLog(dir, cfg, fsys)
			if err != nil {
				t.Fatal(err)
			}
			batch := makeBatch(t, batchSpec{records: 4, valueSize: 250})
			fsys.setBudget(100 << 10)
			acked, err := appendUntilFull(t, l, batch, 10000)
			if !isErr(err, ErrStorage) || !isErr(err, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v", err)
			}
			if len(acked) < 50 {
				t.Fatalf("only %d appends before the disk filled", len(acked))
			}
			// Still full: still refused, and nothing partial shows.
			if _, err := l.Append(batch, 4); !isErr(err, ErrStorage) {
				t.Fatalf("second append on a full disk: %v", err)
			}
			checkContent(t, l, acked)
			checkIndexes(t, l)

			// Space comes back: appends work again.
			fsys.setBudget(-1)
			for i := 0; i < 30; i++ {
				info := mustAppend(t, l, batch, 4)
				b := bytes.Clone(batch)
				SetBaseOffset(b, info.BaseOffset)
				SetPartitionLeaderEpoch(b, 4)
				acked = append(acked, b)
			}
			checkContent(t, l, acked)

			// And after a crash exactly the acknowledged batches are there.
			l.crashForTest()
			l, err = openLog(dir, cfg, fsys)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			checkContent(t, l, acked)
			checkIndexes(t, l)
		})
	}
}

func TestDiskFullOnIndexReservation(t *testing.T) {
	fsys := newFaultFS()
	cfg := testConfig(nil)
	cfg.IndexIntervalBytes = 1 // every append after the first needs an index entry
	cfg.SegmentBytes = 8 << 20
	cfg.SegmentIndexBytes = 1 << 20 // reserved 64 KiB at a time
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	batch := makeBatch(t, batchSpec{})
	mustAppend(t, l, batch, 0)
	// The log's first chunk is reserved; let the index run dry: fill its reserved part.
	x := l.active().offsets
	for x.res.reserved.Load() >= (x.entries()+1)*offsetEntrySize {
		mustAppend(t, l, batch, 0)
	}
	fsys.setBudget(0)
	before := l.EndOffset()
	if l.active().res.reserved.Load() < l.active().size.Load()+int64(len(batch)) {
		t.Fatal("the log itself needs a reservation; the test wants only the index to")
	}
	if _, err := l.Append(batch, 0); !isErr(err, ErrStorage) || !isErr(err, syscall.ENOSPC) {
		t.Fatalf("append with no space for its index entry: %v", err)
	}
	if l.EndOffset() != before {
		t.Fatal("failed append moved the end offset")
	}
	fsys.setBudget(-1)
	mustAppend(t, l, batch, 0)
	checkIndexes(t, l)
}

// TestDiskFullTmpfs fills a real, small tmpfs. Writing into an unreserved hole there
// would raise SIGBUS and kill the test binary.
func TestDiskFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	defer func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount: %v: %s; detaching lazily", err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	}()
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "topic-0")
	cfg := testConfig(nil)
	cfg.SegmentBytes = 64 << 20 // far larger than the file system: only reservations fill it
	cfg.SegmentIndexBytes = 64 << 10
	l := mustOpen(t, dir, cfg)
	batch := makeBatch(t, batchSpec{records: 16, valueSize: 1000})
	acked, err := appendUntilFull(t, l, batch, 1<<20)
	if !isErr(err, ErrStorage) || !isErr(err, syscall.ENOSPC) {
		t.Fatalf("append on a full tmpfs: %v", err)
	}
	t.Logf("%d appends (%d KiB) before ENOSPC", len(acked), len(acked)*len(batch)>>10)
	checkContent(t, l, acked)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		info := mustAppend(t, l, batch, 4)
		b := bytes.Clone(batch)
		SetBaseOffset(b, info.BaseOffset)
		SetPartitionLeaderEpoch(b, 4)
		acked = append(acked, b)
	}
	checkContent(t, l, acked)
	l.crashForTest()
	l = mustOpen(t, dir, cfg)
	checkContent(t, l, acked)
	checkIndexes(t, l)
	if err := l.Close(); err != nil {
		t.Logf("Close on a nearly full tmpfs: %v", err)
	}
}
