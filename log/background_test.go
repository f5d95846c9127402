package log

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gatedBackground holds the log's background work until the test runs it, so that a
// test sees the state between a roll or a deletion and its background half.
type gatedBackground struct {
	mu  sync.Mutex
	fns []func()
}

func (g *gatedBackground) Go(fn func()) {
	g.mu.Lock()
	g.fns = append(g.fns, fn)
	g.mu.Unlock()
}

func (g *gatedBackground) pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.fns)
}

// runAll runs what was handed over, and what that hands over, until nothing is left.
func (g *gatedBackground) runAll() {
	for {
		g.mu.Lock()
		fns := g.fns
		g.fns = nil
		g.mu.Unlock()
		if len(fns) == 0 {
			return
		}
		for _, fn := range fns {
			fn()
		}
	}
}

// opsFS records the calls that cost I/O or wait on the file system (fsync, ftruncate,
// close, unlink, rename, writeback) per file, and can fail writeback.
type opsFS struct {
	fileSystem
	mu           sync.Mutex
	ops          []string
	writebackErr error
}

func (o *opsFS) record(format string, args ...any) {
	o.mu.Lock()
	o.ops = append(o.ops, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

// take returns the calls recorded since the last take.
func (o *opsFS) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ops := o.ops
	o.ops = nil
	return ops
}

func (o *opsFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := o.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &opsFile{file: f, o: o, name: filepath.Base(name)}, nil
}

func (o *opsFS) Remove(name string) error {
	o.record("remove %s", filepath.Base(name))
	return o.fileSystem.Remove(name)
}

func (o *opsFS) Rename(oldpath, newpath string) error {
	o.record("rename %s %s", filepath.Base(oldpath), filepath.Base(newpath))
	return o.fileSystem.Rename(oldpath, newpath)
}

func (o *opsFS) SyncDir(path string) error {
	o.record("syncdir")
	return o.fileSystem.SyncDir(path)
}

type opsFile struct {
	file
	o    *opsFS
	name string
}

func (f *opsFile) Sync() error {
	f.o.record("sync %s", f.name)
	return f.file.Sync()
}

func (f *opsFile) Truncate(size int64) error {
	f.o.record("truncate %s %d", f.name, size)
	return f.file.Truncate(size)
}

func (f *opsFile) Close() error {
	f.o.record("close %s", f.name)
	return f.file.Close()
}

func (f *opsFile) Writeback(off, n int64) error {
	f.o.record("writeback %s %d %d", f.name, off, n)
	f.o.mu.Lock()
	err := f.o.writebackErr
	f.o.mu.Unlock()
	if err != nil {
		return err
	}
	return f.file.Writeback(off, n)
}

// ofSegment keeps the calls on the files of the segment at base.
func ofSegment(ops []string, base int64) []string {
	stem := segmentFileName(base, "")
	var out []string
	for _, op := range ops {
		if strings.Contains(op, " "+stem+".") {
			out = append(out, op)
		}
	}
	return out
}

func hasPrefixOp(ops []string, prefix string) bool {
	for _, op := range ops {
		if strings.HasPrefix(op, prefix) {
			return true
		}
	}
	return false
}

// TestWritebackSteps: the appender starts writeback once per writeback.bytes appended to
// the active segment, of exactly the whole pages written since the last one, and makes
// no call in between; a new segment starts counting afresh.
func TestWritebackSteps(t *testing.T) {
	const step = 16 << 10
	fsys := &opsFS{fileSystem: osFS{}}
	cfg := testConfig(nil)
	cfg.SegmentBytes = 200 << 10
	cfg.WritebackBytes = step
	cfg.Background = Inline{}
	l, err := openLog(t.TempDir(), cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	page := int64(os.Getpagesize())
	b := sizedBatch(t, 3000, 1)
	var done, size int64 // what the model says writeback covers, and the active segment's size
	base := int64(0)
	calls := 0
	for i := 0; i < 200; i++ {
		fsys.take()
		info := mustAppend(t, l, b, 0)
		var wb []string
		for _, op := range fsys.take() {
			if strings.HasPrefix(op, "writeback ") {
				wb = append(wb, op)
			}
		}
		if a := l.active(); a.base != base {
			base, done, size = a.base, 0, 0
		}
		size += int64(info.Size)
		var want []string
		if size-done >= step {
			end := size / page * page
			want = []string{fmt.Sprintf("writeback %s %d %d", segmentFileName(base, logSuffix), done, end-done)}
			done = end
		}
		if strings.Join(wb, ";") != strings.Join(want, ";") {
			t.Fatalf("append %d (segment %d, %d bytes): writeback calls %q, want %q", i, base, size, wb, want)
		}
		calls += len(wb)
	}
	if l.NumSegments() < 2 || calls < 2*(200<<10)/step-2 {
		t.Fatalf("%d segments, %d writeback calls: the test did not cover what it should", l.NumSegments(), calls)
	}

	// 0 in the config (negative in log.Config): no writeback at all.
	cfg.WritebackBytes = -1
	l.SetConfig(cfg)
	fsys.take()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, b, 0)
	}
	if hasPrefixOp(fsys.take(), "writeback ") {
		t.Fatal("writeback with writeback.bytes off")
	}
}

// TestWritebackUnsupported: where sync_file_range fails with ENOSYS or EINVAL the log says
// so once and stops calling it; other appends are unaffected.
func TestWritebackUnsupported(t *testing.T) {
	for _, errno := range []error{syscall.ENOSYS, syscall.EINVAL} {
		var logged bytes.Buffer
		fsys := &opsFS{fileSystem: osFS{}, writebackErr: errno}
		cfg := testConfig(nil)
		cfg.WritebackBytes = 4096
		cfg.Background = Inline{}
		cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		l, err := openLog(t.TempDir(), cfg, fsys)
		if err != nil {
			t.Fatal(err)
		}
		b := sizedBatch(t, 5000, 1)
		for i := 0; i < 40; i++ {
			mustAppend(t, l, b, 0)
		}
		n := 0
		for _, op := range fsys.take() {
			if strings.HasPrefix(op, "writeback ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%v: %d writeback calls, want 1 (then none)", errno, n)
		}
		if c := strings.Count(logged.String(), "sync_file_range is not supported"); c != 1 {
			t.Errorf("%v: logged %d times, want once:\n%s", errno, c, logged.String())
		}
		if got := len(readAll(t, l, 0)); got != 40 {
			t.Errorf("%v: %d batches, want 40", errno, got)
		}
		l.Close()
	}
}

// TestRollAndDeleteOffTheCaller: a roll neither trims nor syncs nor closes the rolled
// segment's files, and a deletion (retention, DeleteRecords) only renames the files; the
// trim, fsync, recovery point, close and unlink come when the background runs.
func TestRollAndDeleteOffTheCaller(t *testing.T) {
	dir := t.TempDir()
	fsys := &opsFS{fileSystem: osFS{}}
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.RetentionBytes = 4096
	cfg.RetentionMs = -1 // the batches' timestamps are from 1970
	cfg.Background = bg
	l, err := openLog(dir, cfg, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bg.runAll()
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 4; i++ {
		mustAppend(t, l, b, 0)
	}
	fsys.take()
	mustAppend(t, l, b, 0) // rolls: segment 0 is sealed, segment 4 created
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("%d segments after the roll, want 2", n)
	}
	if ops := ofSegment(fsys.take(), 0); len(ops) != 0 {
		t.Fatalf("the roll did %q on the rolled segment's files on the caller", ops)
	}
	if st, _ := os.Stat(segmentPath(dir, 0, logSuffix)); st.Size() != 4096 {
		t.Fatalf("rolled segment has %d bytes before the background ran, want the preallocated 4096", st.Size())
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before the rolled segment was synced", rp)
	}
	if bg.pending() == 0 {
		t.Fatal("the roll handed nothing to the background")
	}
	bg.runAll()
	ops := ofSegment(fsys.take(), 0)
	for _, want := range []string{"truncate 00000000000000000000.log 4000", "sync 00000000000000000000.log", "sync 00000000000000000000.index", "sync 00000000000000000000.timeindex"} {
		if !hasPrefixOp(ops, want) {
			t.Fatalf("background did %q, want %q among them", ops, want)
		}
	}
	if rp := l.RecoveryPoint(); rp != 4 {
		t.Fatalf("recovery point %d after the background, want 4", rp)
	}

	// Retention: the log is over retention.bytes, so segment 0 goes.
	for i := 0; i < 4; i++ {
		mustAppend(t, l, b, 0) // rolls into segment 8
	}
	bg.runAll()
	fsys.take()
	deleted, err := l.EnforceRetention()
	if err != nil || deleted == 0 {
		t.Fatalf("EnforceRetention deleted %d: %v", deleted, err)
	}
	ops = fsys.take()
	for _, op := range ops {
		if !strings.HasPrefix(op, "rename ") {
			t.Fatalf("retention did %q on the caller, want renames only", ops)
		}
	}
	if got := segmentFiles(t, dir, deletedSuffix); len(got) != 3 {
		t.Fatalf(".deleted files %q before the background ran, want the 3 of segment 0", got)
	}
	if got := segmentFiles(t, dir, logSuffix); len(got) != 2 || got[0] != segmentFileName(4, logSuffix) {
		t.Fatalf("segment files %q after retention", got)
	}
	bg.runAll()
	ops = ofSegment(fsys.take(), 0)
	for _, want := range []string{"close 00000000000000000000.log", "remove 00000000000000000000.log.deleted", "remove 00000000000000000000.index.deleted"} {
		if !hasPrefixOp(ops, want) {
			t.Fatalf("background did %q, want %q among them", ops, want)
		}
	}
	if got := segmentFiles(t, dir, deletedSuffix); len(got) != 0 {
		t.Fatalf(".deleted files %q left after the background ran", got)
	}

	// DeleteRecords up to the end: the emptied active segment rolls and the old ones go,
	// with nothing but renames (and the log start checkpoint) on the caller.
	fsys.take()
	if err := l.DeleteRecordsBefore(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	for _, op := range fsys.take() {
		if strings.Contains(op, "0000.log") && !strings.HasPrefix(op, "rename ") && !strings.HasPrefix(op, "truncate "+segmentFileName(l.EndOffset(), logSuffix)) {
			t.Fatalf("DeleteRecords did %q on the caller", op)
		}
	}
	bg.runAll()
	if got := segmentFiles(t, dir, logSuffix); len(got) != 1 || got[0] != segmentFileName(l.EndOffset(), logSuffix) {
		t.Fatalf("segment files %q after DeleteRecords to the end", got)
	}
	if got := segmentFiles(t, dir, deletedSuffix); len(got) != 0 {
		t.Fatalf(".deleted files %q left after the background ran", got)
	}
}

// TestDeletedSegmentNotRevived: a process killed after a deletion renamed a segment's
// files but before the background unlinked them must not find the segment again: Open
// removes .deleted files. Retention does not persist the log start (the first segment
// says it), so without the rename the deleted segment would come back as live data.
func TestDeletedSegmentNotRevived(t *testing.T) {
	dir := t.TempDir()
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Background = bg
	l := mustOpen(t, dir, cfg)
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 12; i++ {
		mustAppend(t, l, b, 0)
	}
	bg.runAll()
	cfg.RetentionBytes = 4000 // the active segment's size
	cfg.RetentionMs = -1      // the batches' timestamps are from 1970
	l.SetConfig(cfg)
	if n, err := l.EnforceRetention(); err != nil || n != 2 {
		t.Fatalf("EnforceRetention deleted %d: %v", n, err)
	}
	if s := l.StartOffset(); s != 8 {
		t.Fatalf("start offset %d after retention, want 8", s)
	}
	l.crashForTest() // before the background unlinked anything
	left := segmentFiles(t, dir, deletedSuffix)

	cfg.Background = Inline{}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if s := l.StartOffset(); s != 8 {
		t.Fatalf("start offset %d after reopening, want 8: a deleted segment came back", s)
	}
	if len(left) != 6 {
		t.Fatalf(".deleted files %q after the crash, want the 6 of segments 0 and 4", left)
	}
	if got := len(readAll(t, l, l.StartOffset())); got != 4 {
		t.Fatalf("%d batches after reopening, want 4", got)
	}
	if got := segmentFiles(t, dir, deletedSuffix); len(got) != 0 {
		t.Fatalf(".deleted files %q left after Open", got)
	}
	checkIndexes(t, l)
}

// TestRolledSegmentUnsyncedRecovered: a crash after a roll and before the background
// synced the rolled segment leaves it untrimmed and the recovery point below it; Open
// scans it, keeps every batch, and the trim and sync happen then.
func TestRolledSegmentUnsyncedRecovered(t *testing.T) {
	dir := t.TempDir()
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Background = bg
	l := mustOpen(t, dir, cfg)
	bg.runAll()
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 10; i++ {
		mustAppend(t, l, b, 0)
	}
	want := readAll(t, l, 0)
	l.crashForTest()
	if st, _ := os.Stat(segmentPath(dir, 0, logSuffix)); st.Size() != 4096 {
		t.Fatalf("rolled segment has %d bytes, want the untrimmed 4096", st.Size())
	}

	cfg.Background = Inline{}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if rf := l.RecoveredFrom(); rf != 0 {
		t.Fatalf("recovered from %d, want 0: the unsynced segments must be scanned", rf)
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d batches after recovery, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs after recovery", i)
		}
	}
	checkIndexes(t, l)
	if st, _ := os.Stat(segmentPath(dir, 0, logSuffix)); st.Size() != 4000 {
		t.Fatalf("recovered segment has %d bytes, want 4000", st.Size())
	}
	if rp := l.RecoveryPoint(); rp != 8 {
		t.Fatalf("recovery point %d after the recovered segments were synced, want 8", rp)
	}
}

// TestCloseDrainsBackground: Close finishes deletions the background had not run, and a
// run handed out before Close does nothing after it.
func TestCloseDrainsBackground(t *testing.T) {
	dir := t.TempDir()
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	cfg.Background = bg
	l := mustOpen(t, dir, cfg)
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 12; i++ {
		mustAppend(t, l, b, 0)
	}
	if err := l.DeleteRecordsBefore(8); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir, deletedSuffix); len(got) == 0 {
		t.Fatal("no .deleted files before Close")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir, deletedSuffix); len(got) != 0 {
		t.Fatalf(".deleted files %q left after Close", got)
	}
	bg.runAll() // a run after Close must not touch the closed log
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if s := l.StartOffset(); s != 8 {
		t.Fatalf("start offset %d, want 8", s)
	}
	checkIndexes(t, l)
}

// TestDefaultBackground: without Config.Background the log's own goroutine trims and
// syncs rolled segments and moves the recovery point, and Close stops it.
func TestDefaultBackground(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4096
	l := mustOpen(t, dir, cfg)
	b := sizedBatch(t, 1000, 1)
	for i := 0; i < 13; i++ {
		mustAppend(t, l, b, 0)
	}
	own := l.bg.own
	if own == nil {
		t.Fatal("no goroutine of the log's own")
	}
	deadline := time.Now().Add(time.Minute)
	for l.RecoveryPoint() < 12 {
		if time.Now().After(deadline) {
			t.Fatalf("recovery point still %d a minute after the rolls, want 12", l.RecoveryPoint())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, base := range []int64{0, 4, 8} {
		if st, _ := os.Stat(segmentPath(dir, base, logSuffix)); st.Size() != 4000 {
			t.Fatalf("segment %d has %d bytes after the background synced it, want 4000", base, st.Size())
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-own.done:
	default:
		t.Fatal("the log's background goroutine runs on after Close")
	}
}

// TestRollAcrossOffsetGapSurvivesCrash: a replica's roll across an offset gap too large for
// relative offsets leaves the old segment's zero tail followed by a segment that does not
// start where its batches end, which recovery would read as a hole and drop everything
// after it. The roll trims such a segment at once, so a crash before the background runs
// keeps both segments.
func TestRollAcrossOffsetGapSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	bg := &gatedBackground{}
	cfg := testConfig(nil)
	cfg.Background = bg
	l := mustOpen(t, dir, cfg)
	bg.runAll()
	for i := int64(0); i < 3; i++ {
		if _, err := l.AppendReplica(makeBatch(t, batchSpec{base: i, records: 1, valueSize: 100})); err != nil {
			t.Fatal(err)
		}
	}
	far := int64(3) + math.MaxUint32 + 5
	if _, err := l.AppendReplica(makeBatch(t, batchSpec{base: far, records: 1, valueSize: 100})); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments, want 2", l.NumSegments())
	}
	want := readAll(t, l, 0)
	l.crashForTest()

	cfg.Background = Inline{}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != far+1 {
		t.Fatalf("end offset %d after recovery, want %d: the segment after the gap was dropped", l.EndOffset(), far+1)
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d batches after recovery, want %d", len(got), len(want))
	}
}
