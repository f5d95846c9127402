package partition

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// batch builds a valid RecordBatch v2 of n records at base in leader epoch epoch.
func batch(t testing.TB, base int64, n int, epoch int32) []byte {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b, err := records.Build(shalelog.Header{BaseOffset: base, PartitionLeaderEpoch: epoch, Magic: 2,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, shalelog.CodecNone, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testSettings() Settings {
	s := Settings{Log: shalelog.DefaultConfig(), MinInsyncReplicas: 2, Codec: -1}
	s.Log.SegmentBytes = 1 << 20
	return s
}

var testID = [16]byte{1, 2, 3}

func openTest(t *testing.T, dir string, node int32, hw int64) *Partition {
	t.Helper()
	p, err := open("t", testID, 0, node, dir, hw, testSettings(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

func leaderState(epoch, pepoch int32, isr ...int32) State {
	return State{Role: RoleLeader, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: pepoch, Replicas: []int32{1, 2, 3}, ISR: isr}
}

func appendLeader(t *testing.T, p *Partition, n int, acks int16) AppendResult {
	t.Helper()
	b := batch(t, 0, n, 0)
	h, err := shalelog.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.AppendAsLeader(b, h, acks)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLeaderHighWatermarkFollowsISR(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	if tr, err := p.ApplyState(leaderState(1, 1, 1, 2, 3), now); err != nil || tr != NewEpoch {
		t.Fatalf("become leader: %v %v", tr, err)
	}
	res := appendLeader(t, p, 3, -1)
	if res.LastOffset != 2 || res.LeaderEpoch != 1 {
		t.Fatalf("append: %+v", res)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before any follower fetched", hw)
	}
	if done, err := p.ReplicationDone(2, 1); done || err != nil {
		t.Fatalf("done before replication: %v %v", done, err)
	}
	p.FollowerFetched(2, 3, -1, -1, now)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d with follower 3 unknown", hw)
	}
	p.FollowerFetched(3, 2, -1, -1, now)
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("HW %d, want 2 (min over the ISR)", hw)
	}
	p.FollowerFetched(3, 3, -1, -1, now)
	if done, err := p.ReplicationDone(2, 1); !done || err != nil {
		t.Fatalf("not done after every ISR member fetched: %v %v", done, err)
	}
	// A follower that refetches an older offset (a retry) never moves the HW back.
	p.FollowerFetched(3, 1, -1, -1, now)
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("HW moved back to %d", hw)
	}
	// A new leader epoch: the batch appended in epoch 1 no longer completes there.
	if _, err := p.ApplyState(leaderState(2, 2, 1, 2, 3), now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReplicationDone(2, 1); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("done across an epoch change: %v", err)
	}
	// Older states are refused.
	if tr, _ := p.ApplyState(leaderState(1, 5, 1), now); tr != Stale {
		t.Fatalf("older leader epoch applied: %v", tr)
	}
	if tr, _ := p.ApplyState(leaderState(2, 1, 1), now); tr != Stale {
		t.Fatalf("older partition epoch applied: %v", tr)
	}
}

func TestMinInsyncAndAfterAppend(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	now := time.Now()
	p.ApplyState(leaderState(1, 1, 1), now)
	b := batch(t, 0, 1, 0)
	h, _ := shalelog.ParseHeader(b)
	if _, err := p.AppendAsLeader(b, h, -1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR 1 < min.insync 2: %v", err)
	}
	res := appendLeader(t, p, 1, 1) // acks=1 is allowed
	if p.HighWatermark() != 1 {
		t.Fatalf("lone ISR member: HW %d, want 1", p.HighWatermark())
	}
	p.ApplyState(leaderState(1, 2, 1, 2), now)
	res = appendLeader(t, p, 1, -1)
	p.FollowerFetched(2, 2, -1, -1, now)
	// The ISR shrinks back to the leader while the batch waits: committed, but under min.insync.
	p.ApplyState(leaderState(1, 3, 1), now)
	if done, err := p.ReplicationDone(res.LastOffset, 1); !done || !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
		t.Fatalf("want NOT_ENOUGH_REPLICAS_AFTER_APPEND, got %v %v", done, err)
	}
}

func TestISRShrinkAndExpand(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	start := time.Now()
	p.ApplyState(leaderState(1, 1, 1, 2, 3), start)
	appendLeader(t, p, 2, 1)
	p.FollowerFetched(2, 2, -1, -1, start.Add(time.Second))
	if _, ok := p.ProposeShrink(start.Add(5*time.Second), 10*time.Second); ok {
		t.Fatal("shrink before the lag time")
	}
	c, ok := p.ProposeShrink(start.Add(10500*time.Millisecond), 10*time.Second)
	if !ok || !slices.Equal(c.NewISR, []int32{1, 2}) || c.PartitionEpoch != 1 {
		t.Fatalf("shrink: %+v %v", c, ok)
	}
	if _, ok := p.ProposeShrink(start.Add(13*time.Second), 10*time.Second); ok {
		t.Fatal("a second change while one is in flight")
	}
	if fence, ok := p.ISRChangeRefused(c, time.Now()); !ok || !slices.Equal(fence.NewISR, []int32{1, 2, 3}) || fence.PartitionEpoch != 1 {
		t.Fatalf("fence %+v %v, want the committed ISR at the change's epochs", fence, ok)
	}
	if _, ok := p.ProposeShrink(start.Add(13*time.Second), 10*time.Second); ok {
		t.Fatal("a refused change replaced before its fence committed")
	}
	p.ApplyState(leaderState(1, 2, 1, 2, 3), start.Add(13*time.Second)) // the fence
	if _, ok := p.ProposeShrink(start.Add(13*time.Second), 10*time.Second); !ok {
		t.Fatal("no retry after the fence committed")
	}
	p.ApplyState(leaderState(1, 3, 1, 2), start.Add(14*time.Second))
	// Follower 3 catches up to the leader's end: it should be added back.
	_, expand, err := p.FollowerFetched(3, 2, -1, -1, start.Add(15*time.Second))
	if err != nil || !expand {
		t.Fatalf("expand not suggested: %v %v", expand, err)
	}
	c, ok = p.ProposeExpand(3, start.Add(15*time.Second))
	if !ok || !slices.Equal(c.NewISR, []int32{1, 2, 3}) {
		t.Fatalf("expand: %+v %v", c, ok)
	}
	// While the expansion is in flight, the HW waits for follower 3 too (maximal ISR).
	appendLeader(t, p, 1, 1)
	p.FollowerFetched(2, 3, -1, -1, start.Add(16*time.Second))
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("HW %d, want 2 while 3 is being added", hw)
	}
	if _, _, err := p.FollowerFetched(7, 1, -1, -1, start); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch from a non-replica: %v", err)
	}
}

func TestFollowerAppendTruncateAndRestart(t *testing.T) {
	dir := t.TempDir()
	p := openTest(t, dir, 2, -1)
	p.ApplyState(State{Role: RoleFollower, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now())
	data := append(append(batch(t, 0, 2, 1), batch(t, 2, 3, 2)...), batch(t, 5, 1, 3)...)
	// A cut batch at the end is left for the next fetch.
	n, err := p.AppendAsFollower(append(slices.Clone(data), batch(t, 6, 2, 3)[:30]...), 3)
	if err != nil || n != len(data) {
		t.Fatalf("append as follower: %d %v", n, err)
	}
	if p.LogEndOffset() != 6 || p.LatestEpoch() != 3 {
		t.Fatalf("LEO %d epoch %d", p.LogEndOffset(), p.LatestEpoch())
	}
	// Appending the same bytes again (a retried fetch) changes nothing.
	if n, err := p.AppendAsFollower(data, 3); err != nil || n != 0 || p.LogEndOffset() != 6 {
		t.Fatalf("retried fetch appended %d: %v", n, err)
	}
	p.SetFollowerHighWatermark(4)
	p.SetFollowerHighWatermark(3)
	if p.HighWatermark() != 4 {
		t.Fatalf("follower HW %d, want 4 (never backwards)", p.HighWatermark())
	}
	p.SetFollowerHighWatermark(100)
	if p.HighWatermark() != 6 {
		t.Fatalf("follower HW %d, want the log end 6", p.HighWatermark())
	}
	if e, end := p.EndOffsetForEpoch(2); e != 2 || end != 5 {
		t.Fatalf("epoch 2 ends at %d (%d)", end, e)
	}
	if err := p.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 2 || p.HighWatermark() != 2 || p.LatestEpoch() != 1 {
		t.Fatalf("after truncate: LEO %d HW %d epoch %d", p.LogEndOffset(), p.HighWatermark(), p.LatestEpoch())
	}
	// The epoch cache on disk followed the truncation.
	b, err := os.ReadFile(filepath.Join(dir, epochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := decodeEpochs(b); err != nil || len(entries) != 1 || entries[0].Epoch != 1 {
		t.Fatalf("checkpoint after truncate: %v %v", entries, err)
	}
	if err := p.RestartAt(50); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsFollower(batch(t, 50, 1, 4), 2); err == nil {
		t.Fatal("appended data fetched from the leader of an older epoch")
	}
	if p.LogStartOffset() != 50 || p.LogEndOffset() != 50 || p.LatestEpoch() != -1 {
		t.Fatalf("restart: start %d end %d epoch %d", p.LogStartOffset(), p.LogEndOffset(), p.LatestEpoch())
	}
	if _, err := p.AppendAsFollower(batch(t, 50, 1, 4), 3); err != nil || p.LogEndOffset() != 51 {
		t.Fatalf("append after restart: %v, LEO %d", err, p.LogEndOffset())
	}
}

func TestReopenKeepsHighWatermarkAndEpochs(t *testing.T) {
	dir := t.TempDir()
	p, err := open("t", testID, 0, 1, dir, -1, testSettings(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(leaderState(4, 1, 1, 2, 3), time.Now())
	appendLeader(t, p, 5, 1)
	p.ApplyState(leaderState(7, 2, 1, 2, 3), time.Now()) // elected again at LEO 5, no batch yet
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	// The checkpointed HW (here 3) is what a reopened replica shows, never its log end.
	p = openTest(t, dir, 1, 3)
	if p.HighWatermark() != 3 || p.LogEndOffset() != 5 {
		t.Fatalf("reopen: HW %d LEO %d", p.HighWatermark(), p.LogEndOffset())
	}
	if e, end := p.EndOffsetForEpoch(4); e != 4 || end != 5 {
		t.Fatalf("epoch 4 ends at %d (%d); the election at 5 was lost", end, e)
	}
	if p.LatestEpoch() != 7 {
		t.Fatalf("latest epoch %d, want 7 from the checkpoint", p.LatestEpoch())
	}
	if p2, err := open("t", [16]byte{9}, 0, 1, dir, -1, testSettings(), quiet()); !errors.Is(err, ErrTopicIDMismatch) {
		if p2 != nil {
			p2.close()
		}
		t.Fatalf("another topic id opened the directory: %v", err)
	}
}

func TestManagerSetsAsideStaleTopicAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(ManagerConfig{Dir: dir, NodeID: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("t", testID, 0, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: 0, Replicas: []int32{1}, ISR: []int32{1}}, time.Now())
	appendLeader(t, p, 4, 1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	hws, err := decodeHighWatermarks(must(os.ReadFile(filepath.Join(dir, hwCheckpointFile))))
	if err != nil || hws[TopicPartition{"t", 0}] != 4 {
		t.Fatalf("checkpoint: %v %v", hws, err)
	}
	// The topic was deleted and recreated under the same name while this broker was away.
	m, err = NewManager(ManagerConfig{Dir: dir, NodeID: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err = m.Open("t", [16]byte{7}, 0, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 0 || p.HighWatermark() != 0 {
		t.Fatalf("new topic sees the old one's records: LEO %d HW %d", p.LogEndOffset(), p.HighWatermark())
	}
	entries, _ := os.ReadDir(dir)
	aside := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-delete") {
			aside++
		}
	}
	if aside != 1 {
		t.Fatalf("want the old directory set aside, found %d", aside)
	}
	m.removeSetAside(time.Now().Add(time.Hour))
	entries, _ = os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-delete") {
			t.Fatalf("%s not removed after the delay", e.Name())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCheckpointDecodersRejectGarbage(t *testing.T) {
	for _, b := range []string{"", "1\n0\n", "0\n2\n1 0\n", "0\n2\n3 5\n2 9\n", "0\n1\nx y\n"} {
		if _, err := decodeEpochs([]byte(b)); err == nil {
			t.Errorf("decodeEpochs(%q) accepted", b)
		}
	}
	for _, b := range []string{"", "0\n1\n", "0\n1\nt x 3\n", "0\n1\nt 0\n"} {
		if _, err := decodeHighWatermarks([]byte(b)); err == nil {
			t.Errorf("decodeHighWatermarks(%q) accepted", b)
		}
	}
	hws := map[TopicPartition]int64{{"a", 1}: 5, {"b", 0}: 0}
	got, err := decodeHighWatermarks(encodeHighWatermarks(hws))
	if err != nil || len(got) != 2 || got[TopicPartition{"a", 1}] != 5 {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

func FuzzCheckpointDecoders(f *testing.F) {
	f.Add([]byte("0\n2\n0 0\n3 17\n"))
	f.Add([]byte("0\n1\nt 0 42\n"))
	f.Add([]byte(`{"offset":4,"producers":{"1":{"Epoch":0,"Batches":[{"FirstSeq":0,"LastSeq":0}]}},"transactions":{"ongoing":{"1":2},"last_offset":3}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeEpochs(b); err == nil {
			if again, err := decodeEpochs(encodeEpochs(e)); err != nil || !slices.Equal(again, e) {
				t.Fatalf("epochs round trip: %v %v", again, err)
			}
		}
		decodeHighWatermarks(b)
		// Roll snapshots, which a follower also reads from the object store.
		if snap, err := decodeSnapshot(b); err == nil {
			s := snap.state()
			s.describe()
			s.check(hdr(1, 0, 0, 1, 0))
		}
	})
}

// TestTruncateDropsAnEmptyEpoch: a replica that led briefly at its log end, writing
// nothing, has an epoch the new leader never saw; the leader answers with the previous
// epoch ending at this log end. Truncating there must drop the empty epoch, or the next
// fetch reports the same divergence forever and the follower never rejoins the ISR.
func TestTruncateDropsAnEmptyEpoch(t *testing.T) {
	p := openTest(t, t.TempDir(), 1, -1)
	p.ApplyState(State{Role: RoleFollower, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now())
	if _, err := p.AppendAsFollower(batch(t, 0, 4, 3), 3); err != nil {
		t.Fatal(err)
	}
	p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now())
	p.ApplyState(State{Role: RoleFollower, Leader: 2, LeaderEpoch: 5, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{2}}, time.Now())
	if p.LatestEpoch() != 4 {
		t.Fatalf("latest epoch %d, want 4 (led at the log end)", p.LatestEpoch())
	}
	// The leader knows epoch 3, ending at 4 (where its epoch 5 began).
	if err := p.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if p.LatestEpoch() != 3 || p.LogEndOffset() != 4 {
		t.Fatalf("after truncating at the log end: latest epoch %d, LEO %d; want 3, 4", p.LatestEpoch(), p.LogEndOffset())
	}
}

// TestRestartedSoleISRMemberCommitsItsLogEnd pins what README's Durability section says
// of restarts: the checkpointed high watermark holds a restarted replica back while its
// ISR has other members (they must fetch in the new epoch first), but a replica elected
// with an ISR of one commits everything in its log at once, records that were above the
// high watermark before the restart included.
func TestRestartedSoleISRMemberCommitsItsLogEnd(t *testing.T) {
	dir := t.TempDir()
	p, err := open("t", testID, 0, 1, dir, -1, testSettings(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	p.ApplyState(leaderState(1, 1, 1, 2), time.Now())
	appendLeader(t, p, 5, 1) // follower 2 never fetches them: the HW stays at 0
	if p.HighWatermark() != 0 {
		t.Fatalf("HW %d before the restart", p.HighWatermark())
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	p = openTest(t, dir, 1, 0)
	p.ApplyState(leaderState(2, 2, 1, 2), time.Now())
	if p.HighWatermark() != 0 {
		t.Fatalf("leader with ISR [1 2] after a restart: HW %d, want the checkpointed 0", p.HighWatermark())
	}
	p.ApplyState(leaderState(3, 3, 1), time.Now()) // the controller's ISR is now this replica alone
	if p.HighWatermark() != 5 {
		t.Fatalf("leader with ISR [1] after a restart: HW %d, want its log end 5", p.HighWatermark())
	}
}

// TestReopenedHighWatermarkNotBelowLogStart: a checkpointed high watermark older than the
// deletion that moved the log start (a power cut takes the checkpoint back to its last
// fsync while the deletion stays) is raised to the log start on open, as Kafka's
// updateHighWatermark clamps it; the simulation's seed 235 found a leader whose log start
// passed its high watermark after such a cut.
func TestReopenedHighWatermarkNotBelowLogStart(t *testing.T) {
	dir := t.TempDir()
	p, err := open("t", testID, 0, 1, dir, -1, testSettings(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ApplyState(State{Role: RoleLeader, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	appendLeader(t, p, 10, 1)
	if hw := p.HighWatermark(); hw != 10 {
		t.Fatalf("HW %d, want 10", hw)
	}
	if _, err := p.DeleteRecordsBefore(6); err != nil {
		t.Fatal(err)
	}
	p.close()
	q := openTest(t, dir, 1, 3)
	if start, hw := q.LogStartOffset(), q.HighWatermark(); start != 6 || hw != 6 {
		t.Fatalf("reopened with checkpoint 3: log start %d, HW %d; want 6 and 6", start, hw)
	}
}
