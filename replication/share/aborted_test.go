package share

import (
	"testing"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/partition"
)

// TestAbortedFilter: a producer's transactional batches are skipped from its aborted
// transaction's first offset through its abort marker; other producers', later
// transactions' and non-transactional batches are kept.
func TestAbortedFilter(t *testing.T) {
	batch := func(base int64, n int32, pid int64, txn, control bool) shalelog.Header {
		h := shalelog.Header{BaseOffset: base, LastOffsetDelta: n - 1, ProducerID: pid}
		if txn {
			h.Attributes |= shalelog.AttrTransactional
		}
		if control {
			h.Attributes |= shalelog.AttrControl
		}
		return h
	}
	f := newAbortedFilter([]partition.AbortedTxn{{ProducerID: 7, FirstOffset: 5}, {ProducerID: 1, FirstOffset: 2}})
	for i, c := range []struct {
		h    shalelog.Header
		skip bool
	}{
		{batch(0, 2, 1, true, false), false}, // producer 1's committed transaction
		{batch(2, 2, 1, true, false), true},  // its aborted one
		{batch(4, 1, 9, false, false), false},
		{batch(5, 1, 7, true, false), true},
		{batch(6, 1, 3, true, false), false}, // another producer's, in between
		{batch(7, 1, 1, true, true), true},   // producer 1's abort marker
		{batch(8, 1, 1, true, false), false}, // producer 1's next transaction
		{batch(9, 1, 7, true, false), true},
	} {
		if got := f.skip(c.h); got != c.skip {
			t.Errorf("batch %d at %d: skip %v, want %v", i, c.h.BaseOffset, got, c.skip)
		}
	}
}
