package protocol_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
)

// groupBroker is a testBroker with a group coordinator.
type groupBroker struct {
	*testBroker
	groups *group.Coordinator
}

// startGroupBroker starts a broker whose coordinator has no initial rebalance delay and
// accepts short session timeouts, so tests can wait for expiries.
func startGroupBroker(t testing.TB) *groupBroker {
	t.Helper()
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	tb := launch(t, t.TempDir(), nil, brokerConfig(), &gcfg)
	return &groupBroker{testBroker: tb, groups: tb.groups}
}

func TestGroupAPIsAdvertised(t *testing.T) {
	gb := startGroupBroker(t)
	rc := dialRaw(t, gb.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	want := map[kmsg.Key][2]int16{
		kmsg.OffsetCommit: {2, 9}, kmsg.OffsetFetch: {1, 9}, kmsg.FindCoordinator: {0, 4},
		kmsg.JoinGroup: {0, 9}, kmsg.Heartbeat: {0, 4}, kmsg.LeaveGroup: {0, 5}, kmsg.SyncGroup: {0, 5},
		kmsg.DescribeGroups: {0, 5}, kmsg.ListGroups: {0, 5}, kmsg.DeleteGroups: {0, 2}, kmsg.OffsetDelete: {0, 0},
		// KIP-848: franz-go uses it only with kgo.ServerSideBalancer.
		kmsg.ConsumerGroupHeartbeat: {0, 1}, kmsg.ConsumerGroupDescribe: {0, 1},
	}
	for _, k := range resp.ApiKeys {
		if w, ok := want[kmsg.Key(k.ApiKey)]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("%s: %d-%d, want %d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, kmsg.Key(k.ApiKey))
		}
	}
	if len(want) != 0 {
		t.Errorf("not advertised: %v", want)
	}
}

func TestFindCoordinatorVersions(t *testing.T) {
	gb := startGroupBroker(t)
	rc := dialRaw(t, gb.addr)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = v, "g"
		resp := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Host != "127.0.0.1" || "127.0.0.1:"+strconv.Itoa(int(resp.Port)) != gb.addr {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"a", "b", "c"}
	resp := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("v4: %+v", resp)
	}
	for i, c := range resp.Coordinators {
		if c.Key != req.CoordinatorKeys[i] || c.ErrorCode != 0 || c.NodeID != 1 {
			t.Fatalf("v4 coordinator %d: %+v", i, c)
		}
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys, req.CoordinatorType = 4, []string{"x"}, 7
	resp = rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code || resp.Coordinators[0].NodeID != -1 {
		t.Fatalf("unknown key type: %+v", resp.Coordinators[0])
	}
}

func joinV(rc *rawConn, version int16, groupID, member string) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID = version, groupID, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	return rc.roundTrip(req).(*kmsg.JoinGroupResponse)
}

// TestJoinSyncEveryVersion forms a one-member group at every JoinGroup and SyncGroup
// version, then heartbeats, commits, fetches and leaves at matching versions.
func TestJoinSyncEveryVersion(t *testing.T) {
	gb := startGroupBroker(t)
	gb.createTopic("t", 2, nil)
	for v := int16(0); v <= 9; v++ {
		t.Run("v"+strconv.Itoa(int(v)), func(t *testing.T) {
			rc := dialRaw(t, gb.addr)
			groupID := "g" + strconv.Itoa(int(v))
			resp := joinV(rc, v, groupID, "")
			if v >= 4 {
				if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
					t.Fatalf("first join: %+v", resp)
				}
				resp = joinV(rc, v, groupID, resp.MemberID)
			}
			if resp.ErrorCode != 0 || resp.Generation != 1 || resp.LeaderID != resp.MemberID || len(resp.Members) != 1 || resp.Protocol == nil || *resp.Protocol != "range" {
				t.Fatalf("join: %+v", resp)
			}
			if v >= 7 && (resp.ProtocolType == nil || *resp.ProtocolType != "consumer") {
				t.Fatalf("v7+ protocol type: %+v", resp.ProtocolType)
			}
			member := resp.MemberID

			sv := min(v, 5)
			sreq := kmsg.NewPtrSyncGroupRequest()
			sreq.Version, sreq.Group, sreq.Generation, sreq.MemberID = sv, groupID, 1, member
			sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("plan")}}
			if sv >= 5 {
				sreq.ProtocolType, sreq.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			}
			sresp := rc.roundTrip(sreq).(*kmsg.SyncGroupResponse)
			if sresp.ErrorCode != 0 || string(sresp.MemberAssignment) != "plan" {
				t.Fatalf("sync v%d: %+v", sv, sresp)
			}

			hreq := kmsg.NewPtrHeartbeatRequest()
			hreq.Version, hreq.Group, hreq.Generation, hreq.MemberID = min(v, 4), groupID, 1, member
			if hresp := rc.roundTrip(hreq).(*kmsg.HeartbeatResponse); hresp.ErrorCode != 0 {
				t.Fatalf("heartbeat: %+v", hresp)
			}

			cv := min(max(v, 2), 8)
			creq := kmsg.NewPtrOffsetCommitRequest()
			creq.Version, creq.Group, creq.Generation, creq.MemberID = cv, groupID, 1, member
			creq.RetentionTimeMillis = -1
			creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 42, LeaderEpoch: 0, Metadata: kmsg.StringPtr("m")}}}}
			cresp := rc.roundTrip(creq).(*kmsg.OffsetCommitResponse)
			if len(cresp.Topics) != 1 || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("commit v%d: %+v", cv, cresp)
			}

			fv := min(max(v, 1), 7)
			freq := kmsg.NewPtrOffsetFetchRequest()
			freq.Version, freq.Group = fv, groupID
			freq.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
			fresp := rc.roundTrip(freq).(*kmsg.OffsetFetchResponse)
			ps := fresp.Topics[0].Partitions
			if fresp.ErrorCode != 0 || len(ps) != 2 || ps[0].Offset != -1 || ps[1].Offset != 42 || *ps[1].Metadata != "m" {
				t.Fatalf("fetch v%d: %+v", fv, fresp)
			}
			if fv >= 5 && ps[1].LeaderEpoch != 0 && cv >= 6 {
				t.Fatalf("fetch v%d leader epoch %d", fv, ps[1].LeaderEpoch)
			}

			lreq := kmsg.NewPtrLeaveGroupRequest()
			lreq.Version, lreq.Group = min(v, 5), groupID
			if lreq.Version < 3 {
				lreq.MemberID = member
			} else {
				lreq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}, {MemberID: "ghost"}}
			}
			lresp := rc.roundTrip(lreq).(*kmsg.LeaveGroupResponse)
			if lresp.ErrorCode != 0 || (lreq.Version >= 3 && (len(lresp.Members) != 2 || lresp.Members[0].ErrorCode != 0 || lresp.Members[1].ErrorCode != kerr.UnknownMemberID.Code)) {
				t.Fatalf("leave v%d: %+v", lreq.Version, lresp)
			}
		})
	}
}

// TestJoinWaitsWithoutBlockingTheConnection: a JoinGroup waiting for a rebalance does
// not stop the requests behind it on the same connection from being handled (their
// responses still come in order, after the join's).
func TestJoinWaitsWithoutBlockingTheConnection(t *testing.T) {
	gb := startGroupBroker(t)
	leader := dialRaw(t, gb.addr)
	first := joinV(leader, 3, "g", "")
	if first.ErrorCode != 0 {
		t.Fatalf("%+v", first)
	}
	// A second member joins: the rebalance waits (up to a minute) for the first one to
	// rejoin. Behind the join, on the same connection, the first member is removed; only
	// if that LeaveGroup is handled while the join waits does the rebalance complete.
	rc := dialRaw(t, gb.addr)
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Version, jreq.Group, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = 3, "g", 60000, 60000
	jreq.ProtocolType = "consumer"
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	rc.send(jreq)
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version, lreq.Group, lreq.MemberID = 0, "g", first.MemberID
	rc.send(lreq)

	_, body, err := rc.readBody()
	if err != nil {
		t.Fatal(err)
	}
	jresp := jreq.ResponseKind().(*kmsg.JoinGroupResponse)
	if err := jresp.ReadFrom(body); err != nil || jresp.ErrorCode != 0 || jresp.Generation != 2 || jresp.LeaderID != jresp.MemberID || len(jresp.Members) != 1 {
		t.Fatalf("waiting join: %+v %v", jresp, err)
	}
	_, body, err = rc.readBody()
	if err != nil {
		t.Fatal(err)
	}
	lresp := lreq.ResponseKind().(*kmsg.LeaveGroupResponse)
	if err := lresp.ReadFrom(body); err != nil || lresp.ErrorCode != 0 {
		t.Fatalf("leave behind the join: %+v %v", lresp, err)
	}
}

// TestClosedConnectionWithdrawsJoin: a new member whose connection closes while its
// JoinGroup waits is not kept in the generation.
func TestClosedConnectionWithdrawsJoin(t *testing.T) {
	gb := startGroupBroker(t)
	leader := dialRaw(t, gb.addr)
	first := joinV(leader, 3, "g", "")
	rc := dialRaw(t, gb.addr)
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Version, jreq.Group, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = 3, "g", 60000, 60000
	jreq.ProtocolType = "consumer"
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	rc.send(jreq)
	// Wait until the join is registered: the group is rebalancing.
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := gb.groups.DescribeGroups(context.Background(), []string{"g"})[0]
		if d.State == group.PreparingRebalance {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %v", d.State)
		}
		time.Sleep(time.Millisecond)
	}
	rc.c.Close()
	// The broker notices the hang-up on its own: the newcomer leaves the group before
	// the first member rejoins (which would otherwise complete the rebalance with it).
	deadline = time.Now().Add(5 * time.Second)
	for len(gb.groups.DescribeGroups(context.Background(), []string{"g"})[0].Members) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's member is still in the group")
		}
		time.Sleep(time.Millisecond)
	}
	second := joinV(leader, 3, "g", first.MemberID)
	if second.ErrorCode != 0 || len(second.Members) != 1 {
		t.Fatalf("rejoin after the newcomer's connection closed: %+v", second)
	}
}

func TestOffsetFetchBatched(t *testing.T) {
	gb := startGroupBroker(t)
	gb.createTopic("t", 3, nil)
	adm := gb.admin()
	ctx := ctxTimeout(t, 10*time.Second)
	for i, g := range []string{"a", "b"} {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: int32(i), At: int64(10 + i), LeaderEpoch: -1, Metadata: g})
		if resp, err := adm.CommitOffsets(ctx, g, os); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, resp.Error())
		}
	}
	rc := dialRaw(t, gb.addr)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "a", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 2}}}},
		{Group: "b"}, // null topics: everything committed
		{Group: "none"},
	}
	resp := rc.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 3 {
		t.Fatalf("%+v", resp)
	}
	a, b, none := resp.Groups[0], resp.Groups[1], resp.Groups[2]
	if a.ErrorCode != 0 || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 || a.Topics[0].Partitions[0].Offset != 10 || *a.Topics[0].Partitions[0].Metadata != "a" || a.Topics[0].Partitions[1].Offset != -1 {
		t.Fatalf("group a: %+v", a)
	}
	if b.ErrorCode != 0 || len(b.Topics) != 1 || len(b.Topics[0].Partitions) != 1 || b.Topics[0].Partitions[0].Partition != 1 || b.Topics[0].Partitions[0].Offset != 11 {
		t.Fatalf("group b: %+v", b)
	}
	if none.ErrorCode != 0 || len(none.Topics) != 0 {
		t.Fatalf("group none: %+v", none)
	}
	// kadm fetches several groups at once through v8.
	fetched := adm.FetchManyOffsets(ctx, "a", "b")
	if err := fetched.Error(); err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched["b"].Fetched.Lookup("t", 1); o.At != 11 {
		t.Fatalf("kadm fetch b: %+v", fetched["b"])
	}
}

func TestListGroupsFilters(t *testing.T) {
	gb := startGroupBroker(t)
	rc := dialRaw(t, gb.addr)
	if r := joinV(rc, 3, "live", ""); r.ErrorCode != 0 {
		t.Fatal(r)
	}
	adm := gb.admin()
	ctx := ctxTimeout(t, 10*time.Second)
	gb.createTopic("t", 1, nil)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "idle", os); err != nil {
		t.Fatal(err)
	}
	list := func(version int16, states, types []string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter, req.TypesFilter = version, states, types
		resp := rc.roundTrip(req).(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("list: %+v", resp)
		}
		out := map[string]string{}
		for _, g := range resp.Groups {
			out[g.Group] = g.GroupState + "/" + g.ProtocolType
			if version >= 5 && g.GroupType != "classic" {
				t.Fatalf("group type %q", g.GroupType)
			}
		}
		return out
	}
	if got := list(0, nil, nil); len(got) != 2 {
		t.Fatalf("v0: %v", got)
	}
	if got := list(4, []string{"CompletingRebalance"}, nil); len(got) != 1 || got["live"] != "CompletingRebalance/consumer" {
		t.Fatalf("v4 filter: %v", got)
	}
	if got := list(4, []string{"Empty"}, nil); len(got) != 1 || got["idle"] != "Empty/" {
		t.Fatalf("v4 Empty: %v", got)
	}
	if got := list(5, nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("v5 KIP-848 type: %v", got)
	}
	if got := list(5, nil, []string{"Classic"}); len(got) != 2 {
		t.Fatalf("v5 classic: %v", got)
	}
}

// TestAdminGroupsWithKadm runs a franz-go consumer group and checks what kadm reports:
// DescribeGroups, Lag, DeleteGroups, DeleteOffsets.
func TestAdminGroupsWithKadm(t *testing.T) {
	gb := startGroupBroker(t)
	gb.createTopic("lag", 3, nil)
	gb.createTopic("other", 1, nil)
	ctx := ctxTimeout(t, 30*time.Second)
	prod := gb.client(kgo.DefaultProduceTopic("lag"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 10; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cons := gb.client(kgo.ConsumerGroup("lagged"), kgo.ConsumeTopics("lag"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("lag-consumer"))
	got := 0
	for got < 30 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d: %v", got, ctx.Err())
		}
		got += fs.NumRecords()
	}
	// Commit partition by partition: p0 fully, p1 half, p2 not at all.
	var commitErr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"lag": {0: {Epoch: -1, Offset: 10}, 1: {Epoch: -1, Offset: 5}}}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
	})
	if commitErr != nil {
		t.Fatal(commitErr)
	}

	adm := gb.admin()
	described, err := adm.DescribeGroups(ctx, "lagged")
	if err != nil {
		t.Fatal(err)
	}
	d := described["lagged"]
	if d.Err != nil || d.State != "Stable" || d.Protocol != "cooperative-sticky" || d.ProtocolType != "consumer" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	m := d.Members[0]
	if m.ClientID != "lag-consumer" || m.ClientHost != "/127.0.0.1" {
		t.Fatalf("member: %+v", m)
	}
	if ca, ok := m.Assigned.AsConsumer(); !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 3 {
		t.Fatalf("member assignment: %+v", m.Assigned)
	}
	lags, err := adm.Lag(ctx, "lagged")
	if err != nil {
		t.Fatal(err)
	}
	l := lags["lagged"]
	if l.Error() != nil {
		t.Fatal(l.Error())
	}
	want := map[int32]int64{0: 0, 1: 5, 2: 10}
	for p, w := range want {
		if ml, ok := l.Lag["lag"][p]; !ok || ml.Lag != w {
			t.Fatalf("lag of partition %d: %+v, want %d", p, l.Lag["lag"][p], w)
		}
	}
	if total := l.Lag.Total(); total != 15 {
		t.Fatalf("total lag %d", total)
	}

	// OffsetDelete refuses a topic the group consumes, not others.
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"other": {0: {Epoch: -1, Offset: 1}}}, nil)
	dres, err := adm.DeleteOffsets(ctx, "lagged", kadm.TopicsSet{"lag": {0: {}}, "other": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dres["lag"][0], kerr.GroupSubscribedToTopic) || dres["other"][0] != nil {
		t.Fatalf("delete offsets: %v", dres)
	}

	// DeleteGroups: refused while the consumer is in the group, done once it left.
	delRes, err := adm.DeleteGroups(ctx, "lagged")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(delRes["lagged"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete live group: %v", delRes["lagged"].Err)
	}
	cons.Close()
	delRes, err = adm.DeleteGroups(ctx, "lagged")
	if err != nil || delRes["lagged"].Err != nil {
		t.Fatalf("delete after close: %v %v", err, delRes["lagged"].Err)
	}
	fetched, err := adm.FetchOffsets(ctx, "lagged")
	if err != nil || len(fetched) != 0 {
		t.Fatalf("offsets after delete: %v %v", fetched, err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || slices.Contains(listed.Groups(), "lagged") {
		t.Fatalf("list after delete: %v %v", listed, err)
	}
}
