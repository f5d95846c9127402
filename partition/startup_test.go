package partition

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// idempotentBatch builds a batch of n records of producer 42 starting at sequence seq.
func idempotentBatch(t *testing.T, seq int32, n int) ([]byte, shalelog.Header) {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{OffsetDelta: int32(i), Value: make([]byte, 200)}
	}
	b, err := records.Build(shalelog.Header{Magic: 2, ProducerID: 42, ProducerEpoch: 0, BaseSequence: seq}, shalelog.CodecNone, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := shalelog.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// fillReplica writes batches in leader epochs 1 to 3 across several segments through a
// Manager and closes it; it returns the last batch (for a retry) and the log end.
func fillReplica(t *testing.T, dir string) (last []byte, end int64) {
	t.Helper()
	m, err := NewManager(ManagerConfig{Dir: dir, NodeID: 1, Logger: quiet(), MaxMappedSegments: 100})
	if err != nil {
		t.Fatal(err)
	}
	s := testSettings()
	s.Log.SegmentBytes = 4096
	s.Log.Logger = quiet()
	p, err := m.Open("t", testID, 0, s)
	if err != nil {
		t.Fatal(err)
	}
	seq := int32(0)
	for epoch := int32(1); epoch <= 3; epoch++ {
		if _, err := p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch,
			Replicas: []int32{1}, ISR: []int32{1}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			b, h := idempotentBatch(t, seq, 4)
			seq += 4
			if _, err := p.AppendAsLeader(b, h, 1); err != nil {
				t.Fatal(err)
			}
			last = b
		}
	}
	end = p.LogEndOffset()
	if n := p.log.NumSegments(); n < 5 {
		t.Fatalf("fixture: %d segments", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return last, end
}

// reopenAndCheck reopens the replica and checks what was rebuilt: the epochs, and the
// producer state (a retry of the last batch is recognised as a duplicate).
func reopenReplica(t *testing.T, dir string, last []byte, end int64) *Manager {
	t.Helper()
	m, err := NewManager(ManagerConfig{Dir: dir, NodeID: 1, Logger: quiet(), MaxMappedSegments: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s := testSettings()
	s.Log.SegmentBytes = 4096
	s.Log.Logger = quiet()
	res := m.OpenAll([]OpenRequest{{Topic: "t", TopicID: testID, Index: 0, Settings: s}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	p := res[0].Partition
	if p.LogEndOffset() != end {
		t.Fatalf("LEO %d, want %d", p.LogEndOffset(), end)
	}
	if e, off := p.EndOffsetForEpoch(1); e != 1 || off != 40 {
		t.Fatalf("epoch 1 ends at %d (%d), want 40", off, e)
	}
	if e, off := p.EndOffsetForEpoch(2); e != 2 || off != 80 {
		t.Fatalf("epoch 2 ends at %d (%d), want 80", off, e)
	}
	if p.LatestEpoch() != 3 {
		t.Fatalf("latest epoch %d", p.LatestEpoch())
	}
	t.Cleanup(func() {
		if _, err := p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 4,
			Replicas: []int32{1}, ISR: []int32{1}}, time.Now()); err != nil {
			t.Error(err)
		}
		h, _ := shalelog.ParseHeader(last)
		r, err := p.AppendAsLeader(last, h, 1)
		if err != nil || !r.Duplicate {
			t.Errorf("retry of the last batch after reopen: %+v %v", r, err)
		}
	})
	return m
}

// TestCleanReopenReadsNoSegment: after a clean shutdown the epochs and producers come
// from their checkpoint and snapshot, so opening maps no segment at all.
func TestCleanReopenReadsNoSegment(t *testing.T) {
	dir := t.TempDir()
	last, end := fillReplica(t, dir)
	m := reopenReplica(t, dir, last, end)
	if n := m.MappedSegments(); n != 0 {
		t.Fatalf("a clean reopen mapped %d segments", n)
	}
}

// TestUncleanReopenRebuildsFromTheLog: without the clean-shutdown marker, the producer
// snapshot or the epoch checkpoint, what is missing is rebuilt from the batches.
func TestUncleanReopenRebuildsFromTheLog(t *testing.T) {
	for _, lose := range []string{"clean-shutdown", producerSnapshotFile, epochCheckpointFile} {
		t.Run(lose, func(t *testing.T) {
			dir := t.TempDir()
			last, end := fillReplica(t, dir)
			rdir := filepath.Join(dir, "t-0")
			if err := os.Remove(filepath.Join(rdir, lose)); err != nil {
				t.Fatal(err)
			}
			if lose != "clean-shutdown" {
				os.Remove(filepath.Join(rdir, "clean-shutdown"))
			}
			reopenReplica(t, dir, last, end)
		})
	}
}

// TestOpenAllAndConcurrentOpens: OpenAll opens every replica once; concurrent Opens of
// one replica return the same one; Get of an open replica does not wait for others.
func TestOpenAllAndConcurrentOpens(t *testing.T) {
	m, err := NewManager(ManagerConfig{Dir: t.TempDir(), NodeID: 1, Logger: quiet(), RecoveryThreads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var reqs []OpenRequest
	for i := int32(0); i < 10; i++ {
		reqs = append(reqs, OpenRequest{Topic: "t", TopicID: testID, Index: i % 5, Settings: testSettings()})
	}
	res := m.OpenAll(reqs)
	for i, r := range res {
		if r.Err != nil || r.Partition == nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
		if r.Partition != res[i%5].Partition || m.Get("t", int32(i%5)) != r.Partition {
			t.Fatalf("request %d opened a second replica of t-%d", i, i%5)
		}
	}
	var wg sync.WaitGroup
	got := make([]*Partition, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = m.Open("u", testID, 0, testSettings())
		}()
	}
	wg.Wait()
	for _, p := range got {
		if p == nil || p != got[0] {
			t.Fatal("concurrent Opens of one replica returned different replicas")
		}
	}
	if err := m.Remove("u", 0); err != nil {
		t.Fatal(err)
	}
	if len(m.All()) != 5 {
		t.Fatalf("%d replicas open, want 5", len(m.All()))
	}
}
