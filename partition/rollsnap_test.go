package partition

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

func tieredTestSettings() Settings {
	s := testSettings()
	s.Tiered = true
	s.MinInsyncReplicas = 1
	s.Log.SegmentBytes = 4096
	s.Log.Logger = quiet()
	return s
}

func openTiered(t *testing.T, dir string) *Partition {
	t.Helper()
	p, err := open("t", testID, 0, 1, dir, -1, tieredTestSettings(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func leadAlone(t *testing.T, p *Partition, epoch int32) {
	t.Helper()
	if _, err := p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch,
		Replicas: []int32{1}, ISR: []int32{1}}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// snapshotFiles lists the base offsets of the roll snapshot files in dir.
func snapshotFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		if base, ok := parseRollSnapName(e.Name()); ok {
			out = append(out, base)
		} else if strings.Contains(e.Name(), rollSnapSuffix) {
			t.Errorf("stray file %s", e.Name())
		}
	}
	return out
}

// checkRollSnaps checks that every local segment has the producer snapshot as of its
// base, and the last closed one as of its end (producer 42, one sequence per offset from
// 0 at offset 0), and that no other snapshot file is left.
func checkRollSnaps(t *testing.T, p *Partition) {
	t.Helper()
	segs := p.SealedSegments()
	want := []int64{segs[0].BaseOffset}
	for _, s := range segs {
		want = append(want, s.NextOffset)
	}
	for _, off := range want {
		raw := p.ProducerSnapshotAt(off)
		if raw == nil {
			t.Fatalf("no producer snapshot at %d", off)
		}
		snap, err := DecodeProducerSnapshot(raw)
		if err != nil {
			t.Fatal(err)
		}
		if off == 0 && snap.Offset == 0 && len(snap.Producers) == 0 {
			continue
		}
		if snap.Offset != off || len(snap.Producers) != 1 || snap.Producers[0].ProducerID != 42 ||
			int64(snap.Producers[0].LastSequence) != off-1 {
			t.Fatalf("snapshot at %d: %+v, want producer 42 at sequence %d", off, snap, off-1)
		}
	}
	if got := snapshotFiles(t, p.dir); !slices.Equal(got, want) {
		t.Fatalf("snapshot files at %v, want one per local segment's base and the last closed one's end %v (log %d-%d)", got, want, p.LogStartOffset(), p.LogEndOffset())
	}
}

// TestRollSnapshotsSurviveReopen: a Tiered partition's producer snapshots at its segment
// rolls are files beside the segments, so that a segment rolled before a restart is
// uploaded with its snapshot too; they go with their segments (DeleteRecords,
// truncation, a restart at the leader's start), a crash's leftovers are swept at open,
// one a crash lost is written again by the replay, and a damaged one is no snapshot.
func TestRollSnapshotsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	p := openTiered(t, dir)
	leadAlone(t, p, 1)
	seq := int32(0)
	for range 24 {
		b, h := idempotentBatch(t, seq, 4)
		seq += 4
		if _, err := p.AppendAsLeader(b, h, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.SealedSegments()); n < 4 {
		t.Fatalf("fixture: %d closed segments", n)
	}
	checkRollSnaps(t, p)
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	// A clean reopen finds them.
	p = openTiered(t, dir)
	checkRollSnaps(t, p)
	segs, end := p.SealedSegments(), p.LogEndOffset()
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	// An unclean one (no clean-shutdown marker, no producer snapshot: the producers are
	// replayed from the log) writes again those a crash lost, as of their offsets, and
	// sweeps those past the log end (a torn tail cut) and half-written ones.
	lost := segs[1].NextOffset
	for _, name := range []string{"clean-shutdown", producerSnapshotFile, filepath.Base(rollSnapPath(dir, lost))} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{rollSnapPath(dir, end+10), rollSnapPath(dir, 1), rollSnapPath(dir, end) + ".tmp"} {
		if err := os.WriteFile(name, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p = openTiered(t, dir)
	checkRollSnaps(t, p)

	// DeleteRecords takes the snapshots of the segments it deletes.
	leadAlone(t, p, 2)
	segs = p.SealedSegments()
	if _, err := p.DeleteRecordsBefore(segs[1].NextOffset); err != nil {
		t.Fatal(err)
	}
	if p.LogStartOffset() != segs[1].NextOffset {
		t.Fatalf("log start %d, want %d", p.LogStartOffset(), segs[1].NextOffset)
	}
	checkRollSnaps(t, p)

	// A truncation takes those past the new end; the one at it stays (the state as of
	// an offset depends only on what is below it), and is written anew as the log rolls
	// there again.
	if _, err := p.ApplyState(State{Role: RoleFollower, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 3,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	segs = p.SealedSegments()
	cut := segs[len(segs)-2].NextOffset
	if err := p.TruncateTo(cut + 1); err != nil {
		t.Fatal(err)
	}
	if got := snapshotFiles(t, dir); got[len(got)-1] != cut {
		t.Fatalf("after truncating to %d: snapshot files at %v", p.LogEndOffset(), got)
	}
	checkRollSnaps(t, p)

	// A damaged snapshot is none: its segment is uploaded without one.
	if err := os.WriteFile(rollSnapPath(dir, cut), []byte("{\"offset\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	if raw := p.ProducerSnapshotAt(cut); raw != nil {
		t.Fatalf("damaged snapshot returned: %q", raw)
	}
	if raw := p.ProducerSnapshotAt(cut + 4); raw != nil {
		t.Fatalf("snapshot at an offset without one: %q", raw)
	}

	// A restart at the leader's log start takes them all.
	if err := p.RestartAt(end + 100); err != nil {
		t.Fatal(err)
	}
	if got := snapshotFiles(t, dir); len(got) != 0 {
		t.Fatalf("after a restart at the leader's start: snapshot files at %v", got)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
}

// remoteSnapshot is the producer snapshot a leader uploads with its first segment, and
// that segment's end: producer 42, one sequence per offset from 0 at offset 0.
func remoteSnapshot(t *testing.T) ([]byte, int64) {
	t.Helper()
	src := openTiered(t, t.TempDir())
	defer src.close()
	leadAlone(t, src, 1)
	seq := int32(0)
	for range 8 {
		b, h := idempotentBatch(t, seq, 4)
		seq += 4
		if _, err := src.AppendAsLeader(b, h, 1); err != nil {
			t.Fatal(err)
		}
	}
	first := src.SealedSegments()[0]
	snap := src.ProducerSnapshotAt(first.NextOffset)
	if snap == nil {
		t.Fatal("no snapshot at the first roll")
	}
	return snap, first.NextOffset
}

func followAlone(t *testing.T, p *Partition) {
	t.Helper()
	follow := State{Role: RoleFollower, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if _, err := p.ApplyState(follow, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestRestartAtWithProducers: a follower restarting at the tiered offset takes the
// producer state of the remote segment before it, keeps it across a restart, and, once
// leader, recognizes the retry of a batch that is only in the remote log.
func TestRestartAtWithProducers(t *testing.T) {
	snap, next := remoteSnapshot(t)
	// Across an unclean restart: from the state saved when it was taken, or, without
	// it, from the roll snapshot at the log start that the first batch after it wrote.
	for _, tc := range []struct {
		name      string
		appendOne bool
	}{{"saved", false}, {"roll snapshot", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := openTiered(t, dir)
			followAlone(t, p)
			// One as of another offset is refused and changes nothing.
			if err := p.RestartAtWithProducers(next+1, snap); err == nil {
				t.Fatal("a snapshot as of another offset was taken")
			}
			if err := p.RestartAtWithProducers(next, []byte("garbage")); err == nil {
				t.Fatal("an undecodable snapshot was taken")
			}
			if p.LogEndOffset() != 0 {
				t.Fatalf("a refused snapshot moved the log to %d", p.LogEndOffset())
			}
			if err := p.RestartAtWithProducers(next, snap); err != nil {
				t.Fatal(err)
			}
			if got := p.Producers(); len(got) != 1 || got[0].ProducerID != 42 || int64(got[0].LastSequence) != next-1 {
				t.Fatalf("producers after the restart at %d: %+v", next, got)
			}
			if tc.appendOne {
				if _, err := p.AppendAsFollower(batch(t, next, 2, 1), 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.log.CloseUnclean(); err != nil {
				t.Fatal(err)
			}
			if tc.appendOne {
				if err := os.Remove(filepath.Join(dir, producerSnapshotFile)); err != nil {
					t.Fatal(err)
				}
			}
			p = openTiered(t, dir)
			defer p.close()
			leadAlone(t, p, 2)
			// The retry of the last batch below the restart offset is a duplicate, at its
			// offsets.
			last, h := idempotentBatch(t, int32(next)-4, 4)
			res, err := p.AppendAsLeader(last, h, 1)
			if err != nil || !res.Duplicate || res.LastOffset != next-1 {
				t.Fatalf("retry of a batch only in the remote log: %+v, %v", res, err)
			}
		})
	}
}

// TestTruncationReplayKeepsRemoteProducers: a truncation into a transaction replays the
// producer state of a Tiered partition from the roll snapshot at its log start, so that
// the producers whose batches are all remote are still known.
func TestTruncationReplayKeepsRemoteProducers(t *testing.T) {
	snap, next := remoteSnapshot(t)
	p := openTiered(t, t.TempDir())
	defer p.close()
	followAlone(t, p)
	if err := p.RestartAtWithProducers(next, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsFollower(batch(t, next, 2, 1), 1); err != nil {
		t.Fatal(err)
	}
	txn, err := records.Build(shalelog.Header{BaseOffset: next + 2, PartitionLeaderEpoch: 1, Magic: 2, ProducerID: 77, BaseSequence: 0,
		Attributes: shalelog.AttrTransactional}, shalelog.CodecNone, []records.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsFollower(txn, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateTo(next + 2); err != nil {
		t.Fatal(err)
	}
	got := p.Producers()
	if len(got) != 1 || got[0].ProducerID != 42 || int64(got[0].LastSequence) != next-1 {
		t.Fatalf("producers after a truncation into a transaction: %+v, want producer 42 at sequence %d", got, next-1)
	}
}
