package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func staticReq(group, member, instance string) JoinRequest {
	r := joinReq(group, member)
	r.InstanceID = instance
	return r
}

// stableStatic forms a Stable group of static members i0..i(n-1); it returns member ids
// by instance.
func stableStatic(t *testing.T, c *Coordinator, n int) map[string]string {
	t.Helper()
	var calls []*JoinCall
	var instances []string
	for i := 0; i < n; i++ {
		inst := "i" + string(rune('0'+i))
		instances = append(instances, inst)
		call := c.Join(staticReq("g", "", inst))
		if i == 0 {
			if r := wait[JoinResult](t, call); r.Err != nil {
				t.Fatalf("static join without MEMBER_ID_REQUIRED: %+v", r)
			}
		}
		calls = append(calls, call)
	}
	var pending []*JoinCall
	for i, call := range calls {
		pending = append(pending, c.Join(staticReq("g", call.m.id, instances[i])))
	}
	var results []JoinResult
	for _, p := range pending {
		r := wait[JoinResult](t, p)
		if r.Err != nil {
			t.Fatalf("static rejoin: %+v", r)
		}
		results = append(results, r)
	}
	syncAll(t, c, "g", results)
	out := map[string]string{}
	for i, r := range results {
		out[instances[i]] = r.MemberID
	}
	return out
}

func TestStaticMemberRestartKeepsAssignment(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableStatic(t, c, 2)
	_, gen, _ := c.stateOf("g")
	// i1 restarts: it joins with its instance id and no member id.
	res := wait[JoinResult](t, c.Join(staticReq("g", "", "i1")))
	if res.Err != nil || res.MemberID == ids["i1"] || res.Generation != gen {
		t.Fatalf("restarted static member: %+v (old id %s, generation %d)", res, ids["i1"], gen)
	}
	if st, g2, _ := c.stateOf("g"); st != Stable || g2 != gen {
		t.Fatalf("a static restart rebalanced: %v generation %d", st, g2)
	}
	sr := wait[SyncResult](t, c.Sync(SyncRequest{Group: "g", MemberID: res.MemberID, InstanceID: "i1", Generation: gen}))
	if sr.Err != nil || string(sr.Assignment) != "for-"+ids["i1"] {
		t.Fatalf("restarted member's assignment: %+v", sr)
	}
	// The old incarnation is fenced.
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: ids["i1"], InstanceID: "i1", Generation: gen}); err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's heartbeat: %v", err)
	}
	if _, err := c.CommitOffsets(t.Context(), CommitRequest{Group: "g", MemberID: ids["i1"], InstanceID: "i1", Generation: gen, Offsets: offsets("t", 0, 5)}); err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's commit: %v", err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: res.MemberID, InstanceID: "i1", Generation: gen}); err != nil {
		t.Fatalf("new incarnation's heartbeat: %v", err)
	}
}

func TestStaticLeaderRestartSkipsAssignment(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableStatic(t, c, 2)
	c.mu.Lock()
	leaderInst := c.groups["g"].members[c.groups["g"].leader].instanceID
	c.mu.Unlock()

	old := staticReq("g", "", leaderInst)
	res := wait[JoinResult](t, c.Join(old))
	// Before v9 the restarted leader is told the old leader id, so it acts as a follower.
	if res.Err != nil || res.Leader != ids[leaderInst] || res.SkipAssignment || len(res.Members) != 0 {
		t.Fatalf("pre-v9 restarted leader: %+v", res)
	}
	v9 := staticReq("g", "", leaderInst)
	v9.SupportsSkipAssignment = true
	res = wait[JoinResult](t, c.Join(v9))
	if res.Err != nil || res.Leader != res.MemberID || !res.SkipAssignment || len(res.Members) != 2 {
		t.Fatalf("v9 restarted leader: %+v", res)
	}
	if st, _, _ := c.stateOf("g"); st != Stable {
		t.Fatalf("state %v", st)
	}
}

func TestStaticMemberReplacedDuringJoinIsFenced(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ids := stableStatic(t, c, 2)
	// i0 rejoins with new metadata: a rebalance that waits for i1.
	r0 := staticReq("g", ids["i0"], "i0")
	r0.Protocols = []Protocol{{Name: "range", Metadata: consumerMeta("t", "u")}}
	p0 := c.Join(r0)
	// i0 restarts meanwhile: the waiting join of its old incarnation is fenced.
	p0b := c.Join(staticReq("g", "", "i0"))
	if r := wait[JoinResult](t, p0); r.Err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's join: %+v", r)
	}
	p1 := c.Join(staticReq("g", ids["i1"], "i1"))
	a, b := wait[JoinResult](t, p0b), wait[JoinResult](t, p1)
	if a.Err != nil || b.Err != nil || a.Generation != b.Generation {
		t.Fatalf("rebalance: %+v / %+v", a, b)
	}
}

func TestStaticLeaveByInstanceID(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	stableStatic(t, c, 2)
	errs, err := c.Leave("g", []LeavingMember{{InstanceID: "i1"}, {MemberID: "wrong", InstanceID: "i0"}})
	if err != nil || errs[0] != nil || errs[1] != kerr.FencedInstanceID {
		t.Fatalf("leave: %v %v", errs, err)
	}
	if st, _, n := c.stateOf("g"); st != PreparingRebalance || n != 1 {
		t.Fatalf("after leave: %v %d", st, n)
	}
}
