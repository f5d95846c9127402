package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/coordinator/timer/timertest"
	"github.com/shalelog/shale/metadata"
)

// consumerClient plays a KIP-848 consumer: it owns what its last assignment said, and
// reports that in every heartbeat (revoking at once what it is no longer assigned).
type consumerClient struct {
	t      *testing.T
	c      *Coordinator
	group  string
	id     string
	epoch  int32
	topics []string
	regex  *string
	owned  []TopicPartitions
	// instance is the group.instance.id of a static member, nil for a dynamic one.
	instance *string
}

func newConsumerClient(t *testing.T, c *Coordinator, group, id string, topics ...string) *consumerClient {
	return &consumerClient{t: t, c: c, group: group, id: id, topics: topics}
}

func (cl *consumerClient) request() ConsumerHeartbeatRequest {
	owned := slices.Clone(cl.owned)
	if owned == nil {
		owned = []TopicPartitions{}
	}
	return ConsumerHeartbeatRequest{Group: cl.group, MemberID: cl.id, MemberEpoch: cl.epoch, RebalanceTimeout: 10 * time.Second,
		Names: cl.topics, Regex: cl.regex, Owned: owned, ClientID: "cl", ClientHost: "/127.0.0.1", InstanceID: cl.instance}
}

// heartbeat sends a full heartbeat and applies the answer.
func (cl *consumerClient) heartbeat() ConsumerHeartbeatResponse {
	cl.t.Helper()
	resp := cl.c.ConsumerHeartbeat(context.Background(), cl.request())
	if resp.Err == nil {
		cl.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			cl.owned = *resp.Assignment
		}
	}
	return resp
}

func (cl *consumerClient) mustHeartbeat() ConsumerHeartbeatResponse {
	cl.t.Helper()
	resp := cl.heartbeat()
	if resp.Err != nil {
		cl.t.Fatalf("member %s heartbeat: %v", cl.id, resp.Err)
	}
	return resp
}

func (cl *consumerClient) leave() {
	cl.t.Helper()
	req := cl.request()
	req.MemberEpoch = -1
	if resp := cl.c.ConsumerHeartbeat(context.Background(), req); resp.Err != nil {
		cl.t.Fatalf("member %s leave: %v", cl.id, resp.Err)
	}
	cl.owned, cl.epoch = nil, 0
}

func (cl *consumerClient) count() int {
	n := 0
	for _, tp := range cl.owned {
		n += len(tp.Partitions)
	}
	return n
}

// checkDisjoint fails when two clients own the same partition.
func checkDisjoint(t *testing.T, clients []*consumerClient) {
	t.Helper()
	seen := map[tpKey]string{}
	for _, cl := range clients {
		for _, tp := range cl.owned {
			for _, p := range tp.Partitions {
				k := tpKey{tp.TopicID, p}
				if other, ok := seen[k]; ok {
					t.Fatalf("partition %v owned by both %s and %s", k, other, cl.id)
				}
				seen[k] = cl.id
			}
		}
	}
}

func (c *Coordinator) consumerState(id string) (State, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil || g.cg == nil {
		return Dead, -1
	}
	return g.state, g.cg.epoch
}

func newConsumerCoordinator(t *testing.T, clock timer.Clock) (*Coordinator, metadata.Store) {
	t.Helper()
	store := newTestStore(t)
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ConsumerSessionTimeout = 45 * time.Second
	return newTestCoordinator(t, cfg, store), store
}

func TestConsumerJoinAssignsEverything(t *testing.T) {
	c, store := newConsumerCoordinator(t, &timertest.Manual{})
	a := newConsumerClient(t, c, "g", "a", "t", "u")
	resp := a.mustHeartbeat()
	if resp.MemberEpoch != 1 || resp.HeartbeatInterval != 5*time.Second {
		t.Fatalf("join: epoch %d interval %v, want 1 and 5s", resp.MemberEpoch, resp.HeartbeatInterval)
	}
	if a.count() != 6 {
		t.Fatalf("assignment %+v, want all 6 partitions of t and u", a.owned)
	}
	tID := store.Current().Topic("t").ID
	if a.owned[0].TopicID != tID && a.owned[1].TopicID != tID {
		t.Fatalf("assignment %+v lacks topic t's id", a.owned)
	}
	if st, epoch := c.consumerState("g"); st != Stable || epoch != 1 {
		t.Fatalf("group %v at epoch %d, want Stable at 1", st, epoch)
	}
}

// TestConsumerRevocationBeforeReassignment walks CurrentAssignmentBuilder's states: a
// partition moves to a new member only after its old owner reports it revoked.
func TestConsumerRevocationBeforeReassignment(t *testing.T) {
	c, _ := newConsumerCoordinator(t, &timertest.Manual{})
	a := newConsumerClient(t, c, "g", "a", "t")
	a.mustHeartbeat()
	if a.count() != 4 || a.epoch != 1 {
		t.Fatalf("a: %+v epoch %d, want 4 partitions at epoch 1", a.owned, a.epoch)
	}
	b := newConsumerClient(t, c, "g", "b", "t")
	b.mustHeartbeat()
	// b is at the new group epoch but gets nothing: a still owns every partition.
	if b.epoch != 2 || b.count() != 0 {
		t.Fatalf("b: %+v epoch %d, want nothing at epoch 2", b.owned, b.epoch)
	}
	if st, _ := c.consumerState("g"); st != Reconciling {
		t.Fatalf("group %v, want Reconciling", st)
	}
	// a reports owning all 4: it is told to keep 2, and stays at epoch 1 until it
	// confirms the revocation.
	ownedBefore := slices.Clone(a.owned)
	resp := a.mustHeartbeat()
	if resp.MemberEpoch != 1 || a.count() != 2 {
		t.Fatalf("a after target change: %+v epoch %d, want 2 partitions at epoch 1", a.owned, resp.MemberEpoch)
	}
	// b heartbeats before a has confirmed: still nothing.
	b.mustHeartbeat()
	if b.count() != 0 {
		t.Fatalf("b got %+v before a revoked", b.owned)
	}
	// A keepalive from a (owned unchanged, not said) keeps the partitions withheld.
	keep := a.request()
	keep.Owned, keep.Names = nil, nil
	keep.RebalanceTimeout = -1
	if r := c.ConsumerHeartbeat(context.Background(), keep); r.Err != nil || r.MemberEpoch != 1 {
		t.Fatalf("keepalive: %+v", r)
	}
	// A heartbeat that still reports the revoked partitions keeps them withheld.
	stale := a.request()
	stale.Owned = ownedBefore
	if r := c.ConsumerHeartbeat(context.Background(), stale); r.Err != nil || r.MemberEpoch != 1 {
		t.Fatalf("heartbeat still owning revoked partitions: %+v", r)
	}
	b.mustHeartbeat()
	if b.count() != 0 {
		t.Fatalf("b got %+v while a still owns them", b.owned)
	}
	checkDisjoint(t, []*consumerClient{a, b})
	// a confirms: it moves to epoch 2, and b then gets the 2 released partitions.
	a.mustHeartbeat()
	if a.epoch != 2 || a.count() != 2 {
		t.Fatalf("a after revoking: %+v epoch %d, want 2 partitions at epoch 2", a.owned, a.epoch)
	}
	b.mustHeartbeat()
	if b.epoch != 2 || b.count() != 2 {
		t.Fatalf("b after a revoked: %+v epoch %d, want 2 partitions at epoch 2", b.owned, b.epoch)
	}
	checkDisjoint(t, []*consumerClient{a, b})
	if st, epoch := c.consumerState("g"); st != Stable || epoch != 2 {
		t.Fatalf("group %v at epoch %d, want Stable at 2", st, epoch)
	}
}

func TestConsumerFencing(t *testing.T) {
	c, _ := newConsumerCoordinator(t, &timertest.Manual{})
	a := newConsumerClient(t, c, "g", "a", "t")
	a.mustHeartbeat()
	b := newConsumerClient(t, c, "g", "b", "t")
	b.mustHeartbeat()
	a.mustHeartbeat() // told to revoke 2
	a.mustHeartbeat() // revoked: epoch 2
	b.mustHeartbeat() // b takes the 2 a released
	if a.epoch != 2 || b.count() != 2 {
		t.Fatalf("a at epoch %d, b owns %+v; want epoch 2 and 2 partitions", a.epoch, b.owned)
	}
	for _, tc := range []struct {
		name  string
		epoch int32
		owned []TopicPartitions
		want  error
	}{
		{"newer epoch", 3, a.owned, kerr.FencedMemberEpoch},
		{"previous epoch owning only what it has", 1, a.owned, nil},
		{"previous epoch owning more than it has", 1, append(slices.Clone(a.owned), b.owned...), kerr.FencedMemberEpoch},
		{"older epoch", 0, a.owned, kerr.InvalidRequest}, // epoch 0 with owned partitions: a join may own nothing
	} {
		req := a.request()
		req.MemberEpoch, req.Owned = tc.epoch, tc.owned
		resp := c.ConsumerHeartbeat(context.Background(), req)
		if !errors.Is(resp.Err, tc.want) && !(tc.want == nil && resp.Err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, resp.Err, tc.want)
		}
	}
	req := a.request()
	req.MemberID = "nobody"
	if resp := c.ConsumerHeartbeat(context.Background(), req); !errors.Is(resp.Err, kerr.UnknownMemberID) {
		t.Errorf("unknown member: %v, want UNKNOWN_MEMBER_ID", resp.Err)
	}
	req = a.request()
	req.Group = "other"
	if resp := c.ConsumerHeartbeat(context.Background(), req); !errors.Is(resp.Err, kerr.UnknownMemberID) {
		t.Errorf("unknown group: %v, want UNKNOWN_MEMBER_ID", resp.Err)
	}
}

func TestConsumerSessionTimeoutFreesPartitions(t *testing.T) {
	clock := &timertest.Manual{}
	c, _ := newConsumerCoordinator(t, clock)
	a := newConsumerClient(t, c, "g", "a", "t")
	b := newConsumerClient(t, c, "g", "b", "t")
	a.mustHeartbeat()
	b.mustHeartbeat()
	a.mustHeartbeat()
	a.mustHeartbeat()
	b.mustHeartbeat()
	if a.count() != 2 || b.count() != 2 {
		t.Fatalf("a %+v, b %+v, want 2 each", a.owned, b.owned)
	}
	// b keeps heartbeating; a goes silent past the session timeout.
	for range 10 {
		clock.Advance(5 * time.Second)
		b.mustHeartbeat()
	}
	if b.count() != 4 {
		t.Fatalf("b after a expired: %+v, want all 4", b.owned)
	}
	if resp := a.heartbeat(); !errors.Is(resp.Err, kerr.UnknownMemberID) {
		t.Fatalf("expired member's heartbeat: %v, want UNKNOWN_MEMBER_ID", resp.Err)
	}
}

func TestConsumerRebalanceTimeoutRemovesMemberThatDoesNotRevoke(t *testing.T) {
	clock := &timertest.Manual{}
	c, _ := newConsumerCoordinator(t, clock)
	a := newConsumerClient(t, c, "g", "a", "t")
	a.mustHeartbeat()
	b := newConsumerClient(t, c, "g", "b", "t")
	b.mustHeartbeat()
	// a is told to revoke but keeps reporting all 4 partitions.
	all := slices.Clone(a.owned)
	a.mustHeartbeat()
	for range 3 {
		clock.Advance(3 * time.Second)
		req := a.request()
		req.Owned = all
		if resp := c.ConsumerHeartbeat(context.Background(), req); resp.Err != nil {
			t.Fatalf("a: %v", resp.Err)
		}
		b.mustHeartbeat()
		if b.count() != 0 {
			t.Fatalf("b got %+v while a has not revoked", b.owned)
		}
	}
	// Past a's 10s rebalance timeout, a is removed and b gets everything.
	clock.Advance(2 * time.Second)
	b.mustHeartbeat()
	if b.count() != 4 {
		t.Fatalf("b after a's rebalance timeout: %+v, want all 4", b.owned)
	}
}

// TestConsumerConvergence joins and removes members in random order, heartbeating in
// random order between the changes: no partition is ever owned by two members, and
// once everyone has heartbeated enough the group is Stable, everything is assigned,
// and the uniform assignor has balanced it.
func TestConsumerConvergence(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			c, _ := newConsumerCoordinator(t, &timertest.Manual{})
			var live []*consumerClient
			next := 0
			for step := range 40 {
				switch {
				case len(live) < 2 || (rng.IntN(3) == 0 && len(live) < 7):
					cl := newConsumerClient(t, c, "g", fmt.Sprintf("m%d", next), "t", "u")
					next++
					cl.mustHeartbeat()
					live = append(live, cl)
				case rng.IntN(4) == 0:
					i := rng.IntN(len(live))
					live[i].leave()
					live = slices.Delete(live, i, i+1)
				}
				for range rng.IntN(2 * len(live)) {
					live[rng.IntN(len(live))].mustHeartbeat()
					checkDisjoint(t, live)
				}
				_ = step
			}
			for range 4 {
				for _, cl := range live {
					cl.mustHeartbeat()
					checkDisjoint(t, live)
				}
			}
			st, epoch := c.consumerState("g")
			if st != Stable {
				t.Fatalf("group %v after converging, want Stable", st)
			}
			total, lo, hi := 0, 6, 0
			for _, cl := range live {
				if cl.epoch != epoch {
					t.Fatalf("member %s at epoch %d, group at %d", cl.id, cl.epoch, epoch)
				}
				n := cl.count()
				total += n
				lo, hi = min(lo, n), max(hi, n)
			}
			if total != 6 || hi-lo > 1 {
				t.Fatalf("%d members own %d partitions, %d to %d each; want 6, balanced", len(live), total, lo, hi)
			}
		})
	}
}

func TestConsumerUniformIsSticky(t *testing.T) {
	c, _ := newConsumerCoordinator(t, &timertest.Manual{})
	cls := []*consumerClient{newConsumerClient(t, c, "g", "a", "t", "u"), newConsumerClient(t, c, "g", "b", "t", "u")}
	for range 3 {
		for _, cl := range cls {
			cl.mustHeartbeat()
		}
	}
	before := map[string]int{}
	for _, cl := range cls {
		before[cl.id] = cl.count()
	}
	kept := func(cl *consumerClient, old []TopicPartitions) int {
		n := 0
		for _, tp := range old {
			for _, p := range tp.Partitions {
				for _, x := range cl.owned {
					if x.TopicID == tp.TopicID && slices.Contains(x.Partitions, p) {
						n++
					}
				}
			}
		}
		return n
	}
	oldA := slices.Clone(cls[0].owned)
	cls = append(cls, newConsumerClient(t, c, "g", "c", "t", "u"))
	for range 4 {
		for _, cl := range cls {
			cl.mustHeartbeat()
		}
	}
	// 6 partitions over 3 members: a keeps 2 of the 3 it had.
	if n := kept(cls[0], oldA); n != 2 || cls[0].count() != 2 {
		t.Fatalf("a kept %d of %+v (now %+v), want 2 of its 3", n, oldA, cls[0].owned)
	}
}

func TestConsumerRangeAssignor(t *testing.T) {
	c, store := newConsumerCoordinator(t, &timertest.Manual{})
	rangeName := RangeAssignor
	cls := []*consumerClient{newConsumerClient(t, c, "g", "a", "t", "u"), newConsumerClient(t, c, "g", "b", "t", "u")}
	for range 4 {
		for _, cl := range cls {
			req := cl.request()
			req.Assignor = &rangeName
			resp := c.ConsumerHeartbeat(context.Background(), req)
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			cl.epoch = resp.MemberEpoch
			if resp.Assignment != nil {
				cl.owned = *resp.Assignment
			}
		}
	}
	im := store.Current()
	want := map[string]map[[16]byte][]int32{
		"a": {im.Topic("t").ID: {0, 1}, im.Topic("u").ID: {0}},
		"b": {im.Topic("t").ID: {2, 3}, im.Topic("u").ID: {1}},
	}
	for _, cl := range cls {
		got := map[[16]byte][]int32{}
		for _, tp := range cl.owned {
			got[tp.TopicID] = tp.Partitions
		}
		for id, ps := range want[cl.id] {
			if !slices.Equal(got[id], ps) {
				t.Fatalf("%s owns %+v, want %+v", cl.id, got, want[cl.id])
			}
		}
	}
	d := c.DescribeConsumerGroups(context.Background(), []string{"g"})[0]
	if d.Err != nil || d.Assignor != RangeAssignor || d.State != Stable || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
}

func TestConsumerRegexSubscription(t *testing.T) {
	n := newTestNode(t)
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	c := newTestCoordinator(t, cfg, n.Store())
	cl := newConsumerClient(t, c, "g", "a")
	re := "t|v.*"
	cl.regex = &re
	cl.mustHeartbeat()
	if cl.count() != 4 {
		t.Fatalf("regex t|v.*: %+v, want t's 4 partitions", cl.owned)
	}
	// A topic created later that matches joins the assignment on a later heartbeat.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res := n.Store().CreateTopics(ctx, []metadata.TopicSpec{{Name: "vv", NumPartitions: 3, ReplicationFactor: 1}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for cl.count() != 7 {
		if time.Now().After(deadline) {
			t.Fatalf("after creating vv: %+v, want 7 partitions", cl.owned)
		}
		time.Sleep(10 * time.Millisecond)
		cl.mustHeartbeat()
	}
	bad := "("
	other := newConsumerClient(t, c, "g", "b")
	other.regex = &bad
	if resp := other.heartbeat(); !errors.Is(resp.Err, kerr.InvalidRegularExpression) {
		t.Fatalf("bad regex: %v, want INVALID_REGULAR_EXPRESSION", resp.Err)
	}
}

func TestConsumerHeartbeatErrors(t *testing.T) {
	store := newTestStore(t)
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	cfg.ConsumerMaxGroupSize = 1
	c := newTestCoordinator(t, cfg, store)
	newConsumerClient(t, c, "g", "a", "t").mustHeartbeat()
	if resp := newConsumerClient(t, c, "g", "b", "t").heartbeat(); !errors.Is(resp.Err, kerr.GroupMaxSizeReached) {
		t.Errorf("second member: %v, want GROUP_MAX_SIZE_REACHED", resp.Err)
	}
	bogus := "sticky"
	req := newConsumerClient(t, c, "h", "a", "t").request()
	req.Assignor = &bogus
	if resp := c.ConsumerHeartbeat(context.Background(), req); !errors.Is(resp.Err, kerr.UnsupportedAssignor) {
		t.Errorf("assignor sticky: %v, want UNSUPPORTED_ASSIGNOR", resp.Err)
	}
	for name, mut := range map[string]func(*ConsumerHeartbeatRequest){
		"empty group":            func(r *ConsumerHeartbeatRequest) { r.Group = "" },
		"empty member":           func(r *ConsumerHeartbeatRequest) { r.MemberID = "" },
		"epoch -3":               func(r *ConsumerHeartbeatRequest) { r.MemberEpoch = -3 },
		"join without topics":    func(r *ConsumerHeartbeatRequest) { r.Names = nil },
		"join without timeout":   func(r *ConsumerHeartbeatRequest) { r.RebalanceTimeout = -1 },
		"join owning partitions": func(r *ConsumerHeartbeatRequest) { r.Owned = []TopicPartitions{{Partitions: []int32{0}}} },
	} {
		req := newConsumerClient(t, c, "h", "a", "t").request()
		mut(&req)
		if resp := c.ConsumerHeartbeat(context.Background(), req); !errors.Is(resp.Err, kerr.InvalidRequest) {
			t.Errorf("%s: %v, want INVALID_REQUEST", name, resp.Err)
		}
	}
}

func TestConsumerOffsetCommitEpochs(t *testing.T) {
	c, _ := newConsumerCoordinator(t, &timertest.Manual{})
	a := newConsumerClient(t, c, "g", "a", "t")
	a.mustHeartbeat()
	b := newConsumerClient(t, c, "g", "b", "t")
	b.mustHeartbeat() // group epoch 2; a is still at 1
	a.mustHeartbeat()
	a.mustHeartbeat() // a at 2
	ctx := context.Background()
	commit := func(member string, epoch int32, v9 bool) error {
		errs, err := c.CommitOffsets(ctx, CommitRequest{Group: "g", MemberID: member, Generation: epoch, MemberEpochs: v9,
			Offsets: []metadata.CommittedOffset{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}}})
		if err != nil {
			return err
		}
		return errs[0]
	}
	for _, tc := range []struct {
		name   string
		member string
		epoch  int32
		v9     bool
		want   error
	}{
		{"current epoch", "a", 2, true, nil},
		{"stale epoch", "a", 1, true, kerr.StaleMemberEpoch},
		{"newer epoch", "a", 3, true, kerr.FencedMemberEpoch},
		{"OffsetCommit v8", "a", 2, false, kerr.UnsupportedVersion},
		{"unknown member", "z", 2, true, kerr.UnknownMemberID},
		{"simple commit to a group with members", "", -1, true, kerr.UnknownMemberID},
	} {
		if err := commit(tc.member, tc.epoch, tc.v9); !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := c.ValidateOffsetFetch("g", "a", 1); !errors.Is(err, kerr.StaleMemberEpoch) {
		t.Errorf("fetch at a stale epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := c.ValidateOffsetFetch("g", "a", 2); err != nil {
		t.Errorf("fetch at the current epoch: %v", err)
	}
}

func TestConsumerAndClassicGroupsShareIDs(t *testing.T) {
	c, _ := newConsumerCoordinator(t, nil) // the classic rebalances need their timers
	// Without online migration a live classic group refuses consumer-protocol members
	// (classic members joining a live consumer group: consumer_classic_test.go).
	c.cfg.ConsumerMigrationPolicy = MigrationDisabled
	a := newConsumerClient(t, c, "g", "a", "t")
	a.mustHeartbeat()
	stable := joinNew(t, c, joinReq("k", ""))
	if res := wait[JoinResult](t, stable); res.Err != nil {
		t.Fatal(res.Err)
	}
	if resp := newConsumerClient(t, c, "k", "x", "t").heartbeat(); !errors.Is(resp.Err, kerr.GroupIDNotFound) {
		t.Fatalf("consumer join of a classic group: %v, want GROUP_ID_NOT_FOUND", resp.Err)
	}
	// Once empty, a consumer group becomes classic on a classic join (and the other
	// way round).
	a.leave()
	if st, _ := c.consumerState("g"); st != Empty {
		t.Fatalf("group after its last member left: %v, want Empty", st)
	}
	joined := joinNew(t, c, joinReq("g", ""))
	if res := wait[JoinResult](t, joined); res.Err != nil {
		t.Fatalf("classic join of an empty consumer group: %v", res.Err)
	}
	ls, err := c.ListGroups(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Type != ClassicGroupType {
			t.Fatalf("listing %+v, want every group classic now", l)
		}
	}
}

// TestConsumerGroupSurvivesCoordinatorRestart: a new coordinator (as after a failover or
// a restart) continues the group from the quorum at the same epochs and assignments,
// mid-revocation included, and a member's heartbeat at its epoch is not fenced.
func TestConsumerGroupSurvivesCoordinatorRestart(t *testing.T) {
	store := newTestStore(t)
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	c1 := New(cfg, store)
	a := newConsumerClient(t, c1, "g", "a", "t")
	a.mustHeartbeat()
	b := newConsumerClient(t, c1, "g", "b", "t")
	b.mustHeartbeat()
	a.mustHeartbeat() // a is told to revoke 2 partitions: UNREVOKED_PARTITIONS at epoch 1
	if a.epoch != 1 || a.count() != 2 || b.epoch != 2 || b.count() != 0 {
		t.Fatalf("before the restart: a %+v@%d, b %+v@%d", a.owned, a.epoch, b.owned, b.epoch)
	}
	want := c1.DescribeConsumerGroups(context.Background(), []string{"g"})[0]
	c1.Close()

	c2 := newTestCoordinator(t, cfg, store)
	a.c, b.c = c2, c2
	// b first: a has not confirmed its revocation, so b still gets nothing.
	b.mustHeartbeat()
	if b.epoch != 2 || b.count() != 0 {
		t.Fatalf("b after the restart: %+v@%d, want nothing at epoch 2", b.owned, b.epoch)
	}
	got := c2.DescribeConsumerGroups(context.Background(), []string{"g"})[0]
	if got.Epoch != want.Epoch || got.State != want.State || len(got.Members) != 2 {
		t.Fatalf("described after the restart %+v, before %+v", got, want)
	}
	for i := range want.Members {
		w, g := want.Members[i], got.Members[i]
		if w.MemberID != g.MemberID || w.MemberEpoch != g.MemberEpoch || fmt.Sprint(w.Assignment) != fmt.Sprint(g.Assignment) || fmt.Sprint(w.Target) != fmt.Sprint(g.Target) {
			t.Fatalf("member after the restart %+v, before %+v", g, w)
		}
	}
	a.mustHeartbeat() // confirms the revocation
	b.mustHeartbeat()
	if a.epoch != 2 || b.epoch != 2 || a.count() != 2 || b.count() != 2 {
		t.Fatalf("after converging: a %+v@%d, b %+v@%d", a.owned, a.epoch, b.owned, b.epoch)
	}
	checkDisjoint(t, []*consumerClient{a, b})
	// Deleting the group (once empty) deletes its stored state too.
	a.leave()
	b.leave()
	if errs := c2.DeleteGroups(context.Background(), []string{"g"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if st, err := store.(metadata.ConsumerGroupStore).LoadConsumerGroup(context.Background(), "g"); err != nil || st != nil {
		t.Fatalf("stored state after DeleteGroups: %+v, %v", st, err)
	}
}

// TestConsumerFiftyMembers: 50 members join a 100-partition topic one after another and
// half of them then leave, everyone heartbeating in between: no partition is ever owned
// by two members, and the group settles balanced with every partition assigned.
func TestConsumerFiftyMembers(t *testing.T) {
	n := newTestNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res := n.Store().CreateTopics(ctx, []metadata.TopicSpec{{Name: "big", NumPartitions: 100, ReplicationFactor: 1}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	waitTopic(t, n.Store(), "big")
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	c := newTestCoordinator(t, cfg, n.Store())
	rng := rand.New(rand.NewPCG(50, 1))
	var live []*consumerClient
	round := func(times int) {
		for range times {
			for _, i := range rng.Perm(len(live)) {
				live[i].mustHeartbeat()
			}
			checkDisjoint(t, live)
		}
	}
	for i := range 50 {
		live = append(live, newConsumerClient(t, c, "g", fmt.Sprintf("m%02d", i), "big"))
		round(1)
	}
	for range 25 {
		i := rng.IntN(len(live))
		live[i].leave()
		live = slices.Delete(live, i, i+1)
		round(1)
	}
	round(4)
	st, epoch := c.consumerState("g")
	total := 0
	for _, cl := range live {
		if cl.epoch != epoch || cl.count() != 4 {
			t.Fatalf("member %s owns %d partitions at epoch %d; want 4 at %d", cl.id, cl.count(), cl.epoch, epoch)
		}
		total += cl.count()
	}
	if st != Stable || total != 100 {
		t.Fatalf("group %v with %d partitions owned, want Stable with 100", st, total)
	}
}

func waitTopic(t *testing.T, store metadata.Store, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for store.Current().Topic(name) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("topic %s never appeared", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A member's commit at its epoch to a coordinator that has not seen the group yet
// (after a failover) loads the group rather than answering UNKNOWN_MEMBER_ID.
func TestConsumerCommitLoadsGroup(t *testing.T) {
	store := newTestStore(t)
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	c1 := New(cfg, store)
	a := newConsumerClient(t, c1, "g", "a", "t")
	a.mustHeartbeat()
	c1.Close()
	c2 := newTestCoordinator(t, cfg, store)
	errs, err := c2.CommitOffsets(context.Background(), CommitRequest{Group: "g", MemberID: "a", Generation: a.epoch, MemberEpochs: true,
		Offsets: []metadata.CommittedOffset{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("commit after the takeover: %v %v", err, errs)
	}
}
