package partition

import (
	"errors"
	"testing"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

func mirrorLeader(epoch, pepoch int32) State {
	s := leaderState(epoch, pepoch, 1, 2, 3)
	s.Mirror = true
	return s
}

// TestMirrorLeaderKeepsTheSourceEpochs: a mirror leader records no epoch of its own,
// appends the source's batches with their epochs up to the floor it is given, refuses
// produce, truncates on divergence forgetting its followers, and, once promoted, starts
// its own epoch above the source's.
func TestMirrorLeaderKeepsTheSourceEpochs(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(mirrorLeader(2, 1), now); err != nil {
		t.Fatal(err)
	}
	if e := p.LatestEpoch(); e != -1 {
		t.Fatalf("a mirror leader recorded epoch %d of its own", e)
	}
	b := batch(t, 0, 3, 0)
	h, _ := shalelog.ParseHeader(b)
	if _, err := p.AppendAsLeader(b, h, -1); !errors.Is(err, ErrMirror) {
		t.Fatalf("produce to a mirror leader: %v", err)
	}
	src := append(append(batch(t, 0, 3, 5), batch(t, 3, 2, 5)...), batch(t, 5, 4, 9)...)
	n, err := p.AppendMirrored(src, 2, 5)
	if !errors.Is(err, ErrEpochAboveFloor) || p.LogEndOffset() != 5 || n == 0 {
		t.Fatalf("append past the floor: %d bytes, %v, log end %d", n, err, p.LogEndOffset())
	}
	if _, err := p.AppendMirrored(src, 1, 9); !errors.Is(err, ErrNotMirroring) {
		t.Fatalf("append from a copier of an older leadership: %v", err)
	}
	if _, err := p.AppendMirrored(src, 2, 9); err != nil || p.LogEndOffset() != 9 {
		t.Fatalf("append with the floor raised: %v, log end %d", err, p.LogEndOffset())
	}
	if e, end := p.EndOffsetForEpoch(5); e != 5 || end != 5 {
		t.Fatalf("epoch 5 ends at %d (%d), want 5", end, e)
	}
	// The ISR has it all: the high watermark moves as for any leader.
	p.FollowerFetched(2, 9, -1, -1, now)
	p.FollowerFetched(3, 9, -1, -1, now)
	if hw := p.HighWatermark(); hw != 9 {
		t.Fatalf("high watermark %d, want 9", hw)
	}
	// The source diverged at 5: the epoch-9 batch goes, and so do the followers'
	// positions, so the high watermark waits for their next fetch.
	if err := p.TruncateMirror(5, 2, now); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 5 || p.HighWatermark() != 5 || p.LatestEpoch() != 5 {
		t.Fatalf("after truncation: end %d, hw %d, epoch %d", p.LogEndOffset(), p.HighWatermark(), p.LatestEpoch())
	}
	if _, err := p.AppendMirrored(batch(t, 5, 2, 11), 2, 11); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d moved on follower positions from before the truncation", hw)
	}
	// Promotion: a new leader epoch above the floor, and no longer a mirror.
	if _, err := p.ApplyState(leaderState(12, 2, 1, 2, 3), now); err != nil {
		t.Fatal(err)
	}
	if e := p.LatestEpoch(); e != 12 {
		t.Fatalf("promoted leader's epoch %d, want 12", e)
	}
	res := appendLeader(t, p, 1, 1)
	if res.BaseOffset != 7 || res.LeaderEpoch != 12 {
		t.Fatalf("produce after promotion: %+v", res)
	}
	if _, err := p.AppendMirrored(batch(t, 8, 1, 11), 12, 11); !errors.Is(err, ErrNotMirroring) {
		t.Fatalf("mirror append after promotion: %v", err)
	}
}

func TestMirrorRestartsAtTheSourceLogStart(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	if _, err := p.ApplyState(mirrorLeader(0, 0), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.RestartMirrorAt(100, 0); err != nil {
		t.Fatal(err)
	}
	if p.LogStartOffset() != 100 || p.LogEndOffset() != 100 || p.HighWatermark() != 100 {
		t.Fatalf("start %d end %d hw %d", p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark())
	}
	if _, err := p.AppendMirrored(batch(t, 100, 2, 3), 0, 3); err != nil || p.LogEndOffset() != 102 {
		t.Fatalf("append at the new start: %v, end %d", err, p.LogEndOffset())
	}
}

// TestPromotedMirrorAbortsTheSourcesOpenTransactions: a transaction the source left
// open (its marker never copied) holds the last stable offset until the promoted
// leader aborts it; one begun after the promotion is left alone.
func TestPromotedMirrorAbortsTheSourcesOpenTransactions(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if _, err := p.ApplyState(mirrorLeader(0, 0), now); err != nil {
		t.Fatal(err)
	}
	recs := []records.Record{{OffsetDelta: 0, Value: []byte("t")}, {OffsetDelta: 1, Value: []byte("u")}}
	b, err := records.Build(shalelog.Header{Magic: 2, BaseOffset: 0, PartitionLeaderEpoch: 4, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 0,
		Attributes: shalelog.AttrTransactional}, shalelog.CodecNone, recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendMirrored(b, 0, 4); err != nil {
		t.Fatal(err)
	}
	p.FollowerFetched(2, 2, -1, -1, now)
	p.FollowerFetched(3, 2, -1, -1, now)
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("last stable offset %d with the source's transaction open, want 0", lso)
	}
	// Still a mirror: nothing is aborted.
	if n, err := p.AbortSourceTransactions(4); n != 0 || err != nil {
		t.Fatalf("abort on an active mirror: %d %v", n, err)
	}
	if _, err := p.ApplyState(leaderState(5, 1, 1, 2, 3), now); err != nil {
		t.Fatal(err)
	}
	if n, err := p.AbortSourceTransactions(4); n != 1 || err != nil {
		t.Fatalf("abort after promotion: %d %v", n, err)
	}
	p.FollowerFetched(2, 3, -1, -1, now)
	p.FollowerFetched(3, 3, -1, -1, now)
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("last stable offset %d after the abort, want 3", lso)
	}
	// A transaction of the promoted topic's own is not the source's.
	appendTxn(t, p, 88, 0, 0, 1)
	if n, err := p.AbortSourceTransactions(4); n != 0 || err != nil {
		t.Fatalf("abort of a destination transaction: %d %v", n, err)
	}
}
