package partition

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

func keyedBatch(t *testing.T, key string, value string) []byte {
	t.Helper()
	b, err := records.Build(shalelog.Header{Magic: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, shalelog.CodecNone,
		[]records.Record{{Key: []byte(key), Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readTable reads the partition's log from its start: key -> (value, offset) of the
// last record of each key, and how many records there are below and from offset hw.
func readTable(t *testing.T, p *Partition, hw int64) (table map[string]int64, below, above int) {
	t.Helper()
	table = map[string]int64{}
	v, err := p.log.Read(p.log.StartOffset(), math.MaxInt32, p.log.EndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	for _, c := range v.Chunks {
		bs, err := shalelog.SplitBatches(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			h, recs, err := records.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				off := h.BaseOffset + int64(r.OffsetDelta)
				table[string(r.Key)] = off
				if off < hw {
					below++
				} else {
					above++
				}
			}
		}
	}
	return table, below, above
}

// The manager's cleaner (here its CleanNow pass) compacts a compacted replica up to its high watermark and no
// further, reports it in CleanerStatus, and its goroutines end with Close.
func TestManagerCleansBelowHighWatermark(t *testing.T) {
	before := runtime.NumGoroutine()
	m, err := NewManager(ManagerConfig{Dir: t.TempDir(), NodeID: 1, CleanerBackoff: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	set := testSettings()
	set.MinInsyncReplicas = 1
	set.Log.SegmentBytes = 1024
	set.Compaction = Compaction{Compact: true, MinCleanableRatio: 0.01, MaxLagMs: math.MaxInt64, DeleteRetentionMs: 86400000}
	p, err := m.Open("t", testID, 0, set)
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(leaderState(1, 1, 1), time.Now())
	latest := map[string]int64{}
	appendKey := func(i int) {
		b := keyedBatch(t, fmt.Sprint(i%5), fmt.Sprint(i))
		h, _ := shalelog.ParseHeader(b)
		res, err := p.AppendAsLeader(b, h, 1)
		if err != nil {
			t.Fatal(err)
		}
		latest[fmt.Sprint(i%5)] = res.BaseOffset
	}
	for i := range 200 {
		appendKey(i)
	}
	// A follower joins the ISR and fetches nothing: the high watermark stays, and what
	// is appended from here is above it.
	p.ApplyState(leaderState(1, 2, 1, 2), time.Now())
	hw := p.HighWatermark()
	for i := 200; i < 400; i++ {
		appendKey(i)
	}
	if p.HighWatermark() != hw {
		t.Fatalf("high watermark moved from %d to %d", hw, p.HighWatermark())
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	// The threads wait an hour between looks; CleanNow is the same pass, here and now.
	m.CleanNow()
	st, ok := p.CleanerStatus()
	if !ok || st.LastRun.IsZero() || st.LastStats.RecordsRemoved == 0 || st.DirtyBytes != 0 {
		t.Fatalf("cleaner status after a pass: %+v (compacted %v)", st, ok)
	}
	table, below, above := readTable(t, p, hw)
	if above != 200 {
		t.Fatalf("%d records at or above the high watermark %d, want all 200 untouched", above, hw)
	}
	if below >= int(hw) {
		t.Fatalf("%d records below the high watermark %d: nothing was cleaned", below, hw)
	}
	for k, off := range latest {
		if table[k] != off {
			t.Fatalf("key %s: latest at %d, read %d", k, off, table[k])
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the cleaner goroutines end", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// Compaction keeps an emptied idempotent batch only when it is its producer's last (or
// ends a segment): the producer's sequence survives, and the other emptied batches leave
// no header behind.
func TestCleanKeepsOnlyLastProducerBatchHeader(t *testing.T) {
	m, err := NewManager(ManagerConfig{Dir: t.TempDir(), NodeID: 1, CleanerBackoff: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	set := testSettings()
	set.MinInsyncReplicas = 1
	set.Log.SegmentBytes = 512
	set.Compaction = Compaction{Compact: true, MinCleanableRatio: 0.01, MaxLagMs: math.MaxInt64, DeleteRetentionMs: 86400000}
	p, err := m.Open("t", testID, 0, set)
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(leaderState(1, 1, 1), time.Now())
	var lastIdempotent int64
	for i := range 60 {
		h := shalelog.Header{Magic: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		if i < 20 {
			h.ProducerID, h.ProducerEpoch, h.BaseSequence = 7, 0, int32(i)
		}
		b, err := records.Build(h, shalelog.CodecNone, []records.Record{{Key: []byte("same"), Value: []byte(fmt.Sprint(i))}})
		if err != nil {
			t.Fatal(err)
		}
		hh, _ := shalelog.ParseHeader(b)
		res, err := p.AppendAsLeader(b, hh, 1)
		if err != nil {
			t.Fatal(err)
		}
		if i < 20 {
			lastIdempotent = res.BaseOffset
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	m.CleanNow()
	var producerHeaders []int64
	v, err := p.log.Read(p.log.StartOffset(), math.MaxInt32, p.log.EndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	for _, c := range v.Chunks {
		bs, _ := shalelog.SplitBatches(c)
		for _, b := range bs {
			if h, _ := shalelog.ParseHeader(b); h.ProducerID == 7 {
				producerHeaders = append(producerHeaders, h.BaseOffset)
			}
		}
	}
	// Besides the producer's last batch, only a segment's final batch may stay (it keeps
	// the offset range a merged segment's recovery relies on): a few, not all 20.
	if len(producerHeaders) == 0 || producerHeaders[len(producerHeaders)-1] != lastIdempotent || len(producerHeaders) > 5 {
		t.Fatalf("batches of producer 7 left at %v, want its last (%d) and at most a few segment ends", producerHeaders, lastIdempotent)
	}
}

// max.compaction.lag.ms makes a log due below min.cleanable.dirty.ratio once its oldest
// dirty segment is older than the lag, and not before.
func TestMaxCompactionLagMakesDue(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	set := testSettings()
	set.MinInsyncReplicas = 1
	set.Log.SegmentBytes = 300
	set.Compaction = Compaction{Compact: true, MinCleanableRatio: 1.1, MaxLagMs: 60_000, DeleteRetentionMs: 86400000}
	p.ApplySettings(set)
	p.ApplyState(leaderState(1, 1, 1), time.Now())
	old := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 20 {
		b, err := records.Build(shalelog.Header{Magic: 2, FirstTimestamp: old, MaxTimestamp: old, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, shalelog.CodecNone,
			[]records.Record{{Key: []byte("k"), Value: []byte(fmt.Sprint(i))}})
		if err != nil {
			t.Fatal(err)
		}
		h, _ := shalelog.ParseHeader(b)
		if _, err := p.AppendAsLeader(b, h, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, due := p.cleanable(time.Now()); !due {
		t.Fatal("an hour-old dirty log with max.compaction.lag.ms=60000 is not due")
	}
	set.Compaction.MaxLagMs = 2 * 3600_000
	p.ApplySettings(set)
	if _, due := p.cleanable(time.Now()); due {
		t.Fatal("a log within max.compaction.lag.ms and below the ratio is due")
	}
}

// log.cleaner.enable=false: no cleaner runs, and the manager still closes.
func TestCleanerDisabled(t *testing.T) {
	m, err := NewManager(ManagerConfig{Dir: t.TempDir(), NodeID: 1, CleanerDisabled: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	set := testSettings()
	set.MinInsyncReplicas = 1
	set.Log.SegmentBytes = 300
	set.Compaction = Compaction{Compact: true, MinCleanableRatio: 0.01, MaxLagMs: math.MaxInt64}
	p, err := m.Open("t", testID, 0, set)
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(leaderState(1, 1, 1), time.Now())
	for i := range 20 {
		b := keyedBatch(t, "k", fmt.Sprint(i))
		h, _ := shalelog.ParseHeader(b)
		if _, err := p.AppendAsLeader(b, h, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	m.CleanNow()
	if st, _ := p.CleanerStatus(); !st.LastRun.IsZero() {
		t.Fatal("a disabled cleaner ran")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
