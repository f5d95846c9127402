package share

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/timer/timertest"
	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
)

func shareJoinReq(group, member string, topics ...string) HeartbeatRequest {
	return HeartbeatRequest{Group: group, MemberID: member, MemberEpoch: 0, Subscribed: topics, ClientID: "cl", ClientHost: "/127.0.0.1"}
}

func mustShare(t *testing.T, r HeartbeatResponse) HeartbeatResponse {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("share heartbeat: %v", r.Err)
	}
	return r
}

// assigned flattens an assignment into topic -> partitions.
func assigned(r HeartbeatResponse) map[string][]int32 {
	out := map[string][]int32{}
	if r.Assignment != nil {
		for _, tp := range *r.Assignment {
			out[tp.Topic] = tp.Partitions
		}
	}
	return out
}

// heartbeatAll heartbeats each member at its epoch and returns the assignments.
func heartbeatAll(t *testing.T, c testCoordinator, group string, epochs map[string]int32) map[string]map[string][]int32 {
	t.Helper()
	out := map[string]map[string][]int32{}
	for id, ep := range epochs {
		r := mustShare(t, c.Heartbeat(context.Background(), HeartbeatRequest{Group: group, MemberID: id, MemberEpoch: ep, Subscribed: []string{"t", "u"}}))
		epochs[id] = r.MemberEpoch
		out[id] = assigned(r)
	}
	return out
}

func TestShareJoinAssignsEveryPartition(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	r := mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	if r.MemberEpoch != 1 || r.HeartbeatInterval != 5*time.Second {
		t.Fatalf("first join: %+v", r)
	}
	if got := assigned(r); !slices.Equal(got["t"], []int32{0, 1, 2, 3}) {
		t.Fatalf("lone member's assignment %v, want all of t", got)
	}
	if (*r.Assignment)[0].TopicID != c.store.Current().Topic("t").ID {
		t.Fatal("assignment carries the wrong topic id")
	}
	r2 := mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m2", "t")))
	if r2.MemberEpoch != 2 || len(assigned(r2)["t"]) != 2 {
		t.Fatalf("second join: %+v %v", r2, assigned(r2))
	}
	// m1 learns of its smaller share on its next heartbeat, with a new epoch; a
	// heartbeat without its subscription still gets the assignment then.
	r1 := mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	if r1.MemberEpoch != 2 || r1.Assignment == nil {
		t.Fatalf("m1 heartbeat: %+v", r1)
	}
	all := append(slices.Clone(assigned(r1)["t"]), assigned(r2)["t"]...)
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3}) {
		t.Fatalf("two members hold %v, want each partition once", all)
	}
	// Nothing changed: no assignment in a heartbeat without a subscription.
	r1 = mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 2}))
	if r1.Assignment != nil || r1.MemberEpoch != 2 {
		t.Fatalf("steady heartbeat: %+v", r1)
	}
}

func TestShareMembersOutnumberingPartitionsShareThem(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	epochs := map[string]int32{}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		epochs[id] = mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", id, "u"))).MemberEpoch
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
	cfg.MemberRemoved = func(g, m string) { removed = append(removed, g+"/"+m) }
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m2", "t")))
	r := mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m2", MemberEpoch: -1}))
	if r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if !slices.Equal(removed, []string{"sg/m2"}) {
		t.Fatalf("removal hook saw %v", removed)
	}
	r = mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	if r.MemberEpoch != 3 || !slices.Equal(assigned(r)["t"], []int32{0, 1, 2, 3}) {
		t.Fatalf("after the leave m1 got %+v %v", r, assigned(r))
	}
	// A second leave, and a heartbeat of the departed member, find no member.
	if r := c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m2", MemberEpoch: -1}); !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("second leave: %v", r.Err)
	}
	if r := c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m2", MemberEpoch: 2}); !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("departed member's heartbeat: %v", r.Err)
	}
	mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: -1}))
	d := c.DescribeGroups(ctx, []string{"sg"})[0]
	if d.Err != nil || d.State != Empty || len(d.Members) != 0 || d.Epoch != 4 {
		t.Fatalf("after everyone left: %+v", d)
	}
}

func TestShareFencing(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m2", "t")))
	// m1 is at epoch 1 and the group at 2: its response carrying epoch 2 is lost, so it
	// heartbeats at 1 again, then at 2; both are accepted.
	mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}))
	mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 2}))
	for _, ep := range []int32{7, 3} {
		if r := c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: ep}); !errors.Is(r.Err, kerr.FencedMemberEpoch) {
			t.Fatalf("epoch %d: %v, want FENCED_MEMBER_EPOCH", ep, r.Err)
		}
	}
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m3", "t"))) // group epoch 3
	mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 2}))
	// m1 now at 3, previous 2: epoch 1 is two behind.
	if r := c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: 1}); !errors.Is(r.Err, kerr.FencedMemberEpoch) {
		t.Fatalf("two epochs behind: %v", r.Err)
	}
	// A fenced member rejoins with epoch 0 and its own id, and keeps its place.
	r := mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m1", "t")))
	if r.MemberEpoch != 3 || r.Assignment == nil {
		t.Fatalf("rejoin: %+v", r)
	}
	if r := c.Heartbeat(ctx, HeartbeatRequest{Group: "nope", MemberID: "m1", MemberEpoch: 1}); !errors.Is(r.Err, kerr.GroupIDNotFound) {
		t.Fatalf("heartbeat to a missing group: %v", r.Err)
	}
}

func TestShareHeartbeatValidation(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	empty := ""
	for name, req := range map[string]HeartbeatRequest{
		"no group":         {MemberID: "m", Subscribed: []string{"t"}},
		"no member id":     {Group: "g", Subscribed: []string{"t"}},
		"long member id":   {Group: "g", MemberID: "0123456789012345678901234567890123456789", Subscribed: []string{"t"}},
		"epoch -2":         {Group: "g", MemberID: "m", MemberEpoch: -2},
		"empty rack":       {Group: "g", MemberID: "m", RackID: &empty, Subscribed: []string{"t"}},
		"join, no topics":  {Group: "g", MemberID: "m"},
		"join, empty list": {Group: "g", MemberID: "m", Subscribed: []string{}},
	} {
		if r := c.Heartbeat(ctx, req); !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("%s: %v, want INVALID_REQUEST", name, r.Err)
		}
	}
}

func TestShareAndClassicGroupsKeepApart(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	stableClassicGroup(t, c.classic, "classic")
	if r := c.Heartbeat(ctx, shareJoinReq("classic", "m", "t")); !errors.Is(r.Err, kerr.GroupIDNotFound) {
		t.Fatalf("share join of a classic group: %v", r.Err)
	}
	// A classic group known only by its committed offsets holds its name too.
	offs := []metadata.CommittedOffset{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}
	if errs, err := c.classic.CommitOffsets(ctx, group.CommitRequest{Group: "simple", Generation: -1, Offsets: offs}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	// A new classic coordinator, as after a restart, knows the group by its offsets
	// alone.
	c.classic.Close()
	classic := group.New(group.Config{NodeID: 1, Logger: c.cfg.Logger}, c.store)
	t.Cleanup(func() { classic.Close() })
	classic.SetShareGroups(c.Coordinator)
	c.classic, c.Coordinator.classic = classic, classic
	if r := c.Heartbeat(ctx, shareJoinReq("simple", "m", "t")); !errors.Is(r.Err, kerr.GroupIDNotFound) {
		t.Fatalf("share join of an offsets-only group: %v", r.Err)
	}

	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m", "t")))
	if res := wait[group.JoinResult](t, c.classic.Join(classicJoinReq("sg"))); !errors.Is(res.Err, kerr.InconsistentGroupProtocol) {
		t.Fatalf("classic join of a share group: %v", res.Err)
	}
	if _, err := c.classic.CommitOffsets(ctx, group.CommitRequest{Group: "sg", Generation: -1, Offsets: offs}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("commit to a share group: %v", err)
	}
	stableClassicGroup(t, c.classic, "classic2")
	if d := c.DescribeGroups(ctx, []string{"classic2", "missing"}); !errors.Is(d[0].Err, kerr.GroupIDNotFound) || !errors.Is(d[1].Err, kerr.GroupIDNotFound) {
		t.Fatalf("share-describe of a classic and a missing group: %v, %v", d[0].Err, d[1].Err)
	}
	// DescribeGroups answers a share group as Kafka does below v6: Dead, no error.
	if d := c.classic.DescribeGroups(ctx, []string{"sg"})[0]; d.Err != nil || d.State != group.Dead {
		t.Fatalf("classic describe of a share group: %+v", d)
	}
}

// Of a share heartbeat and a classic join racing for a new id, exactly one gets the id
// (the two coordinators have separate locks; the id claim keeps the namespace one).
func TestShareAndClassicJoinsRace(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	for i := range 20 {
		id := "race-" + strconv.Itoa(i)
		var wg sync.WaitGroup
		var shareErr, classicErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			shareErr = c.Heartbeat(ctx, shareJoinReq(id, "m", "t")).Err
		}()
		go func() {
			defer wg.Done()
			classicErr = wait[group.JoinResult](t, c.classic.Join(classicJoinReq(id))).Err
		}()
		wg.Wait()
		if (shareErr == nil) == (classicErr == nil) {
			t.Fatalf("%s: share heartbeat %v, classic join %v: want exactly one to succeed", id, shareErr, classicErr)
		}
		if shareErr != nil && !errors.Is(shareErr, kerr.GroupIDNotFound) {
			t.Fatalf("%s: share heartbeat %v, want GROUP_ID_NOT_FOUND", id, shareErr)
		}
		if classicErr != nil && !errors.Is(classicErr, kerr.InconsistentGroupProtocol) {
			t.Fatalf("%s: classic join %v, want INCONSISTENT_GROUP_PROTOCOL", id, classicErr)
		}
	}
}

func TestShareSessionTimeoutRemovesMember(t *testing.T) {
	cfg := testConfig()
	cfg.SessionTimeout = 50 * time.Millisecond
	clock := &timertest.Manual{}
	cfg.Clock = clock
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "gone", "t")))
	cfg2 := HeartbeatRequest{Group: "sg", MemberID: "stays", Subscribed: []string{"t"}}
	r := mustShare(t, c.Heartbeat(ctx, cfg2))
	// "stays" heartbeats every 30 ms of the clock; "gone" never does again, so its
	// session (50 ms) ends at the second step and not before.
	// An answer carries the assignment only when it changed: keep the last one.
	var have map[string][]int32
	for step := 1; step <= 4; step++ {
		clock.Advance(30 * time.Millisecond)
		r = mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "stays", MemberEpoch: r.MemberEpoch}))
		if r.Assignment != nil {
			have = assigned(r)
		}
		d := c.DescribeGroups(ctx, []string{"sg"})[0]
		want := 2
		if step >= 2 {
			want = 1
		}
		if len(d.Members) != want {
			t.Fatalf("after %d ms: %d members, want %d: %+v", 30*step, len(d.Members), want, d.Members)
		}
		if want == 1 && d.Members[0].MemberID != "stays" {
			t.Fatalf("the wrong member expired: %+v", d.Members)
		}
	}
	for i := 0; len(have["t"]) != 4; i++ {
		if i == 100 {
			t.Fatalf("the remaining member never got every partition: %v", have)
		}
		clock.Advance(30 * time.Millisecond)
		r = mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "stays", MemberEpoch: r.MemberEpoch}))
		if r.Assignment != nil {
			have = assigned(r)
		}
	}
	if r := c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "gone", MemberEpoch: 1}); !errors.Is(r.Err, kerr.UnknownMemberID) {
		t.Fatalf("expired member's heartbeat: %v", r.Err)
	}
}

func TestShareAssignmentFollowsTopicChanges(t *testing.T) {
	store := newTestStore(t)
	c := newTestCoordinator(t, testConfig(), store)
	ctx := context.Background()
	r := mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m", "u", "later")))
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
		r = mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m", MemberEpoch: r.MemberEpoch}))
		if got := assigned(r); r.Assignment != nil && len(got["u"]) == 3 && len(got["later"]) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignment never followed the topics: %v", assigned(r))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memShareStates is an in-memory States.
type memShareStates struct {
	mu sync.Mutex
	st map[string][]PartitionState
}

func (m *memShareStates) ReadShareGroupState(_ context.Context, g string) ([]PartitionState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.st[g]), nil
}

func (m *memShareStates) AlterShareStartOffsets(_ context.Context, g string, offs []PartitionOffset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range offs {
		i := slices.IndexFunc(m.st[g], func(s PartitionState) bool { return s.Topic == o.Topic && s.Partition == o.Partition })
		if i < 0 {
			m.st[g] = append(m.st[g], PartitionState{Topic: o.Topic, Partition: o.Partition})
			i = len(m.st[g]) - 1
		}
		m.st[g][i] = PartitionState{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
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
	m.st[g] = slices.DeleteFunc(m.st[g], func(s PartitionState) bool { return slices.Contains(parts[s.Topic], s.Partition) })
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
	states := &memShareStates{st: map[string][]PartitionState{
		"sg":     {{Topic: "t", Partition: 1, StartOffset: 10, InFlight: 3, Acquired: 1, Archived: 1}, {Topic: "t", Partition: 0, StartOffset: 5}},
		"stored": {{Topic: "u", Partition: 0, StartOffset: 7}},
	}}
	cfg := testConfig()
	cfg.States = states
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	stableClassicGroup(t, c.classic, "classic")
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m", "t")))

	all, err := c.ListGroups(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Listing{{"sg", Stable}, {"stored", Empty}}; !slices.Equal(all, want) {
		t.Fatalf("list: %+v, want %+v", all, want)
	}
	if classic, err := c.classic.ListGroups(ctx, nil); err != nil || len(classic) != 1 || classic[0].Group != "classic" {
		t.Fatalf("classic list: %+v %v, want the classic group alone", classic, err)
	}
	if empty, _ := c.ListGroups(ctx, []string{"EMPTY"}); len(empty) != 1 || empty[0].Group != "stored" {
		t.Fatalf("list Empty: %+v", empty)
	}

	d := c.DescribeGroups(ctx, []string{"sg", "stored"})
	if d[0].Err != nil || d[0].State != Stable || len(d[0].Members) != 1 || d[0].Assignor != "simple" || d[0].Epoch != 1 {
		t.Fatalf("describe sg: %+v", d[0])
	}
	if m := d[0].Members[0]; m.MemberID != "m" || m.MemberEpoch != 1 || !slices.Equal(m.Subscribed, []string{"t"}) || len(m.Assignment) != 1 || len(m.Assignment[0].Partitions) != 4 {
		t.Fatalf("member: %+v", m)
	}
	if d[1].Err != nil || d[1].State != Empty {
		t.Fatalf("describe stored: %+v", d[1])
	}

	offs, err := c.GroupOffsets(ctx, "sg", nil)
	if err != nil || len(offs) != 2 || offs[0].Partition != 0 || offs[1].StartOffset != 10 || offs[1].InFlight != 3 {
		t.Fatalf("offsets: %+v %v", offs, err)
	}
	if offs, _ := c.GroupOffsets(ctx, "sg", map[string][]int32{"t": {1}}); len(offs) != 1 || offs[0].Partition != 1 {
		t.Fatalf("offsets of t/1: %+v", offs)
	}
	if _, err := c.GroupOffsets(ctx, "classic", nil); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("share offsets of a classic group: %v", err)
	}

	// A group with members can be neither altered nor deleted.
	if err := c.AlterGroupOffsets(ctx, "sg", []PartitionOffset{{Topic: "t", Partition: 0, StartOffset: 0}}); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("alter with members: %v", err)
	}
	if handled, err := c.DeleteGroup(ctx, "sg"); !handled || !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("delete with members: %v %v", handled, err)
	}
	mustShare(t, c.Heartbeat(ctx, HeartbeatRequest{Group: "sg", MemberID: "m", MemberEpoch: -1}))
	if err := c.AlterGroupOffsets(ctx, "sg", []PartitionOffset{{Topic: "t", Partition: 0, StartOffset: 42}}); err != nil {
		t.Fatal(err)
	}
	if offs, _ := c.GroupOffsets(ctx, "sg", map[string][]int32{"t": {0}}); len(offs) != 1 || offs[0].StartOffset != 42 {
		t.Fatalf("after alter: %+v", offs)
	}
	if err := c.DeleteGroupOffsets(ctx, "sg", map[string][]int32{"t": {0}}); err != nil {
		t.Fatal(err)
	}
	if offs, _ := c.GroupOffsets(ctx, "sg", nil); len(offs) != 1 || offs[0].Partition != 1 {
		t.Fatalf("after deleting t/0: %+v", offs)
	}

	// A group no longer there, or never there, is not the share coordinator's to
	// answer: DeleteGroups asks the classic coordinator then, which answers
	// GROUP_ID_NOT_FOUND. Nor is a classic group.
	for _, x := range []struct {
		id      string
		handled bool
	}{{"sg", true}, {"stored", true}, {"sg", false}, {"never", false}, {"classic", false}} {
		if handled, err := c.DeleteGroup(ctx, x.id); handled != x.handled || err != nil {
			t.Fatalf("delete %s: %v %v, want handled %v", x.id, handled, err, x.handled)
		}
	}
	if errs := c.classic.DeleteGroups(ctx, []string{"sg", "never"}); !errors.Is(errs[0], kerr.GroupIDNotFound) || !errors.Is(errs[1], kerr.GroupIDNotFound) {
		t.Fatalf("classic delete of deleted share group and of no group: %v", errs)
	}
	if len(states.st) != 0 {
		t.Fatalf("state left after delete: %v", states.st)
	}
	if d := c.DescribeGroups(ctx, []string{"sg"})[0]; !errors.Is(d.Err, kerr.GroupIDNotFound) {
		t.Fatalf("deleted group described: %+v", d)
	}
	// The name is free again, for either kind of group.
	mustShare(t, c.Heartbeat(ctx, shareJoinReq("sg", "m", "t")))
}

func TestCollector(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	mustShare(t, c.Heartbeat(context.Background(), shareJoinReq("sg", "m1", "t")))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			series[key] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"shale_share_group_members,group=sg,state=Stable": 1,
		"shale_share_group_epoch,group=sg":                1,
	}
	if !maps.Equal(series, want) {
		t.Fatalf("series %v, want %v", series, want)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	store := newTestStore(t)
	before := runtime.NumGoroutine()
	c := New(testConfig(), store)
	// A member's session timer.
	mustShare(t, c.Heartbeat(context.Background(), shareJoinReq("sg", "m", "t")))
	c.Close()
	testutil.Eventually(t, 10*time.Second, "the coordinator's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}
