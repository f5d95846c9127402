package protocol_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// startShareBroker starts a group broker whose share-group sessions last sessionTimeout
// and whose members heartbeat every second (franz-go's floor).
func startShareGroupBroker(t testing.TB, sessionTimeout time.Duration) *groupBroker {
	t.Helper()
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	sgcfg := &sharegroup.Config{NodeID: 1, Logger: quietLogger(), SessionTimeout: sessionTimeout, HeartbeatInterval: time.Second}
	tb := launchShareGroups(t, t.TempDir(), nil, brokerConfig(), &gcfg, sgcfg, nil)
	return &groupBroker{testBroker: tb, groups: tb.groups}
}

func shareHeartbeat(rc *rawConn, groupID, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, groupID, member, epoch, topics
	return rc.roundTrip(req).(*kmsg.ShareGroupHeartbeatResponse)
}

func TestShareGroupAPIsRaw(t *testing.T) {
	gb := startShareGroupBroker(t, 45*time.Second)
	gb.createTopic("q", 1, nil)
	rc := dialRaw(t, gb.addr)

	// Advertised.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	want := map[int16][2]int16{76: {0, 1}, 77: {0, 1}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0}}
	for _, k := range rc.roundTrip(av).(*kmsg.ApiVersionsResponse).ApiKeys {
		if w, ok := want[k.ApiKey]; ok && k.MinVersion == w[0] && k.MaxVersion == w[1] {
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not advertised as expected: %v", want)
	}

	// Two members on one partition both get it.
	qid := gb.store.Current().Topic("q").ID
	for i, m := range []string{"member-a", "member-b"} {
		r := shareHeartbeat(rc, "sg", m, 0, []string{"q"})
		if r.ErrorCode != 0 || r.MemberEpoch != int32(i+1) || r.HeartbeatIntervalMillis != 1000 || r.MemberID == nil || *r.MemberID != m {
			t.Fatalf("join %s: %+v", m, r)
		}
		if r.Assignment == nil || len(r.Assignment.TopicPartitions) != 1 || r.Assignment.TopicPartitions[0].TopicID != qid ||
			!slices.Equal(r.Assignment.TopicPartitions[0].Partitions, []int32{0}) {
			t.Fatalf("join %s: assignment %+v", m, r.Assignment)
		}
	}
	if r := shareHeartbeat(rc, "sg", "member-a", 9, nil); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: %+v", r)
	}
	if r := shareHeartbeat(rc, "sg", "nobody", 1, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %+v", r)
	}
	if r := shareHeartbeat(rc, "sg", "member-c", 0, nil); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join without topics: %+v", r)
	}

	// Describe.
	dreq := kmsg.NewPtrShareGroupDescribeRequest()
	dreq.GroupIDs, dreq.IncludeAuthorizedOperations = []string{"sg", "missing"}, true
	dresp := rc.roundTrip(dreq).(*kmsg.ShareGroupDescribeResponse)
	if len(dresp.Groups) != 2 {
		t.Fatalf("describe: %+v", dresp)
	}
	sg := dresp.Groups[0]
	if sg.ErrorCode != 0 || sg.GroupState != "Stable" || sg.GroupEpoch != 2 || sg.Assignor != "simple" || len(sg.Members) != 2 || sg.AuthorizedOperations == -2147483648 {
		t.Fatalf("describe sg: %+v", sg)
	}
	for _, m := range sg.Members {
		if len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "q" || !slices.Equal(m.SubscribedTopicNames, []string{"q"}) {
			t.Fatalf("member %+v", m)
		}
	}
	if dresp.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe missing: %+v", dresp.Groups[1])
	}

	// A classic join of the share group, and a share join of a classic group.
	if r := joinV(rc, 5, "sg", ""); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a share group: %+v", r)
	}
	if r := joinV(rc, 3, "classic", ""); r.ErrorCode != 0 {
		t.Fatalf("classic join: %+v", r)
	}
	if r := shareHeartbeat(rc, "classic", "member-a", 0, []string{"q"}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share join of a classic group: %+v", r)
	}

	// ListGroups: every type without a filter; by type and state from v5.
	list := func(version int16, states, types []string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter, req.TypesFilter = version, states, types
		out := map[string]string{}
		for _, g := range rc.roundTrip(req).(*kmsg.ListGroupsResponse).Groups {
			out[g.Group] = g.GroupType + "/" + g.GroupState + "/" + g.ProtocolType
		}
		return out
	}
	if got := list(5, nil, nil); len(got) != 2 || got["sg"] != "share/Stable/share" {
		t.Fatalf("list v5: %v", got)
	}
	if got := list(5, nil, []string{"Share"}); len(got) != 1 || got["sg"] == "" {
		t.Fatalf("list share: %v", got)
	}
	if got := list(5, nil, []string{"classic"}); len(got) != 1 || got["classic"] == "" {
		t.Fatalf("list classic: %v", got)
	}
	if got := list(5, []string{"Empty"}, []string{"share"}); len(got) != 0 {
		t.Fatalf("list empty share groups: %v", got)
	}
	if got := list(2, nil, nil); len(got) != 2 {
		t.Fatalf("list v2: %v", got)
	}

	// DescribeGroups answers a share group as Kafka does below v6: Dead.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{"sg"}
	if g := rc.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != 0 || g.State != "Dead" {
		t.Fatalf("DescribeGroups of a share group: %+v", g)
	}

	// DeleteGroups: not while it has members.
	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = 2, []string{"sg"}
		return rc.roundTrip(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with members: %v", kerr.ErrorForCode(code))
	}
	for _, m := range []string{"member-a", "member-b"} {
		if r := shareHeartbeat(rc, "sg", m, -1, nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
			t.Fatalf("leave %s: %+v", m, r)
		}
	}
	if got := list(5, []string{"Empty"}, []string{"share"}); got["sg"] != "share/Empty/share" {
		t.Fatalf("list after the leaves: %v", got)
	}
	if code := del(); code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	if code := del(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete again: %v", kerr.ErrorForCode(code))
	}
}

// describeShare describes group through kadm, waiting until cond holds.
func describeShare(t *testing.T, adm *kadm.Client, groupID, what string, cond func(kadm.DescribedShareGroup) bool) kadm.DescribedShareGroup {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ds, err := adm.DescribeShareGroups(ctx, groupID)
		cancel()
		if err == nil {
			if d := ds[groupID]; d.Err == nil && cond(d) {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: gave up waiting; last %+v %v", what, ds[groupID], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShareGroupWithFranzGo runs franz-go's share consumers: three members on a
// one-partition topic all hold the partition; a member that closes leaves; a member that
// stops heartbeating is removed after group.share.session.timeout.ms.
func TestShareGroupWithFranzGo(t *testing.T) {
	gb := startShareGroupBroker(t, 3*time.Second)
	gb.createTopic("work", 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients []*kgo.Client
	for range 3 {
		cl := gb.client(kgo.ShareGroup("workers"), kgo.ConsumeTopics("work"), kgo.ClientID("worker"))
		clients = append(clients, cl)
		// Polling drives the client; records need ShareFetch, which this test does not
		// look at.
		go func() {
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
	}
	adm := gb.admin()
	d := describeShare(t, adm, "workers", "three members", func(d kadm.DescribedShareGroup) bool {
		if len(d.Members) != 3 {
			return false
		}
		for _, m := range d.Members {
			if ps := m.Assignment["work"]; len(ps) != 1 || len(m.Assignment) != 1 || m.MemberEpoch != d.GroupEpoch {
				return false
			}
			if _, ok := m.Assignment["work"][0]; !ok {
				return false
			}
		}
		return true
	})
	if d.GroupState != "Stable" || d.Assignor != "simple" || d.Coordinator.NodeID != 1 {
		t.Fatalf("described: %+v", d)
	}
	listed, err := adm.ListGroupsByType(ctxTimeout(t, 10*time.Second), []string{"share"})
	if err != nil || len(listed) != 1 || listed["workers"].GroupType != "share" || listed["workers"].State != "Stable" {
		t.Fatalf("listed: %+v %v", listed, err)
	}

	// Close leaves the group at once.
	clients[0].Close()
	describeShare(t, adm, "workers", "two members after a close", func(d kadm.DescribedShareGroup) bool { return len(d.Members) == 2 })

	// A raw member that joins and then goes silent is removed after the session timeout;
	// the franz-go members stay.
	rc := dialRaw(t, gb.addr)
	if r := shareHeartbeat(rc, "workers", "silent-member", 0, []string{"work"}); r.ErrorCode != 0 {
		t.Fatalf("raw join: %+v", r)
	}
	describeShare(t, adm, "workers", "the silent member joining", func(d kadm.DescribedShareGroup) bool { return len(d.Members) == 3 })
	d = describeShare(t, adm, "workers", "the silent member's removal", func(d kadm.DescribedShareGroup) bool { return len(d.Members) == 2 })
	for _, m := range d.Members {
		if m.MemberID == "silent-member" || m.ClientID != "worker" {
			t.Fatalf("members after the timeout: %+v", d.Members)
		}
	}
	if r := shareHeartbeat(rc, "workers", "silent-member", 3, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("silent member's late heartbeat: %+v", r)
	}
	cancel()
}

// TestGroupConfigs: DescribeConfigs on a GROUP resource reports the share-group configs,
// read-only, with the broker's values; altering them is refused with INVALID_CONFIG.
func TestGroupConfigs(t *testing.T) {
	gb := startShareGroupBroker(t, 45*time.Second)
	rc := dialRaw(t, gb.addr)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "any-group"
	req.Resources = append(req.Resources, res)
	resp := rc.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe group configs: %+v", resp)
	}
	got := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		if !c.ReadOnly || c.Value == nil {
			t.Fatalf("config %+v", c)
		}
		got[c.Name] = *c.Value
	}
	if got["share.session.timeout.ms"] != "45000" || got["share.auto.offset.reset"] != "latest" || got["share.isolation.level"] != "read_uncommitted" || len(got) != 5 {
		t.Fatalf("group configs: %v", got)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "any-group"
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)
	aresp := rc.roundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse)
	if aresp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("alter group configs: %+v", aresp.Resources[0])
	}
}
