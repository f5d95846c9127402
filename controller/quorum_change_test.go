package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
)

// join starts controller id outside the configured voters: it must wait to be added.
func (q *testQuorum) join(id int32) *Server {
	q.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		q.t.Fatal(err)
	}
	cfg := q.config(0)
	cfg.NodeID, cfg.DataDir, cfg.Listener = id, q.t.TempDir(), ln
	cfg.Logger = testLogger(q.t).With("controller", id)
	s, err := NewServer(cfg)
	if err != nil {
		q.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		q.t.Fatal(err)
	}
	q.servers = append(q.servers, s)
	q.dirs = append(q.dirs, cfg.DataDir)
	q.voters = append(q.voters, Voter{ID: id, Addr: ln.Addr().String()})
	return s
}

func (q *testQuorum) byID(id int32) (int, *Server) {
	for i, v := range q.voters {
		if v.ID == id {
			return i, q.servers[i]
		}
	}
	q.t.Fatalf("no controller %d", id)
	return -1, nil
}

func voterIDs(vs []Voter) []int32 {
	var out []int32
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

// waitRemoved waits until controller id has noticed its removal and stopped serving.
func waitRemoved(t *testing.T, q *testQuorum, id int32) {
	t.Helper()
	_, s := q.byID(id)
	select {
	case <-s.Removed():
	case <-time.After(20 * time.Second):
		t.Fatalf("controller %d did not stop after its removal", id)
	}
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, removedMarker)); err != nil {
		t.Fatalf("controller %d: no removal marker: %v", id, err)
	}
	// Neither Raft nor gRPC is served on its port any more.
	if c, err := net.DialTimeout("tcp", s.cfg.selfAddr(), time.Second); err == nil {
		c.Close()
		t.Fatalf("controller %d still accepts connections after its removal", id)
	}
	if s.raft.State() != raft.Shutdown {
		t.Fatalf("controller %d: raft is %v after its removal", id, s.raft.State())
	}
}

// TestQuorumSwap replaces every controller of a three-voter quorum, one change at a time
// (add 4, remove 1, add 5, remove 2, add 6, remove 3), while a broker configured with
// controllers 1-3 only keeps working: it learns the new voters and reaches them once
// the old ones are gone. Removed controllers stop serving and refuse to start again.
func TestQuorumSwap(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	q.leader()
	b := q.broker(1, "")
	ctx := ctxFor(t)
	mustCreateTopic(t, b, "before", 3, 1)

	j := q.join(4)
	if vs := j.Voters(); len(vs) != 0 {
		t.Fatalf("a joining controller has a configuration of its own: %v", vs)
	}
	if err := b.AddVoter(ctx, 4, j.Addr()); err != nil {
		t.Fatal(err)
	}
	if got := voterIDs(q.servers[q.leader()].Voters()); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("voters after adding 4: %v", got)
	}
	if err := b.AddVoter(ctx, 4, j.Addr()); !errors.Is(err, kerr.DuplicateVoter) {
		t.Fatalf("adding a voter twice: %v", err)
	}
	if err := b.RemoveVoter(ctx, 42); !errors.Is(err, kerr.VoterNotFound) {
		t.Fatalf("removing an unknown voter: %v", err)
	}
	// The new voter has the whole log: its FSM holds what was created before it came.
	testutil.Eventually(t, 20*time.Second, "controller 4 caught up", func() bool { return j.Image().Topic("before") != nil })

	steps := []struct {
		remove, add int32
	}{{1, 5}, {2, 6}, {3, 0}}
	for _, st := range steps {
		if err := b.RemoveVoter(ctx, st.remove); err != nil {
			t.Fatalf("remove %d: %v", st.remove, err)
		}
		waitRemoved(t, q, st.remove)
		mustCreateTopic(t, b, fmt.Sprintf("after-removing-%d", st.remove), 1, 1)
		if st.add != 0 {
			n := q.join(st.add)
			if err := b.AddVoter(ctx, st.add, n.Addr()); err != nil {
				t.Fatalf("add %d: %v", st.add, err)
			}
		}
	}
	lead := q.servers[q.leader()]
	if got := voterIDs(lead.Voters()); !slices.Equal(got, []int32{4, 5, 6}) {
		t.Fatalf("voters after the swap: %v", got)
	}
	var want []string
	for _, v := range lead.Voters() {
		want = append(want, v.Addr)
	}
	slices.Sort(want)
	testutil.Eventually(t, 20*time.Second, "broker dials the new voters", func() bool {
		got := b.Controllers()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Logf("broker dials %v, voters are %v", got, want)
			return false
		}
		return true
	})
	mustCreateTopic(t, b, "after-swap", 2, 1)
	waitImage(t, b, "topics created through the new quorum", func(im *metadata.Image) bool {
		return im.Topic("after-swap") != nil && im.Topic("after-removing-3") != nil
	})
	testutil.Eventually(t, 10*time.Second, "lease", b.LeaseValid)

	// A removed controller's data directory is refused.
	i, _ := q.byID(1)
	cfg := q.config(i)
	if _, err := NewServer(cfg); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("restarting a removed controller: %v", err)
	}
}

// TestQuorumChangeOneAtATime: while an addition waits for its controller to catch up, a
// second change is refused; a controller that never comes is not left in the quorum;
// the last voter cannot be removed.
func TestQuorumChangeOneAtATime(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, func(c *Config) { c.VoterCatchUpTimeout = 2 * time.Second })
	lead := q.servers[q.leader()]
	b := q.broker(1, "")
	ctx := ctxFor(t)

	nowhere := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	added := make(chan error, 1)
	go func() { added <- b.AddVoter(ctx, 9, nowhere) }()
	testutil.Eventually(t, 10*time.Second, "controller 9 being added", func() bool {
		f := lead.raft.GetConfiguration()
		return f.Error() == nil && len(f.Configuration().Servers) == 2
	})
	if err := b.RemoveVoter(ctx, 9); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("a second change while one runs: %v", err)
	}
	if err := <-added; !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("adding a controller that never catches up: %v", err)
	}
	f := lead.raft.GetConfiguration()
	if err := f.Error(); err != nil || len(f.Configuration().Servers) != 1 {
		t.Fatalf("configuration after the failed addition: %+v %v", f.Configuration(), err)
	}
	if err := b.RemoveVoter(ctx, 1); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("removing the last voter: %v", err)
	}
	if err := b.AddVoter(ctx, 2, "no-port"); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("adding a voter without a port: %v", err)
	}
}

// TestDescribeQuorum: the leader, its term and commit index, every voter's log end and
// fetch times, and the broker as an observer.
func TestDescribeQuorum(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	b := q.broker(7, "")
	ctx := ctxFor(t)
	mustCreateTopic(t, b, "t", 1, 1)
	var st metadata.QuorumState
	var lead *Server
	testutil.Eventually(t, 20*time.Second, "every voter's log end known", func() bool {
		// A loaded machine may elect another leader meanwhile: compare the answer with
		// the leader of the moment, and ask again if it moved.
		lead = q.servers[q.leader()]
		var err error
		if st, err = b.DescribeQuorum(ctx); err != nil {
			t.Fatal(err)
		}
		if st.LeaderID != lead.cfg.NodeID || st.LeaderEpoch != int64(lead.raft.CurrentTerm()) {
			return false
		}
		for _, v := range st.Voters {
			if v.LogEndOffset < 0 || v.LastFetch.IsZero() || v.LastCaughtUp.IsZero() {
				return false
			}
		}
		return len(st.Observers) == 1 && st.Observers[0].LogEndOffset > 0
	})
	if st.LeaderID != lead.cfg.NodeID || st.LeaderEpoch != int64(lead.raft.CurrentTerm()) || st.HighWatermark <= 0 {
		t.Fatalf("quorum state %+v", st)
	}
	if got := len(st.Voters); got != 3 {
		t.Fatalf("%d voters", got)
	}
	for _, v := range st.Voters {
		if v.Addr != q.voters[v.ID-1].Addr || v.LogEndOffset > int64(lead.raft.LastIndex()) {
			t.Fatalf("voter %+v", v)
		}
	}
	if o := st.Observers[0]; o.ID != 7 || o.Addr != "" || o.LogEndOffset > st.HighWatermark+1 {
		t.Fatalf("observer %+v", o)
	}
}

// TestRemoveActiveController: removing the active controller hands leadership over
// first; the removal is committed by the new leader, the old one stops serving, and the
// two remaining voters carry on.
func TestRemoveActiveController(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 3, nil)
	lead := q.leader()
	id := q.voters[lead].ID
	b := q.broker(1, "")
	ctx := ctxFor(t)
	if err := b.RemoveVoter(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, q, id)
	next := q.servers[q.leader()]
	if next.cfg.NodeID == id || len(next.Voters()) != 2 || slices.ContainsFunc(next.Voters(), func(v Voter) bool { return v.ID == id }) {
		t.Fatalf("after removing the active controller %d: leader %d, voters %v", id, next.cfg.NodeID, next.Voters())
	}
	mustCreateTopic(t, b, "after", 1, 1)
	waitImage(t, b, "topic created by the remaining voters", func(im *metadata.Image) bool { return im.Topic("after") != nil })
}

// TestJoinedControllerRestarts: a controller added at runtime and restarted with the same
// settings (its node.id still outside controller.quorum.voters) takes its place in the
// stored quorum again and catches up.
func TestJoinedControllerRestarts(t *testing.T) {
	checkNoGoroutineLeak(t)
	q := newTestQuorum(t, 1, nil)
	q.leader()
	b := q.broker(1, "")
	ctx := ctxFor(t)
	j := q.join(2)
	addr := j.Addr()
	if err := b.AddVoter(ctx, 2, addr); err != nil {
		t.Fatal(err)
	}
	cfg := j.cfg
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	for range 50 {
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	i, _ := q.byID(2)
	q.servers[i] = s
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two voters: nothing commits without controller 2, so this proves it voted again.
	mustCreateTopic(t, b, "after-restart", 1, 1)
	testutil.Eventually(t, 20*time.Second, "restarted controller caught up", func() bool { return s.Image().Topic("after-restart") != nil })
	if got := voterIDs(s.Voters()); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("voters seen by the restarted controller: %v", got)
	}
}
