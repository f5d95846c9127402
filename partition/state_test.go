package partition

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
)

func TestEpochCache(t *testing.T) {
	var c epochCache
	c.assign(0, 0)
	c.assign(0, 5) // same epoch: no new entry
	c.assign(2, 10)
	c.assign(1, 12) // older epoch: ignored
	c.assign(5, 20)
	for _, tc := range []struct {
		req       int32
		epoch     int32
		endOffset int64
	}{
		{0, 0, 10},
		{1, 0, 10}, // unknown epoch between: largest below, ending where the next began
		{2, 2, 20},
		{4, 2, 20},
		{5, 5, 30}, // latest: the log end
		{9, 5, 30},
		{-1, -1, -1},
	} {
		e, o := c.endOffsetFor(tc.req, 30)
		if e != tc.epoch || o != tc.endOffset {
			t.Errorf("endOffsetFor(%d) = %d, %d; want %d, %d", tc.req, e, o, tc.epoch, tc.endOffset)
		}
	}
	c.truncateFrom(20)
	if c.latest() != 2 {
		t.Errorf("after truncating at 20, latest %d", c.latest())
	}
	c.truncateBefore(12)
	if len(c.entries) != 1 || c.entries[0] != (epochEntry{2, 12}) {
		t.Errorf("after truncating before 12: %+v", c.entries)
	}
}

func hdr(pid int64, epoch int16, seq int32, n int32, base int64) shalelog.Header {
	return shalelog.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1, RecordCount: n, BaseOffset: base}
}

func TestProducerState(t *testing.T) {
	s := newProducerState()
	mustOK := func(h shalelog.Header) {
		t.Helper()
		if err := s.check(h); err != nil {
			t.Fatalf("check %+v: %v", h, err)
		}
		s.record(h)
	}
	// An unknown producer may start anywhere (its state may have expired).
	mustOK(hdr(7, 0, 40, 5, 0))
	mustOK(hdr(7, 0, 45, 5, 5))
	var dup *errDuplicate
	if err := s.check(hdr(7, 0, 40, 5, 99)); !errors.As(err, &dup) || dup.meta.BaseOffset != 0 {
		t.Fatalf("retry of the first batch: %v", err)
	}
	if err := s.check(hdr(7, 0, 51, 1, 99)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	if err := s.check(hdr(7, 1, 1, 1, 99)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	mustOK(hdr(7, 1, 0, 1, 10))
	if err := s.check(hdr(7, 0, 50, 1, 99)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	// Only the last five batches are remembered.
	for i := int32(1); i <= 6; i++ {
		mustOK(hdr(7, 1, i, 1, 10+int64(i)))
	}
	if err := s.check(hdr(7, 1, 1, 1, 99)); errors.As(err, &dup) {
		t.Fatal("a batch older than the last five still counted as a duplicate")
	}
	// Sequences wrap past MaxInt32.
	mustOK(hdr(8, 0, math.MaxInt32-1, 2, 100))
	mustOK(hdr(8, 0, 0, 1, 102))
	if got := seqAdd(math.MaxInt32, 1); got != 0 {
		t.Fatalf("seqAdd wrap: %d", got)
	}
	s.truncateFrom(14) // keeps the batches at 12 and 13 (sequences 2 and 3)
	if e := s.producers[7]; e == nil || e.lastSeq() != 3 {
		t.Fatalf("after truncation: %+v", s.producers[7])
	}
	s.removeBefore(1000)
	if len(s.producers) != 0 {
		t.Fatalf("removeBefore kept %d producers", len(s.producers))
	}
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := newProducerState()
	s.record(hdr(3, 2, 0, 4, 0))
	if err := s.save(dir, 4); err != nil {
		t.Fatal(err)
	}
	s2 := newProducerState()
	if off := s2.load(dir); off != 4 {
		t.Fatalf("snapshot offset %d", off)
	}
	var dup *errDuplicate
	if err := s2.check(hdr(3, 2, 0, 4, 50)); !errors.As(err, &dup) {
		t.Fatalf("loaded state does not know the batch: %v", err)
	}
}
