package group

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/testutil"
)

func TestFirstMemberFormsGeneration(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	res := wait[JoinResult](t, joinNew(t, c, joinReq("g", "")))
	if res.Err != nil || res.Generation != 1 || res.Leader != res.MemberID || res.Protocol != "range" || res.ProtocolType != "consumer" {
		t.Fatalf("join: %+v", res)
	}
	if len(res.Members) != 1 || res.Members[0].MemberID != res.MemberID {
		t.Fatalf("leader's member list: %+v", res.Members)
	}
	if st, _, _ := c.stateOf("g"); st != CompletingRebalance {
		t.Fatalf("state %v", st)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: res.MemberID, Generation: 1}); err != nil {
		t.Fatalf("heartbeat while completing: %v", err)
	}
	sync := wait[SyncResult](t, c.Sync(SyncRequest{Group: "g", MemberID: res.MemberID, Generation: 1, Assignments: map[string][]byte{res.MemberID: []byte("all")}}))
	if sync.Err != nil || string(sync.Assignment) != "all" || sync.Protocol != "range" {
		t.Fatalf("sync: %+v", sync)
	}
	if st, _, _ := c.stateOf("g"); st != Stable {
		t.Fatalf("state %v", st)
	}
	for _, tc := range []struct {
		req  HeartbeatRequest
		want error
	}{
		{HeartbeatRequest{Group: "g", MemberID: res.MemberID, Generation: 1}, nil},
		{HeartbeatRequest{Group: "g", MemberID: res.MemberID, Generation: 0}, kerr.IllegalGeneration},
		{HeartbeatRequest{Group: "g", MemberID: "nobody", Generation: 1}, kerr.UnknownMemberID},
		{HeartbeatRequest{Group: "other", MemberID: res.MemberID, Generation: 1}, kerr.UnknownMemberID},
		{HeartbeatRequest{Group: "", MemberID: res.MemberID, Generation: 1}, kerr.InvalidGroupID},
		{HeartbeatRequest{Group: "g", MemberID: res.MemberID, InstanceID: "i", Generation: 1}, kerr.FencedInstanceID},
	} {
		if err := c.Heartbeat(tc.req); !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("heartbeat %+v: %v, want %v", tc.req, err, tc.want)
		}
	}
}

func TestOldVersionsJoinWithoutMemberIDRound(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	req := joinReq("g", "")
	req.RequireKnownMemberID = false
	res := wait[JoinResult](t, c.Join(req))
	if res.Err != nil || res.MemberID == "" || res.Generation != 1 {
		t.Fatalf("v0-v3 join: %+v", res)
	}
}

// stableGroup forms a group of n members, synced and Stable, and returns their ids
// (the leader first).
func stableGroup(t *testing.T, c *Coordinator, group string, n int) []string {
	t.Helper()
	var calls []*JoinCall
	for i := 0; i < n; i++ {
		calls = append(calls, joinNew(t, c, joinReq(group, "")))
		if i == 0 {
			// The first join completes alone (no initial delay); the others make the
			// group rebalance again, and the first member has to rejoin.
			wait[JoinResult](t, calls[0])
		}
	}
	results := rejoinAll(t, c, group, calls)
	return syncAll(t, c, group, results)
}

// rejoinAll waits for every call, rejoining members that were told to.
func rejoinAll(t *testing.T, c *Coordinator, group string, calls []*JoinCall) []JoinResult {
	t.Helper()
	var ids []string
	for _, call := range calls {
		ids = append(ids, call.m.id)
	}
	// Everyone rejoins with its id; completed calls from earlier generations are
	// replaced.
	var pending []*JoinCall
	for _, id := range ids {
		pending = append(pending, c.Join(joinReq(group, id)))
	}
	var out []JoinResult
	for _, p := range pending {
		r := wait[JoinResult](t, p)
		if r.Err != nil {
			t.Fatalf("rejoin: %+v", r)
		}
		out = append(out, r)
	}
	gen := out[0].Generation
	for _, r := range out {
		if r.Generation != gen {
			t.Fatalf("members in different generations: %+v", out)
		}
	}
	return out
}

func syncAll(t *testing.T, c *Coordinator, group string, results []JoinResult) []string {
	t.Helper()
	var leader JoinResult
	var calls []*SyncCall
	for _, r := range results {
		if r.MemberID == r.Leader {
			leader = r
			continue
		}
		calls = append(calls, c.Sync(SyncRequest{Group: group, MemberID: r.MemberID, Generation: r.Generation}))
	}
	for _, call := range calls {
		if isDone(call.Done()) {
			t.Fatalf("follower's sync completed before the leader's: %+v", call.res)
		}
	}
	plan := map[string][]byte{}
	for _, m := range leader.Members {
		plan[m.MemberID] = []byte("for-" + m.MemberID)
	}
	if len(leader.Members) != len(results) {
		t.Fatalf("leader got %d members, want %d", len(leader.Members), len(results))
	}
	ls := wait[SyncResult](t, c.Sync(SyncRequest{Group: group, MemberID: leader.MemberID, Generation: leader.Generation, Assignments: plan}))
	if ls.Err != nil || string(ls.Assignment) != "for-"+leader.MemberID {
		t.Fatalf("leader sync: %+v", ls)
	}
	ids := []string{leader.MemberID}
	for i, call := range calls {
		r := wait[SyncResult](t, call)
		if r.Err != nil || string(r.Assignment) != "for-"+call.m.id {
			t.Fatalf("follower %d sync: %+v", i, r)
		}
		ids = append(ids, call.m.id)
	}
	return ids
}

func TestSecondMemberTriggersRebalance(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 1)
	second := joinNew(t, c, joinReq("g", ""))
	if st, _, _ := c.stateOf("g"); st != PreparingRebalance {
		t.Fatalf("state %v after a new member joined", st)
	}
	if isDone(second.Done()) {
		t.Fatal("new member's join completed before the old member rejoined")
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: ids[0], Generation: 1}); err != kerr.RebalanceInProgress {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	first := wait[JoinResult](t, c.Join(joinReq("g", ids[0])))
	sr := wait[JoinResult](t, second)
	if first.Err != nil || sr.Err != nil || first.Generation != 2 || sr.Generation != 2 {
		t.Fatalf("rejoin: %+v / %+v", first, sr)
	}
	if first.Leader != ids[0] || len(first.Members) != 2 || len(sr.Members) != 0 {
		t.Fatalf("leader %s, members to leader %d, to follower %d", first.Leader, len(first.Members), len(sr.Members))
	}
	syncAll(t, c, "g", []JoinResult{first, sr})
}

func TestRebalanceTimeoutDropsMembersThatDidNotRejoin(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 2)
	req := joinReq("g", ids[0])
	req.RebalanceTimeout = 100 * time.Millisecond
	// Both members' rebalance timeouts count: lower the other one's too.
	c.mu.Lock()
	c.groups["g"].members[ids[1]].rebalanceTimeout = 100 * time.Millisecond
	c.mu.Unlock()
	res := wait[JoinResult](t, c.Join(req))
	if res.Err != nil || res.Generation != 3 || len(res.Members) != 1 {
		t.Fatalf("join after timeout: %+v", res)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: ids[1], Generation: 3}); err != kerr.UnknownMemberID {
		t.Fatalf("dropped member's heartbeat: %v", err)
	}
}

func TestSessionExpiryTriggersRebalance(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 2)
	c.mu.Lock()
	c.groups["g"].members[ids[1]].sessionTimeout = 50 * time.Millisecond
	c.heartbeat(c.groups["g"], c.groups["g"].members[ids[1]])
	c.mu.Unlock()
	// The leader keeps heartbeating; the other member goes silent.
	testutil.Eventually(t, 10*time.Second, "a rebalance", func() bool {
		return c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: ids[0], Generation: 2}) == kerr.RebalanceInProgress
	})
	res := wait[JoinResult](t, c.Join(joinReq("g", ids[0])))
	if res.Err != nil || len(res.Members) != 1 || res.Generation != 3 {
		t.Fatalf("rejoin: %+v", res)
	}
}

func TestLeaderSyncMissingFailsFollowersOnRebalance(t *testing.T) {
	cfg := testConfig()
	c := newTestCoordinator(t, cfg, newTestStore(t))
	leader := stableGroup(t, c, "g", 1)[0]
	a := joinNew(t, c, joinReq("g", ""))
	// Complete the rebalance with both members, then let the follower sync first.
	lr := wait[JoinResult](t, c.Join(joinReq("g", leader)))
	fr := wait[JoinResult](t, a)
	fs := c.Sync(SyncRequest{Group: "g", MemberID: fr.MemberID, Generation: fr.Generation})
	// A third member arrives before the leader syncs: the follower is told to rejoin.
	third := joinNew(t, c, joinReq("g", ""))
	if r := wait[SyncResult](t, fs); r.Err != kerr.RebalanceInProgress {
		t.Fatalf("follower's sync: %+v", r)
	}
	if r := wait[SyncResult](t, c.Sync(SyncRequest{Group: "g", MemberID: lr.MemberID, Generation: lr.Generation})); r.Err != kerr.RebalanceInProgress {
		t.Fatalf("leader's late sync: %+v", r)
	}
	third.Wait(canceled())
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestSyncValidation(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 1)
	bad := "roundrobin"
	for _, tc := range []struct {
		req  SyncRequest
		want error
	}{
		{SyncRequest{Group: "nope", MemberID: ids[0], Generation: 1}, kerr.UnknownMemberID},
		{SyncRequest{Group: "g", MemberID: "x", Generation: 1}, kerr.UnknownMemberID},
		{SyncRequest{Group: "g", MemberID: ids[0], Generation: 7}, kerr.IllegalGeneration},
		{SyncRequest{Group: "g", MemberID: ids[0], Generation: 1, Protocol: &bad}, kerr.InconsistentGroupProtocol},
	} {
		if r := wait[SyncResult](t, c.Sync(tc.req)); r.Err != tc.want {
			t.Errorf("sync %+v: %v, want %v", tc.req, r.Err, tc.want)
		}
	}
	// A Stable group's sync returns the current assignment again.
	if r := wait[SyncResult](t, c.Sync(SyncRequest{Group: "g", MemberID: ids[0], Generation: 1})); r.Err != nil || string(r.Assignment) != "for-"+ids[0] {
		t.Fatalf("repeat sync: %+v", r)
	}
}

func TestJoinValidation(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	short := joinReq("g", "")
	short.SessionTimeout = time.Millisecond
	long := joinReq("g", "")
	long.SessionTimeout = time.Hour
	noProto := joinReq("g", "")
	noProto.Protocols = nil
	for name, tc := range map[string]struct {
		req  JoinRequest
		want error
	}{
		"empty group":        {joinReq("", ""), kerr.InvalidGroupID},
		"short session":      {short, kerr.InvalidSessionTimeout},
		"long session":       {long, kerr.InvalidSessionTimeout},
		"no protocols":       {noProto, kerr.InconsistentGroupProtocol},
		"unknown member":     {joinReq("g", "ghost"), kerr.UnknownMemberID},
		"unknown in nogroup": {joinReq("fresh", "ghost"), kerr.UnknownMemberID},
	} {
		if r := wait[JoinResult](t, c.Join(tc.req)); r.Err != tc.want {
			t.Errorf("%s: %v, want %v", name, r.Err, tc.want)
		}
	}
	stableGroup(t, c, "g", 1)
	other := joinReq("g", "")
	other.Protocols = []Protocol{{Name: "roundrobin"}}
	if r := wait[JoinResult](t, c.Join(other)); r.Err != kerr.InconsistentGroupProtocol {
		t.Errorf("disjoint protocols: %v", r.Err)
	}
	otherType := joinReq("g", "")
	otherType.ProtocolType = "connect"
	if r := wait[JoinResult](t, c.Join(otherType)); r.Err != kerr.InconsistentGroupProtocol {
		t.Errorf("other protocol type: %v", r.Err)
	}
}

func TestProtocolSelectionByVotes(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	mk := func(names ...string) JoinRequest {
		r := joinReq("g", "")
		r.Protocols = nil
		for _, n := range names {
			r.Protocols = append(r.Protocols, Protocol{Name: n, Metadata: consumerMeta("t")})
		}
		return r
	}
	// a prefers range, b and c prefer cooperative-sticky; "only-a" is not common.
	reqs := []JoinRequest{mk("range", "cooperative-sticky", "only-a"), mk("cooperative-sticky", "range"), mk("cooperative-sticky", "range")}
	var calls []*JoinCall
	for i, r := range reqs {
		calls = append(calls, joinNew(t, c, r))
		if i == 0 {
			wait[JoinResult](t, calls[0])
		}
	}
	var pending []*JoinCall
	for i, call := range calls {
		r := reqs[i]
		r.MemberID = call.m.id
		pending = append(pending, c.Join(r))
	}
	for _, p := range pending {
		if r := wait[JoinResult](t, p); r.Err != nil || r.Protocol != "cooperative-sticky" {
			t.Fatalf("join: %+v", r)
		}
	}
}

func TestInitialRebalanceDelayGathersMembers(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 300 * time.Millisecond
	c := newTestCoordinator(t, cfg, newTestStore(t))
	a := joinNew(t, c, joinReq("g", ""))
	b := joinNew(t, c, joinReq("g", ""))
	ra, rb := wait[JoinResult](t, a), wait[JoinResult](t, b)
	if ra.Err != nil || rb.Err != nil || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("joins: %+v / %+v", ra, rb)
	}
	leader := ra
	if rb.MemberID == rb.Leader {
		leader = rb
	}
	if len(leader.Members) != 2 {
		t.Fatalf("first generation has %d members, want both", len(leader.Members))
	}
}

func TestLeaveGroup(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 2)
	errs, err := c.Leave("g", []LeavingMember{{MemberID: ids[1]}, {MemberID: "ghost"}, {InstanceID: "nobody"}})
	if err != nil || errs[0] != nil || errs[1] != kerr.UnknownMemberID || errs[2] != kerr.UnknownMemberID {
		t.Fatalf("leave: %v %v", errs, err)
	}
	if st, _, n := c.stateOf("g"); st != PreparingRebalance || n != 1 {
		t.Fatalf("after leave: %v with %d members", st, n)
	}
	res := wait[JoinResult](t, c.Join(joinReq("g", ids[0])))
	if res.Err != nil || len(res.Members) != 1 {
		t.Fatalf("rejoin: %+v", res)
	}
	if errs, err := c.Leave("g", []LeavingMember{{MemberID: ids[0]}}); err != nil || errs[0] != nil {
		t.Fatalf("last leave: %v %v", errs, err)
	}
	if st, _, _ := c.stateOf("g"); st != Empty {
		t.Fatalf("state %v after everyone left", st)
	}
	if errs, _ := c.Leave("missing", []LeavingMember{{MemberID: "x"}}); errs[0] != kerr.UnknownMemberID {
		t.Fatalf("leave from missing group: %v", errs)
	}
}

func TestLeaveDuringJoinAnswersTheJoin(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 2)
	// A follower with new subscriptions rejoins (a Stable follower with unchanged
	// metadata would be answered at once), then leaves while its join waits.
	req := joinReq("g", ids[1])
	req.Protocols = []Protocol{{Name: "range", Metadata: consumerMeta("t", "u")}}
	pending := c.Join(req)
	if isDone(pending.Done()) {
		t.Fatalf("rejoin with new metadata completed at once: %+v", pending.res)
	}
	if _, err := c.Leave("g", []LeavingMember{{MemberID: ids[1]}}); err != nil {
		t.Fatal(err)
	}
	if r := wait[JoinResult](t, pending); r.Err != kerr.UnknownMemberID {
		t.Fatalf("join of a member that left: %+v", r)
	}
}

func TestCanceledJoinDropsNewMember(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 1)
	newcomer := joinNew(t, c, joinReq("g", ""))
	if r := newcomer.Wait(canceled()); r.Err == nil {
		t.Fatalf("canceled wait: %+v", r)
	}
	res := wait[JoinResult](t, c.Join(joinReq("g", ids[0])))
	if res.Err != nil || len(res.Members) != 1 {
		t.Fatalf("the gone newcomer is still in the generation: %+v", res)
	}
}

func TestPendingMemberIDExpires(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableGroup(t, c, "g", 1)
	req := joinReq("g", "")
	req.SessionTimeout = 30 * time.Millisecond
	if r := wait[JoinResult](t, c.Join(req)); r.Err != kerr.MemberIDRequired {
		t.Fatalf("%+v", r)
	}
	// The leader rejoins; the rebalance waits for the pending id until it expires.
	res := wait[JoinResult](t, c.Join(joinReq("g", ids[0])))
	if res.Err != nil || len(res.Members) != 1 {
		t.Fatalf("rejoin: %+v", res)
	}
}

func TestMaxGroupSize(t *testing.T) {
	cfg := testConfig()
	cfg.MaxGroupSize = 1
	c := newTestCoordinator(t, cfg, newTestStore(t))
	stableGroup(t, c, "g", 1)
	if r := wait[JoinResult](t, c.Join(joinReq("g", ""))); r.Err != kerr.GroupMaxSizeReached {
		t.Fatalf("%+v", r)
	}
}

func TestPendingSyncExpiryRemovesMember(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	req := joinReq("g", "")
	req.RebalanceTimeout = 50 * time.Millisecond
	call := joinNew(t, c, req)
	r := wait[JoinResult](t, call)
	if r.Err != nil {
		t.Fatal(r)
	}
	// Never syncs: dropped after the rebalance timeout, and the group empties.
	testutil.Eventually(t, 10*time.Second, "the member to be dropped", func() bool {
		st, _, n := c.stateOf("g")
		return n == 0 && (st == Empty || st == Dead)
	})
}
