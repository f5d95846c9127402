package partition

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

// checkRollSnaps checks that every closed segment but those below from has the producer
// snapshot as of its end (producer 42, one sequence per offset from 0 at offset 0), and
// that no other snapshot file is left.
func checkRollSnaps(t *testing.T, p *Partition) {
	t.Helper()
	var want []int64
	for _, s := range p.SealedSegments() {
		want = append(want, s.NextOffset)
		raw := p.ProducerSnapshotAt(s.NextOffset)
		if raw == nil {
			t.Fatalf("segment %d-%d has no producer snapshot", s.BaseOffset, s.NextOffset-1)
		}
		snap, err := DecodeProducerSnapshot(raw)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Offset != s.NextOffset || len(snap.Producers) != 1 || snap.Producers[0].ProducerID != 42 ||
			int64(snap.Producers[0].LastSequence) != s.NextOffset-1 {
			t.Fatalf("segment %d-%d: snapshot %+v, want producer 42 at sequence %d", s.BaseOffset, s.NextOffset-1, snap, s.NextOffset-1)
		}
	}
	if got := snapshotFiles(t, p.dir); !slices.Equal(got, want) {
		t.Fatalf("snapshot files at %v, want one per closed segment's end %v (log %d-%d)", got, want, p.LogStartOffset(), p.LogEndOffset())
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
	for _, name := range []string{rollSnapPath(dir, end+10), rollSnapPath(dir, 0), rollSnapPath(dir, end) + ".tmp"} {
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

// TestRestartAtWithProducers: a follower restarting at the tiered offset takes the
// producer state of the remote segment before it, keeps it across a restart, and, once
// leader, recognizes the retry of a batch that is only in the remote log.
func TestRestartAtWithProducers(t *testing.T) {
	// The leader's side: the snapshot uploaded with its first segment.
	src := openTiered(t, t.TempDir())
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
	if err := src.close(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	p := openTiered(t, dir)
	follow := State{Role: RoleFollower, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if _, err := p.ApplyState(follow, time.Now()); err != nil {
		t.Fatal(err)
	}
	// One as of another offset is refused and changes nothing.
	if err := p.RestartAtWithProducers(first.NextOffset+1, snap); err == nil {
		t.Fatal("a snapshot as of another offset was taken")
	}
	if err := p.RestartAtWithProducers(first.NextOffset, []byte("garbage")); err == nil {
		t.Fatal("an undecodable snapshot was taken")
	}
	if p.LogEndOffset() != 0 {
		t.Fatalf("a refused snapshot moved the log to %d", p.LogEndOffset())
	}
	if err := p.RestartAtWithProducers(first.NextOffset, snap); err != nil {
		t.Fatal(err)
	}
	if got := p.Producers(); len(got) != 1 || got[0].ProducerID != 42 || int64(got[0].LastSequence) != first.NextOffset-1 {
		t.Fatalf("producers after the restart at %d: %+v", first.NextOffset, got)
	}
	// Across an unclean restart too: the state was saved when it was taken.
	if err := p.log.CloseUnclean(); err != nil {
		t.Fatal(err)
	}
	p = openTiered(t, dir)
	defer p.close()
	leadAlone(t, p, 2)
	// The retry of the last batch below the restart offset is a duplicate, at its offsets.
	last, h := idempotentBatch(t, int32(first.NextOffset)-4, 4)
	res, err := p.AppendAsLeader(last, h, 1)
	if err != nil || !res.Duplicate || res.LastOffset != first.NextOffset-1 {
		t.Fatalf("retry of a batch only in the remote log: %+v, %v", res, err)
	}
}
