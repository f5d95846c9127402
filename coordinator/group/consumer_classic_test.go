package group

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/timer/timertest"
	"github.com/shalelog/shale/metadata"
)

// classicClient plays a cooperative classic consumer of topic t: its JoinGroup metadata
// reports what it owns, and it owns exactly what its last SyncGroup gave it.
type classicClient struct {
	t     *testing.T
	c     *Coordinator
	store metadata.Store
	group string
	id    string
	gen   int32
	owned []int32 // partitions of t
}

func newClassicClient(t *testing.T, c *Coordinator, store metadata.Store, group string) *classicClient {
	return &classicClient{t: t, c: c, store: store, group: group}
}

func (cl *classicClient) joinRequest() JoinRequest {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{"t"}
	if len(cl.owned) > 0 {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = "t", slices.Clone(cl.owned)
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	req := joinReq(cl.group, cl.id)
	req.Protocols = []Protocol{{Name: "cooperative-sticky", Metadata: meta.AppendTo(nil)}}
	return req
}

// join runs JoinGroup (with the MEMBER_ID_REQUIRED round for a new member) and returns
// the pending call.
func (cl *classicClient) join() *JoinCall {
	cl.t.Helper()
	if cl.id == "" {
		call := joinNew(cl.t, cl.c, cl.joinRequest())
		return call
	}
	return cl.c.Join(cl.joinRequest())
}

// rejoin joins and syncs, taking what the SyncGroup answer gives.
func (cl *classicClient) rejoin() {
	cl.t.Helper()
	res := wait[JoinResult](cl.t, cl.join())
	if res.Err != nil {
		cl.t.Fatalf("classic join: %v", res.Err)
	}
	cl.id, cl.gen = res.MemberID, res.Generation
	cl.sync(nil)
}

func (cl *classicClient) sync(plan map[string][]byte) {
	cl.t.Helper()
	sres := wait[SyncResult](cl.t, cl.c.Sync(SyncRequest{Group: cl.group, MemberID: cl.id, Generation: cl.gen, Assignments: plan}))
	if sres.Err != nil {
		cl.t.Fatalf("classic sync: %v", sres.Err)
	}
	var asg kmsg.ConsumerMemberAssignment
	if err := asg.ReadFrom(sres.Assignment); err != nil {
		cl.t.Fatalf("assignment: %v", err)
	}
	cl.owned = nil
	for _, tp := range asg.Topics {
		if tp.Topic != "t" {
			cl.t.Fatalf("assignment of topic %s", tp.Topic)
		}
		cl.owned = append(cl.owned, tp.Partitions...)
	}
	slices.Sort(cl.owned)
}

func (cl *classicClient) heartbeat() error {
	return cl.c.Heartbeat(HeartbeatRequest{Group: cl.group, MemberID: cl.id, Generation: cl.gen})
}

// settle heartbeats and rejoins (as a classic consumer does on REBALANCE_IN_PROGRESS)
// until the heartbeat succeeds, checking after every step that nobody owns a
// partition twice.
func (cl *classicClient) settle(check func()) {
	cl.t.Helper()
	for range 10 {
		err := cl.heartbeat()
		if err == nil {
			return
		}
		if !errors.Is(err, kerr.RebalanceInProgress) {
			cl.t.Fatalf("classic heartbeat: %v", err)
		}
		cl.rejoin()
		check()
	}
	cl.t.Fatalf("classic member %s did not settle", cl.id)
}

// checkOwnership fails when a partition of t is owned twice, by KIP-848 or classic
// members.
func checkOwnership(t *testing.T, store metadata.Store, kip []*consumerClient, classic []*classicClient) {
	t.Helper()
	tID := store.Current().Topic("t").ID
	seen := map[int32]string{}
	own := func(who string, p int32) {
		if other, ok := seen[p]; ok {
			t.Fatalf("partition t-%d owned by both %s and %s", p, other, who)
		}
		seen[p] = who
	}
	for _, cl := range kip {
		for _, tp := range cl.owned {
			if tp.TopicID == tID {
				for _, p := range tp.Partitions {
					own(cl.id, p)
				}
			}
		}
	}
	for _, cl := range classic {
		for _, p := range cl.owned {
			own(cl.id, p)
		}
	}
}

func totalOwned(kip []*consumerClient, classic []*classicClient) int {
	n := 0
	for _, cl := range kip {
		n += cl.count()
	}
	for _, cl := range classic {
		n += len(cl.owned)
	}
	return n
}

// TestClassicMembersInConsumerGroup: a classic member joins a live consumer group and
// is assigned by the server; it learns of assignment changes through
// REBALANCE_IN_PROGRESS and gives up partitions before anyone else gets them.
func TestClassicMembersInConsumerGroup(t *testing.T) {
	c, store := newConsumerCoordinator(t, &timertest.Manual{})
	a := newConsumerClient(t, c, "g", "a", "t")
	a.mustHeartbeat()
	k := newClassicClient(t, c, store, "g")
	kips, classics := []*consumerClient{a}, []*classicClient{k}
	check := func() { checkOwnership(t, store, kips, classics) }

	k.rejoin()
	if k.gen != 2 || len(k.owned) != 0 {
		t.Fatalf("classic member at generation %d owns %v, want epoch 2 and nothing yet (a owns all)", k.gen, k.owned)
	}
	if err := k.heartbeat(); !errors.Is(err, kerr.RebalanceInProgress) {
		t.Fatalf("classic heartbeat while its partitions are withheld: %v, want REBALANCE_IN_PROGRESS", err)
	}
	a.mustHeartbeat() // told to revoke 2
	check()
	k.rejoin() // a has not confirmed: still nothing
	if len(k.owned) != 0 {
		t.Fatalf("classic member got %v before a revoked", k.owned)
	}
	a.mustHeartbeat() // revoked
	k.settle(check)
	if len(k.owned) != 2 || a.count() != 2 {
		t.Fatalf("after settling: classic %v, a %+v, want 2 each", k.owned, a.owned)
	}
	if st, _ := c.consumerState("g"); st != Stable {
		t.Fatalf("group %v, want Stable", st)
	}

	// A third member makes the classic member give up a partition: it is told
	// (REBALANCE_IN_PROGRESS), its SyncGroup answer leaves it out, and only its next
	// JoinGroup, which no longer reports it, releases it.
	b := newConsumerClient(t, c, "g", "b", "t")
	kips = append(kips, b)
	b.mustHeartbeat()
	check()
	for range 5 {
		a.mustHeartbeat()
		b.mustHeartbeat()
		check()
		k.settle(check)
	}
	a.mustHeartbeat()
	b.mustHeartbeat()
	if totalOwned(kips, classics) != 4 || len(k.owned) == 0 || a.count() == 0 || b.count() == 0 {
		t.Fatalf("after b joined: classic %v, a %+v, b %+v, want all 4 spread", k.owned, a.owned, b.owned)
	}
	if st, _ := c.consumerState("g"); st != Stable {
		t.Fatalf("group %v, want Stable", st)
	}
	// Commits of a classic member carry its generation (its member epoch).
	commit := CommitRequest{Group: "g", MemberID: k.id, Generation: k.gen, Offsets: []metadata.CommittedOffset{{Topic: "t", Partition: k.owned[0], Offset: 5}}}
	errs, err := c.CommitOffsets(context.Background(), commit)
	if err != nil || errs[0] != nil {
		t.Fatalf("classic member's commit: %v %v", err, errs)
	}
	commit.Generation = k.gen - 1
	errs, err = c.CommitOffsets(context.Background(), commit)
	if err == nil {
		err = errs[0]
	}
	if !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("classic member's commit at an old generation: %v, want ILLEGAL_GENERATION", err)
	}
	// Its LeaveGroup frees what it owned.
	errs, err = c.Leave("g", []LeavingMember{{MemberID: k.id}})
	if err != nil || errs[0] != nil {
		t.Fatalf("leave: %v %v", err, errs)
	}
	classics = nil
	for range 3 {
		a.mustHeartbeat()
		b.mustHeartbeat()
		check()
	}
	if a.count()+b.count() != 4 {
		t.Fatalf("after the classic member left: a %+v, b %+v", a.owned, b.owned)
	}
}

// formClassicGroup forms a classic group of two cooperative members of t with the
// leader's plan: t-0, t-1 to the first, t-2, t-3 to the second.
func formClassicGroup(t *testing.T, c *Coordinator, store metadata.Store, clock *timertest.Manual) (*classicClient, *classicClient) {
	t.Helper()
	k1, k2 := newClassicClient(t, c, store, "g"), newClassicClient(t, c, store, "g")
	j1, j2 := k1.join(), k2.join()
	// The initial join delay (none here), extended once as the second member came.
	for range 3 {
		clock.Advance(0)
	}
	r1, r2 := wait[JoinResult](t, j1), wait[JoinResult](t, j2)
	if r1.Err != nil || r2.Err != nil {
		t.Fatalf("classic joins: %v %v", r1.Err, r2.Err)
	}
	k1.id, k1.gen, k2.id, k2.gen = r1.MemberID, r1.Generation, r2.MemberID, r2.Generation
	leader, other := k1, k2
	if r2.Leader == k2.id {
		leader, other = k2, k1
	}
	plan := map[string][]byte{leader.id: classicAssignment(0, 1), other.id: classicAssignment(2, 3)}
	s2 := c.Sync(SyncRequest{Group: "g", MemberID: other.id, Generation: other.gen})
	leader.sync(plan)
	sres := wait[SyncResult](t, s2)
	var asg kmsg.ConsumerMemberAssignment
	if sres.Err != nil || asg.ReadFrom(sres.Assignment) != nil {
		t.Fatalf("follower sync: %v", sres.Err)
	}
	other.owned = asg.Topics[0].Partitions
	return leader, other
}

func classicAssignment(parts ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	tp := kmsg.NewConsumerMemberAssignmentTopic()
	tp.Topic, tp.Partitions = "t", parts
	a.Topics = append(a.Topics, tp)
	return a.AppendTo(nil)
}

func (c *Coordinator) groupType(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	switch {
	case g == nil:
		return ""
	case g.cg != nil:
		return ConsumerGroupType
	}
	return ClassicGroupType
}

// TestOnlineUpgradeAndDowngrade: a live classic group becomes a consumer group when a
// KIP-848 member joins, the classic members keeping their partitions until the server's
// assignment moves them; it becomes classic again when that member leaves.
func TestOnlineUpgradeAndDowngrade(t *testing.T) {
	clock := &timertest.Manual{}
	c, store := newConsumerCoordinator(t, clock)
	k1, k2 := formClassicGroup(t, c, store, clock)
	classics := []*classicClient{k1, k2}
	x := newConsumerClient(t, c, "g", "x", "t")
	kips := []*consumerClient{x}
	check := func() { checkOwnership(t, store, kips, classics) }
	gen := k1.gen

	x.mustHeartbeat()
	if typ := c.groupType("g"); typ != ConsumerGroupType {
		t.Fatalf("group type %q after a KIP-848 member joined, want consumer", typ)
	}
	if x.epoch != gen+1 || x.count() != 0 {
		t.Fatalf("x: epoch %d owns %+v, want epoch %d and nothing (the classic members own all)", x.epoch, x.owned, gen+1)
	}
	check()
	for range 5 {
		k1.settle(check)
		k2.settle(check)
		x.mustHeartbeat()
		check()
	}
	if totalOwned(kips, classics) != 4 || x.count() == 0 || len(k1.owned) == 0 || len(k2.owned) == 0 {
		t.Fatalf("after the upgrade: k1 %v, k2 %v, x %+v, want all 4 spread", k1.owned, k2.owned, x.owned)
	}

	// The KIP-848 member leaves: the group is classic again, and its members learn
	// they must rebalance.
	x.leave()
	kips = nil
	if typ := c.groupType("g"); typ != ClassicGroupType {
		t.Fatalf("group type %q after the last KIP-848 member left, want classic", typ)
	}
	if st, _, n := c.stateOf("g"); st != PreparingRebalance || n != 2 {
		t.Fatalf("downgraded group %v with %d members, want PreparingRebalance with 2", st, n)
	}
	// A member at the group epoch is told REBALANCE_IN_PROGRESS, one behind it
	// ILLEGAL_GENERATION (as in Kafka); both join again.
	for _, k := range classics {
		if err := k.heartbeat(); !errors.Is(err, kerr.RebalanceInProgress) && !errors.Is(err, kerr.IllegalGeneration) {
			t.Fatalf("classic heartbeat after the downgrade: %v, want REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION", err)
		}
	}
	j1, j2 := k1.join(), k2.join()
	r1, r2 := wait[JoinResult](t, j1), wait[JoinResult](t, j2)
	if r1.Err != nil || r2.Err != nil || r1.Generation <= gen || r1.Generation != r2.Generation {
		t.Fatalf("classic rejoins after the downgrade: %+v %+v", r1, r2)
	}
	if st, _, _ := c.stateOf("g"); st != CompletingRebalance {
		t.Fatalf("downgraded group %v after its members rejoined, want CompletingRebalance", st)
	}
	// Its state is gone from the quorum, so a new coordinator would not find a
	// consumer group.
	waitNoStoredConsumerGroup(t, store, "g")
}

func waitNoStoredConsumerGroup(t *testing.T, store metadata.Store, id string) {
	t.Helper()
	cs := store.(metadata.ConsumerGroupStore)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := cs.LoadConsumerGroup(context.Background(), id)
		if err == nil && st == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer group %s still stored: %+v %v", id, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMigrationPolicy: "disabled" keeps a live classic group classic; "upgrade"
// converts it but never back.
func TestMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy              string
		upgrades, downgrade bool
	}{
		{MigrationDisabled, false, false},
		{MigrationUpgrade, true, false},
		{MigrationDowngrade, false, false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			clock := &timertest.Manual{}
			store := newTestStore(t)
			cfg := testConfig()
			cfg.Clock = clock
			cfg.ConsumerMigrationPolicy = tc.policy
			c := newTestCoordinator(t, cfg, store)
			formClassicGroup(t, c, store, clock)
			x := newConsumerClient(t, c, "g", "x", "t")
			resp := x.heartbeat()
			if !tc.upgrades {
				if !errors.Is(resp.Err, kerr.GroupIDNotFound) || c.groupType("g") != ClassicGroupType {
					t.Fatalf("KIP-848 join of a live classic group: %v (type %s), want GROUP_ID_NOT_FOUND and classic", resp.Err, c.groupType("g"))
				}
				return
			}
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			x.leave()
			if typ := c.groupType("g"); typ != ConsumerGroupType {
				t.Fatalf("group type %q after the KIP-848 member left under %s, want consumer", typ, tc.policy)
			}
		})
	}
}

// TestClassicMemberSurvivesCoordinatorRestart: a classic member of a consumer group goes
// on heartbeating at its generation on a coordinator that took the group over, and the
// group still downgrades when its KIP-848 member leaves there.
func TestClassicMemberSurvivesCoordinatorRestart(t *testing.T) {
	store := newTestStore(t)
	cfg := testConfig()
	cfg.Clock = &timertest.Manual{}
	cfg.ConsumerSessionTimeout = 45 * time.Second
	c1 := New(cfg, store)
	a := newConsumerClient(t, c1, "g", "a", "t")
	a.mustHeartbeat()
	k := newClassicClient(t, c1, store, "g")
	check := func() { checkOwnership(t, store, []*consumerClient{a}, []*classicClient{k}) }
	k.rejoin()
	a.mustHeartbeat() // told to revoke 2
	a.mustHeartbeat() // revoked
	k.settle(check)
	if len(k.owned) != 2 || a.count() != 2 {
		t.Fatalf("before the restart: classic %v, a %+v", k.owned, a.owned)
	}
	c1.Close()

	c2 := newTestCoordinator(t, cfg, store)
	a.c, k.c = c2, c2
	if err := k.heartbeat(); err != nil {
		t.Fatalf("classic heartbeat on the new coordinator: %v", err)
	}
	a.leave()
	if typ := c2.groupType("g"); typ != ClassicGroupType {
		t.Fatalf("group type %q after the KIP-848 member left on the new coordinator, want classic", typ)
	}
}
