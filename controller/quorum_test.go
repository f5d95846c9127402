package controller

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
)

// TestLeaderFailover: three controllers and three brokers; topics created through every
// broker; the Raft leader stops; a new one takes over with nothing committed lost, and
// the brokers carry on against it.
func TestLeaderFailover(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	q.leader()
	brokers := []*BrokerClient{q.broker(1, ""), q.broker(2, ""), q.broker(3, "")}
	for i, b := range brokers {
		mustCreateTopic(t, b, fmt.Sprintf("t%d", i+1), 3, 3)
	}
	ctx := ctxFor(t)
	// As a client does, ask again on NOT_COORDINATOR: the coordinators move while the
	// brokers register, and broker 1's image may not have seen the last move yet.
	testutil.Eventually(t, 20*time.Second, "offsets committed through the group's coordinator", func() bool {
		err := brokers[0].CommitOffsets(ctx, "g", brokers[0].Current().GroupFence("g"), []metadata.CommittedOffset{{Topic: "t2", Partition: 1, Offset: 99}})
		if err != nil && !errors.Is(err, kerr.NotCoordinator) {
			t.Fatal(err)
		}
		return err == nil
	})
	for _, b := range brokers {
		waitImage(t, b, "all topics", func(im *metadata.Image) bool { return len(im.Topics) == 3 })
	}
	oldLeader := q.leader()
	before := q.servers[oldLeader].Image()

	q.stop(oldLeader)
	stopped := time.Now()
	newLeader := q.leader()
	t.Logf("controller %d took over %v after controller %d stopped", newLeader+1, time.Since(stopped), oldLeader+1)
	if newLeader == oldLeader {
		t.Fatal("stopped controller still leader")
	}
	after := q.servers[newLeader].Image()
	for name, top := range before.Topics {
		if !reflect.DeepEqual(after.Topics[name], top) {
			t.Fatalf("topic %s changed across failover:\n%+v\n%+v", name, top, after.Topics[name])
		}
	}
	// Brokers reach the new leader for writes and reads.
	mustCreateTopic(t, brokers[2], "t4", 2, 3)
	got, err := brokers[1].FetchOffsets(ctx, "g", nil)
	if err != nil || len(got) != 1 || got[0].Offset != 99 {
		t.Fatalf("offsets after failover: %+v %v", got, err)
	}
	for _, b := range brokers {
		im := waitImage(t, b, "t4 and the new controller id", func(im *metadata.Image) bool {
			return im.Topic("t4") != nil && im.ControllerID == q.voters[newLeader].ID
		})
		for id, br := range im.Brokers {
			if br.Fenced {
				t.Fatalf("broker %d fenced by the failover", id)
			}
		}
		testutil.Eventually(t, 30*time.Second, "lease", b.LeaseValid)
	}
	// The old leader comes back as a follower and catches up.
	q.restart(oldLeader)
	want := q.servers[newLeader].Image()
	testutil.Eventually(t, 20*time.Second, "restarted controller caught up", func() bool {
		return q.servers[oldLeader].Image().Offset >= want.Offset
	})
	if got := q.servers[oldLeader].Image(); !reflect.DeepEqual(got.Topics, q.servers[newLeader].Image().Topics) {
		t.Fatal("restarted controller's topics differ from the leader's")
	}
}

func ledBy(im *metadata.Image, topic string, broker int32) []int32 {
	var out []int32
	for _, p := range im.Topic(topic).Partitions {
		if p.Leader == broker {
			out = append(out, p.Index)
		}
	}
	return out
}

// TestBrokerFailover: a broker dies without a word; within the session timeout its
// partitions get new leaders from their ISRs with bumped epochs; when it comes back and
// rejoins the ISRs, the preferred leaders return.
func TestBrokerFailover(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	q.leader()
	b1, b2, b3 := q.broker(1, ""), q.broker(2, ""), q.broker(3, "")
	mustCreateTopic(t, b1, "t", 6, 3)
	im := waitImage(t, b1, "topic", func(im *metadata.Image) bool { return im.Topic("t") != nil })
	victim := ledBy(im, "t", 2)
	if len(victim) != 2 {
		t.Fatalf("broker 2 leads %v of 6 partitions: leaders unbalanced", victim)
	}

	b2.silentClose.Store(true)
	b2.Close()
	died := time.Now()
	im = waitImage(t, b1, "broker 2's partitions moved", func(im *metadata.Image) bool {
		for _, p := range im.Topic("t").Partitions {
			if p.Leader == 2 || slices.Contains(p.ISR, 2) {
				return false
			}
		}
		return true
	})
	moved := time.Since(died)
	t.Logf("partitions moved %v after the broker died (session timeout %v)", moved, testSessionTimeout)
	if moved < testSessionTimeout/2 {
		t.Fatalf("fenced after %v, before its session could have expired", moved)
	}
	if !im.Brokers[2].Fenced {
		t.Fatal("dead broker not fenced")
	}
	for _, idx := range victim {
		p := im.Partition("t", idx)
		if p.LeaderEpoch != 1 || p.Leader < 0 || len(p.ISR) != 2 {
			t.Fatalf("partition %d after failover: %+v", idx, *p)
		}
	}

	// Broker 2 restarts: a new incarnation registers and is unfenced, out of every ISR.
	b2 = q.broker(2, "")
	im = waitImage(t, b1, "broker 2 back", func(im *metadata.Image) bool { return !im.Brokers[2].Fenced })
	// Each leader takes it back into the ISR, as replication will once it catches up.
	leaders := map[int32]*BrokerClient{1: b1, 2: b2, 3: b3}
	ctx := ctxFor(t)
	for _, p := range im.Topic("t").Partitions {
		if _, err := leaders[p.Leader].AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "t", Partition: p.Index,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), 2)}); err != nil {
			t.Fatalf("partition %d: %v", p.Index, err)
		}
	}
	im = waitImage(t, b3, "preferred leaders back", func(im *metadata.Image) bool {
		for _, p := range im.Topic("t").Partitions {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	})
	for _, idx := range victim {
		if p := im.Partition("t", idx); p.Leader != 2 || p.LeaderEpoch != 2 {
			t.Fatalf("partition %d: %+v", idx, *p)
		}
	}
}

// TestStoppedBrokerLosesLease is SIGSTOP in process: a leader's heartbeats stop; by its
// own clock it stops being a valid leader before the controller fences it and another
// replica takes over; when it resumes, it is not given a lease until its cache shows
// what it no longer leads.
func TestStoppedBrokerLosesLease(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	q.leader()
	b1, b2 := q.broker(1, ""), q.broker(2, "")
	r := b2.CreateTopics(ctxFor(t), []metadata.TopicSpec{{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 2}}}}, false)
	if r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	for _, b := range []*BrokerClient{b1, b2} {
		waitImage(t, b, "topic", func(im *metadata.Image) bool { return im.Topic("t") != nil })
	}

	b1.heartbeatsPaused.Store(true)
	var leaseLost bool
	waitImage(t, b2, "leadership moved to broker 2", func(im *metadata.Image) bool {
		if !b1.LeaseValid() {
			leaseLost = true
		}
		return im.Partition("t", 0).Leader == 2
	})
	if !leaseLost || b1.LeaseValid() {
		t.Fatal("the stopped broker still had a valid lease when another replica became leader")
	}
	if p := b2.Current().Partition("t", 0); p.LeaderEpoch != 1 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after fencing: %+v", *p)
	}

	b1.heartbeatsPaused.Store(false)
	testutil.Eventually(t, 10*time.Second, "lease back", func() bool {
		if !b1.LeaseValid() {
			return false
		}
		if p := b1.Current().Partition("t", 0); p.Leader == 1 {
			t.Fatal("lease granted while the cache still shows the old leadership")
		}
		return true
	})
}

func snapshotCount(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		return 0
	}
	return len(entries)
}

// TestSnapshotRestart: a long metadata log is compacted into snapshots; the whole quorum
// restarts from them with nothing lost, and a follower that fell behind the compacted log
// catches up by installing the leader's snapshot.
func TestSnapshotRestart(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, func(c *Config) {
		c.SnapshotThreshold = 50
		c.TrailingLogs = 20
		c.SnapshotInterval = 200 * time.Millisecond
	})
	q.leader()
	b := q.broker(1, "")
	mustCreateTopic(t, b, "t", 4, 1)
	ctx := ctxFor(t)
	commit := func(group string, n int) {
		for i := range n {
			if err := b.CommitOffsets(ctx, group, b.Current().GroupFence(group), []metadata.CommittedOffset{{Topic: "t", Partition: int32(i % 4), Offset: int64(i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit("g1", 200)
	for i, s := range q.servers {
		if err := s.Snapshot(); err != nil {
			t.Fatalf("snapshot on controller %d: %v", i+1, err)
		}
	}
	want := q.servers[q.leader()].Image()
	for i := range q.servers {
		q.stop(i)
		if snapshotCount(t, q.dirs[i]) == 0 {
			t.Fatalf("controller %d has no snapshot", i+1)
		}
	}
	for i := range q.servers {
		q.restart(i)
	}
	lead := q.leader()
	first, _ := q.servers[lead].store.FirstIndex()
	if first <= 1 {
		t.Fatal("log not compacted: the restart replayed it from the start")
	}
	got := q.servers[lead].Image()
	if !reflect.DeepEqual(got.Topics, want.Topics) || !reflect.DeepEqual(got.Brokers[1].Epoch, want.Brokers[1].Epoch) {
		t.Fatal("metadata changed across the restart")
	}
	offs, err := b.FetchOffsets(ctx, "g1", nil)
	if err != nil || len(offs) != 4 || offs[3].Offset != 199 {
		t.Fatalf("offsets after restart: %+v %v", offs, err)
	}

	// A follower misses a stretch longer than the trailing logs.
	follower := (lead + 1) % 3
	followerPos := q.servers[follower].AppliedIndex()
	q.stop(follower)
	commit("g2", 150)
	lead = q.leader()
	if err := q.servers[lead].Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first, _ := q.servers[lead].store.FirstIndex(); first <= followerPos+1 {
		t.Fatalf("leader's log starts at %d, follower stopped at %d: it could catch up without a snapshot", first, followerPos)
	}
	q.restart(follower)
	leaderImg := q.servers[lead].Image()
	testutil.Eventually(t, 20*time.Second, "follower caught up", func() bool {
		return q.servers[follower].AppliedIndex() >= q.servers[lead].AppliedIndex() &&
			q.servers[follower].Image().Offset >= leaderImg.Offset
	})
	if !reflect.DeepEqual(q.servers[follower].fsm.fetchOffsets("g2", nil), q.servers[lead].fsm.fetchOffsets("g2", nil)) {
		t.Fatal("follower's offsets differ after catching up")
	}
}

// TestDuplicateBrokerID: a second process with a live broker's id waits until the first
// one's session lapses, then takes over; the first, resuming, is refused (its epoch is
// stale and the newcomer's session is alive) and holds no lease.
func TestDuplicateBrokerID(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	q.leader()
	first := q.broker(1, "")
	first.heartbeatsPaused.Store(true)
	start := time.Now()
	second := q.broker(1, "") // blocks while the first's session is alive
	if waited := time.Since(start); waited < testSessionTimeout/2 {
		t.Fatalf("second registration accepted after %v, while the first session was alive", waited)
	}
	if second.BrokerEpoch() == first.BrokerEpoch() {
		t.Fatal("same epoch for two processes")
	}
	first.heartbeatsPaused.Store(false)
	time.Sleep(5 * testHeartbeatInterval)
	if first.LeaseValid() {
		t.Fatal("the superseded process holds a lease")
	}
	if !second.LeaseValid() {
		t.Fatal("the new process lost its lease")
	}
	if b := q.servers[0].Image().Brokers[1]; b.Incarnation != second.Incarnation() || b.Fenced {
		t.Fatalf("registration %+v", b)
	}
}
