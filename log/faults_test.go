package log

import (
	"syscall"
	"testing"
)

// TestConfigFaultsFailSyncs: Config.Faults reaches the file system of the log opened
// with it, and a failed group commit leaves the batch in the log, the flushed offset
// below it and the failure in SyncErr, as Append documents.
func TestConfigFaultsFailSyncs(t *testing.T) {
	faults := &Faults{}
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	cfg.Faults = faults
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, batchSpec{}), 0)
	waitFlushed(t, l)
	faults.FailSyncs(syscall.EIO)
	info, err := l.Append(makeBatch(t, batchSpec{records: 2}), 0)
	if err != nil {
		t.Fatalf("append with failing fsyncs: %v; the fsync is not the append's", err)
	}
	if err := waitSyncErr(t, l); !isErr(err, ErrStorage) || !isErr(err, syscall.EIO) {
		t.Fatalf("group commit with failing fsyncs: %v", err)
	}
	if info.BaseOffset != 1 || info.RecordCount != 2 || l.EndOffset() != 3 || l.FlushedOffset() != 1 {
		t.Fatalf("after a failed flush: %+v, end %d, flushed %d; want the batch in the log at 1, flushed 1", info, l.EndOffset(), l.FlushedOffset())
	}
	if err := l.Flush(); !isErr(err, syscall.EIO) {
		t.Fatalf("Flush with failing fsyncs: %v", err)
	}
	faults.FailSyncs(nil)
	cfg.Faults = nil
	l.SetConfig(cfg) // keeps the log's Faults
	faults.FailSyncs(syscall.EIO)
	if err := l.Flush(); !isErr(err, syscall.EIO) {
		t.Fatalf("Flush after SetConfig: %v", err)
	}
	faults.FailSyncs(nil)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}
