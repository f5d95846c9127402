package group

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

func shareJoinReq(group, member string, topics ...string) ShareHeartbeatRequest {
	return ShareHeartbeatRequest{Group: group, MemberID: member, MemberEpoch: 0, Subscribed: topics, ClientID: "cl", ClientHost: "/127.0.0.1"}
}

func mustShare(t *testing.T, r ShareHeartbeatResponse) ShareHeartbeatResponse {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("share heartbeat: %v", r.Err)
	}
	return r
}

// assigned flattens an assignment into topic -> partitions.
func assigned(r ShareHeartbeatResponse) map[string][]int32 {
	out := map[string][]int32{}
	if r.Assignment != nil {
		for _, tp := range *r.Assignment {
			out[tp.Topic] = tp.Partitions
		}
	}
	return out
}

// heartbeatAll heartbeats each member at its epoch and returns the assignments.
func heartbeatAll(t *testing.T, c *Coordinator, group string, epochs map[string]int32) map[string]map[string][]int32 {
	t.Helper()
	out := map[string]map[string][]int32{}
	for id, ep := range epochs {
		r := mustShare(t, c.ShareHeartbeat(context.Background(), ShareHeartbeatRequest{Group: group, MemberID: id, MemberEpoch: ep, Subscribed: []string{"t", "u"}}))
		epochs[id] = r.MemberEpoch
		out[id] = assigned(r)
	}
	return out
}

func TestShareJoinAssignsEveryPartition(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	r := mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	if r.MemberEpoch != 1 || r.HeartbeatInterval != 5*time.Second {
		t.Fatalf("first join: %+v", r)
	}
	if got := assigned(r); !slices.Equal(got["t"], []int32{0, 1, 2, 3}) {
		t.Fatalf("lone member's assignment %v, want all of t", got)
	}
	if (*r.Assignment)[0].TopicID != c.store.Current().Topic("t").ID {
		t.Fatal("assignment carries the wrong topic id")
	}
	r2 := mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m2", "t")))
	if r2.MemberEpoch != 2 || len(assigned(r2)["t"]) != 2 {
		t.Fatalf("second join: %+v %v", r2, assigned(r2))
	}
	// m1 learns of its smaller share on its next heartbeat, with a new epoch; a
	// heartbeat without its subscription still gets the assignment then.
	r1 := mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	if r1.MemberEpoch != 2 || r1.Assignment == nil {
		t.Fatalf("m1 heartbeat: %+v", r1)
	}
	all := append(slices.Clone(assigned(r1)["t"]), assigned(r2)["t"]...)
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3}) {
		t.Fatalf("two members hold %v, want each partition once", all)
	}
	// Nothing changed: no assignment in a heartbeat without a subscription.
	r1 = mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 2}))
	if r1.Assignment != nil || r1.MemberEpoch != 2 {
		t.Fatalf("steady heartbeat: %+v", r1)
	}
}

func TestShareMembersOutnumberingPartitionsShareThem(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	epochs := map[string]int32{}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		epochs[id] = mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", id, "u"))).MemberEpoch
	}
	holders := map[int32]int{}
	for id, a := range heartbeatAll(t, c, "sg", epochs) {
		if len(a["u"]) != 1 {
			t.Fatalf("member %s holds %v of u, want exactly one partition", id, a["u"])
		}
		holders[a["u"][0]]++
	}
	// Five members on two partitions: three on one, two on the other.
	if len(holders) != 2 || min(holders[0], holders[1]) != 2 || max(holders[0], holders[1]) != 3 {
		t.Fatalf("holders per partition %v", holders)
	}
}

func TestShareAssignorSubscriptions(t *testing.T) {
	sg := &shareGroup{members: map[string]*shareMember{}, topics: map[string]shareTopic{"t": {parts: 4}, "u": {parts: 1}}}
	for _, m := range []struct {
		id   string
		subs []string
	}{{"a", []string{"t", "u"}}, {"b", []string{"t"}}, {"c", []string{"u"}}} {
		sg.members[m.id] = &shareMember{id: m.id, subscribed: m.subs}
	}
	sg.assign()
	if a := sg.members["a"].assignment; len(a["t"]) != 2 || len(a["u"]) != 1 {
		t.Fatalf("a: %v", a)
	}
	if b := sg.members["b"].assignment; len(b["t"]) != 2 || len(b["u"]) != 0 {
		t.Fatalf("b: %v", b)
	}
	if c := sg.members["c"].assignment; len(c["t"]) != 0 || !slices.Equal(c["u"], []int32{0}) {
		t.Fatalf("c: %v", c)
	}
	ts := append(slices.Clone(sg.members["a"].assignment["t"]), sg.members["b"].assignment["t"]...)
	slices.Sort(ts)
	if !slices.Equal(ts, []int32{0, 1, 2, 3}) {
		t.Fatalf("t dealt as %v", ts)
	}
}

func TestShareLeaveReassigns(t *testing.T) {
	var removed []string
	cfg := testConfig()
	cfg.ShareMemberRemoved = func(g, m string) { removed = append(removed, g+"/"+m) }
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m2", "t")))
	r := mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m2", MemberEpoch: -1}))
	if r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if !slices.Equal(removed, []string{"sg/m2"}) {
		t.Fatalf("removal hook saw %v", removed)
	}
	r = mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	if r.MemberEpoch != 3 || !slices.Equal(assigned(r)["t"], []int32{0, 1, 2, 3}) {
		t.Fatalf("after the leave m1 got %+v %v", r, assigned(r))
	}
	// A second leave, and a heartbeat of the departed member, find no member.
	if r := c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m2", MemberEpoch: -1}); !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("second leave: %v", r.Err)
	}
	if r := c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m2", MemberEpoch: 2}); !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("departed member's heartbeat: %v", r.Err)
	}
	mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: -1}))
	d := c.DescribeShareGroups(ctx, []string{"sg"})[0]
	if d.Err != nil || d.State != ShareEmpty || len(d.Members) != 0 || d.Epoch != 4 {
		t.Fatalf("after everyone left: %+v", d)
	}
}

func TestShareFencing(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m2", "t")))
	// m1 is at epoch 1 and the group at 2: its response carrying epoch 2 is lost, so it
	// heartbeats at 1 again, then at 2; both are accepted.
	mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 2}))
	for _, ep := range []int32{7, 3} {
		if r := c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: ep}); !errors.Is(r.Err, kerr.FencedMemberEpoch) {
			t.Fatalf("epoch %d: %v, want FENCED_MEMBER_EPOCH", ep, r.Err)
		}
	}
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m3", "t"))) // group epoch 3
	mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 2}))
	// m1 now at 3, previous 2: epoch 1 is two behind.
	if r := c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}); !errors.Is(r.Err, kerr.FencedMemberEpoch) {
		t.Fatalf("two epochs behind: %v", r.Err)
	}
	// A fenced member rejoins with epoch 0 and its own id, and keeps its place.
	r := mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	if r.MemberEpoch != 3 || r.Assignment == nil {
		t.Fatalf("rejoin: %+v", r)
	}
	if r := c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "nope", MemberID: "m1", MemberEpoch: 1}); !errors.Is(r.Err, kerr.GroupIDNotFound) {
		t.Fatalf("heartbeat to a missing group: %v", r.Err)
	}
}

func TestShareHeartbeatValidation(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	empty := ""
	for name, req := range map[string]ShareHeartbeatRequest{
		"no group":         {MemberID: "m", Subscribed: []string{"t"}},
		"no member id":     {Group: "g", Subscribed: []string{"t"}},
		"long member id":   {Group: "g", MemberID: "0123456789012345678901234567890123456789", Subscribed: []string{"t"}},
		"epoch -2":         {Group: "g", MemberID: "m", MemberEpoch: -2},
		"empty rack":       {Group: "g", MemberID: "m", RackID: &empty, Subscribed: []string{"t"}},
		"join, no topics":  {Group: "g", MemberID: "m"},
		"join, empty list": {Group: "g", MemberID: "m", Subscribed: []string{}},
	} {
		if r := c.ShareHeartbeat(ctx, req); !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("%s: %v, want INVALID_REQUEST", name, r.Err)
		}
	}
}

func TestShareAndClassicGroupsKeepApart(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	stableGroup(t, c, "classic", 1)
	if r := c.ShareHeartbeat(ctx, shareJoinReq("classic", "m", "t")); !errors.Is(r.Err, kerr.GroupIDNotFound) {
		t.Fatalf("share join of a classic group: %v", r.Err)
	}
	// A classic group known only by its committed offsets holds its name too.
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: offsets("t", 0, 1)}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	delete(c.groups, "simple")
	c.mu.Unlock()
	if r := c.ShareHeartbeat(ctx, shareJoinReq("simple", "m", "t")); !errors.Is(r.Err, kerr.GroupIDNotFound) {
		t.Fatalf("share join of an offsets-only group: %v", r.Err)
	}

	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m", "t")))
	req := joinReq("sg", "")
	if res := wait[JoinResult](t, c.Join(req)); !errors.Is(res.Err, kerr.InconsistentGroupProtocol) {
		t.Fatalf("classic join of a share group: %v", res.Err)
	}
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "sg", Generation: -1, Offsets: offsets("t", 0, 1)}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("commit to a share group: %v", err)
	}
	if d := c.DescribeShareGroups(ctx, []string{"classic", "missing"}); !errors.Is(d[0].Err, kerr.GroupIDNotFound) || !errors.Is(d[1].Err, kerr.GroupIDNotFound) {
		t.Fatalf("share-describe of a classic and a missing group: %v, %v", d[0].Err, d[1].Err)
	}
	// DescribeGroups answers a share group as Kafka does below v6: Dead, no error.
	if d := c.DescribeGroups(ctx, []string{"sg"})[0]; d.Err != nil || d.State != Dead {
		t.Fatalf("classic describe of a share group: %+v", d)
	}
}

func TestShareSessionTimeoutRemovesMember(t *testing.T) {
	cfg := testConfig()
	cfg.ShareSessionTimeout = 50 * time.Millisecond
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "gone", "t")))
	cfg2 := ShareHeartbeatRequest{Group: "sg", MemberID: "stays", Subscribed: []string{"t"}}
	r := mustShare(t, c.ShareHeartbeat(ctx, cfg2))
	// "stays" keeps heartbeating; "gone" never does again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "stays", MemberEpoch: r.MemberEpoch}))
		d := c.DescribeShareGroups(ctx, []string{"sg"})[0]
		if len(d.Members) == 1 {
			if d.Members[0].MemberID != "stays" {
				t.Fatalf("the wrong member expired: %+v", d.Members)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the silent member was never removed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for r.Assignment == nil || len(assigned(r)["t"]) != 4 {
		r = mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "stays", MemberEpoch: r.MemberEpoch}))
		if time.Now().After(deadline) {
			t.Fatalf("the remaining member never got every partition: %v", assigned(r))
		}
	}
	if r := c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "gone", MemberEpoch: 1}); !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("expired member's heartbeat: %v", r.Err)
	}
}

func TestShareAssignmentFollowsTopicChanges(t *testing.T) {
	store := newTestStore(t)
	c := newTestCoordinator(t, testConfig(), store)
	ctx := context.Background()
	r := mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m", "u", "later")))
	if got := assigned(r); len(got) != 1 || len(got["u"]) != 2 {
		t.Fatalf("before: %v", got)
	}
	if err := store.CreatePartitions(ctx, []metadata.PartitionsSpec{{Topic: "u", Count: 3}}, false)[0]; err != nil {
		t.Fatal(err)
	}
	if res := store.CreateTopics(ctx, []metadata.TopicSpec{{Name: "later", NumPartitions: 1, ReplicationFactor: 1}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m", MemberEpoch: r.MemberEpoch}))
		if got := assigned(r); r.Assignment != nil && len(got["u"]) == 3 && len(got["later"]) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignment never followed the topics: %v", assigned(r))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memShareStates is an in-memory ShareStates.
type memShareStates struct {
	mu sync.Mutex
	st map[string][]SharePartitionState
}

func (m *memShareStates) ReadShareGroupState(_ context.Context, g string) ([]SharePartitionState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.st[g]), nil
}

func (m *memShareStates) AlterShareStartOffsets(_ context.Context, g string, offs []SharePartitionOffset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range offs {
		i := slices.IndexFunc(m.st[g], func(s SharePartitionState) bool { return s.Topic == o.Topic && s.Partition == o.Partition })
		if i < 0 {
			m.st[g] = append(m.st[g], SharePartitionState{Topic: o.Topic, Partition: o.Partition})
			i = len(m.st[g]) - 1
		}
		m.st[g][i] = SharePartitionState{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
	}
	return nil
}

func (m *memShareStates) DeleteShareGroupState(_ context.Context, g string, parts map[string][]int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if parts == nil {
		delete(m.st, g)
		return nil
	}
	m.st[g] = slices.DeleteFunc(m.st[g], func(s SharePartitionState) bool { return slices.Contains(parts[s.Topic], s.Partition) })
	if len(m.st[g]) == 0 {
		delete(m.st, g)
	}
	return nil
}

func (m *memShareStates) ListShareStateGroups(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.st)), nil
}

func TestShareGroupAdmin(t *testing.T) {
	states := &memShareStates{st: map[string][]SharePartitionState{
		"sg":     {{Topic: "t", Partition: 1, StartOffset: 10, InFlight: 3, Acquired: 1, Archived: 1}, {Topic: "t", Partition: 0, StartOffset: 5}},
		"stored": {{Topic: "u", Partition: 0, StartOffset: 7}},
	}}
	cfg := testConfig()
	cfg.ShareStates = states
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	stableGroup(t, c, "classic", 1)
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m", "t")))

	all, err := c.ListGroups(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range all {
		got[l.Group] = l.Type + "/" + l.StateName() + "/" + l.ProtocolType
	}
	want := map[string]string{"classic": "classic/Stable/consumer", "sg": "share/Stable/share", "stored": "share/Empty/share"}
	if !maps.Equal(got, want) {
		t.Fatalf("list: %v, want %v", got, want)
	}
	if empty, _ := c.ListGroups(ctx, []string{"EMPTY"}); len(empty) != 1 || empty[0].Group != "stored" {
		t.Fatalf("list Empty: %+v", empty)
	}

	d := c.DescribeShareGroups(ctx, []string{"sg", "stored"})
	if d[0].Err != nil || d[0].State != ShareStable || len(d[0].Members) != 1 || d[0].Assignor != "simple" || d[0].Epoch != 1 {
		t.Fatalf("describe sg: %+v", d[0])
	}
	if m := d[0].Members[0]; m.MemberID != "m" || m.MemberEpoch != 1 || !slices.Equal(m.Subscribed, []string{"t"}) || len(m.Assignment) != 1 || len(m.Assignment[0].Partitions) != 4 {
		t.Fatalf("member: %+v", m)
	}
	if d[1].Err != nil || d[1].State != ShareEmpty {
		t.Fatalf("describe stored: %+v", d[1])
	}

	offs, err := c.ShareGroupOffsets(ctx, "sg", nil)
	if err != nil || len(offs) != 2 || offs[0].Partition != 0 || offs[1].StartOffset != 10 || offs[1].InFlight != 3 {
		t.Fatalf("offsets: %+v %v", offs, err)
	}
	if offs, _ := c.ShareGroupOffsets(ctx, "sg", map[string][]int32{"t": {1}}); len(offs) != 1 || offs[0].Partition != 1 {
		t.Fatalf("offsets of t/1: %+v", offs)
	}
	if _, err := c.ShareGroupOffsets(ctx, "classic", nil); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("share offsets of a classic group: %v", err)
	}

	// A group with members can be neither altered nor deleted.
	if err := c.AlterShareGroupOffsets(ctx, "sg", []SharePartitionOffset{{Topic: "t", Partition: 0, StartOffset: 0}}); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("alter with members: %v", err)
	}
	if errs := c.DeleteGroups(ctx, []string{"sg"}); !errors.Is(errs[0], kerr.NonEmptyGroup) {
		t.Fatalf("delete with members: %v", errs[0])
	}
	mustShare(t, c.ShareHeartbeat(ctx, ShareHeartbeatRequest{Group: "sg", MemberID: "m", MemberEpoch: -1}))
	if err := c.AlterShareGroupOffsets(ctx, "sg", []SharePartitionOffset{{Topic: "t", Partition: 0, StartOffset: 42}}); err != nil {
		t.Fatal(err)
	}
	if offs, _ := c.ShareGroupOffsets(ctx, "sg", map[string][]int32{"t": {0}}); len(offs) != 1 || offs[0].StartOffset != 42 {
		t.Fatalf("after alter: %+v", offs)
	}
	if err := c.DeleteShareGroupOffsets(ctx, "sg", map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if offs, _ := c.ShareGroupOffsets(ctx, "sg", nil); len(offs) != 1 || offs[0].Partition != 1 {
		t.Fatalf("after deleting t/0: %+v", offs)
	}

	errs := c.DeleteGroups(ctx, []string{"sg", "stored", "sg", "never"})
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], kerr.GroupIDNotFound) || !errors.Is(errs[3], kerr.GroupIDNotFound) {
		t.Fatalf("delete: %v", errs)
	}
	if len(states.st) != 0 {
		t.Fatalf("state left after delete: %v", states.st)
	}
	if d := c.DescribeShareGroups(ctx, []string{"sg"})[0]; !errors.Is(d.Err, kerr.GroupIDNotFound) {
		t.Fatalf("deleted group described: %+v", d)
	}
	// The name is free again, for either kind of group.
	mustShare(t, c.ShareHeartbeat(ctx, shareJoinReq("sg", "m", "t")))
}
