package group

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/metadata"
)

func TestDescribeAndListGroups(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	ids := stableGroup(t, c, "live", 2)
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "offsets-only", Generation: -1, Offsets: offsets("t", 0, 1)}); err != nil {
		t.Fatal(err)
	}
	// Forget the in-memory record, as after a restart or a coordinator move.
	c.mu.Lock()
	delete(c.groups, "offsets-only")
	c.mu.Unlock()

	ds := c.DescribeGroups(ctx, []string{"live", "offsets-only", "missing"})
	live := ds[0]
	if live.Err != nil || live.State != Stable || live.Protocol != "range" || live.ProtocolType != "consumer" || len(live.Members) != 2 {
		t.Fatalf("live: %+v", live)
	}
	for _, m := range live.Members {
		if string(m.Assignment) != "for-"+m.MemberID || len(m.Metadata) == 0 || m.ClientHost != "/127.0.0.1" || m.ClientID != "cl" {
			t.Fatalf("member %+v", m)
		}
	}
	if ds[1].State != Empty || ds[2].State != Dead || ds[1].Err != nil || ds[2].Err != nil {
		t.Fatalf("offsets-only %+v, missing %+v", ds[1], ds[2])
	}

	all, err := c.ListGroups(ctx, nil)
	if err != nil || len(all) != 2 || all[0].Group != "live" || all[0].State != Stable || all[1].Group != "offsets-only" || all[1].State != Empty {
		t.Fatalf("list: %+v %v", all, err)
	}
	empty, _ := c.ListGroups(ctx, []string{"empty"})
	if len(empty) != 1 || empty[0].Group != "offsets-only" {
		t.Fatalf("list Empty: %+v", empty)
	}

	// Mid-rebalance, members are described without metadata.
	c.Join(joinReq("live", ids[0]))
	d := c.DescribeGroups(ctx, []string{"live"})[0]
	if d.State != PreparingRebalance || d.Protocol != "" || len(d.Members) != 2 || d.Members[0].Assignment != nil {
		t.Fatalf("preparing: %+v", d)
	}
}

func TestDeleteGroups(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	ids := stableGroup(t, c, "live", 1)
	_, gen, _ := c.stateOf("live")
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "live", MemberID: ids[0], Generation: gen, Offsets: offsets("t", 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "idle", Generation: -1, Offsets: offsets("t", 0, 1)}); err != nil {
		t.Fatal(err)
	}
	errs := c.DeleteGroups(ctx, []string{"live", "idle", "missing"})
	if errs[0] != kerr.NonEmptyGroup || errs[1] != nil || errs[2] != kerr.GroupIDNotFound {
		t.Fatalf("delete: %v", errs)
	}
	if got := fetched(t, c, "idle"); len(got) != 0 {
		t.Fatalf("deleted group's offsets: %v", got)
	}
	if errs := c.DeleteGroups(ctx, []string{"idle"}); errs[0] != kerr.GroupIDNotFound {
		t.Fatalf("second delete: %v", errs)
	}
	c.Leave("live", []LeavingMember{{MemberID: ids[0]}})
	if errs := c.DeleteGroups(ctx, []string{"live"}); errs[0] != nil {
		t.Fatalf("delete after leave: %v", errs)
	}
	if gs, _ := c.ListGroups(ctx, nil); len(gs) != 0 {
		t.Fatalf("groups left: %+v", gs)
	}
	// The id can be used again.
	if r := wait[JoinResult](t, joinNew(t, c, joinReq("live", ""))); r.Err != nil || r.Generation != 1 {
		t.Fatalf("join after delete: %+v", r)
	}
}

func TestNotCoordinatorAndMove(t *testing.T) {
	node := newTestNode(t)
	// The coordinator (broker 1's) reads broker 2's cache: every broker's cache follows
	// the same metadata, and broker 1's controlled shutdown below, which fences it, would
	// close its own client's.
	store := node.AddBroker(2, "127.0.0.1", 9093)
	node.AddBroker(3, "127.0.0.1", 9094)
	controllertest.WaitFor(t, store, "brokers 1-3 live", func(im *metadata.Image) bool {
		for _, id := range []int32{1, 2, 3} {
			if b, ok := im.Brokers[id]; !ok || b.Fenced {
				return false
			}
		}
		return true
	})
	c := newTestCoordinator(t, testConfig(), &registeredAs{Store: store, epoch: node.Store().BrokerEpoch()})
	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		id := "grp-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		b, err := c.CoordinatorFor(id)
		if err != nil {
			t.Fatal(err)
		}
		if b.ID == 1 && mine == "" {
			mine = id
		} else if b.ID != 1 && theirs == "" {
			theirs = id
		}
	}
	if r := wait[JoinResult](t, c.Join(joinReq(theirs, ""))); r.Err != kerr.NotCoordinator {
		t.Fatalf("join elsewhere: %v", r.Err)
	}
	if d := c.DescribeGroups(context.Background(), []string{theirs})[0]; d.Err != kerr.NotCoordinator {
		t.Fatalf("describe elsewhere: %v", d.Err)
	}
	// A rebalance is waiting when the group moves away: it is answered NOT_COORDINATOR.
	stableGroup(t, c, mine, 1)
	pending := joinNew(t, c, joinReq(mine, ""))
	// Broker 4 joins and broker 1 (this one) shuts down: the controller fences it, and
	// every group goes elsewhere.
	node.AddBroker(4, "127.0.0.1", 9095)
	if err := node.Broker.Close(); err != nil {
		t.Fatal(err)
	}
	if r := wait[JoinResult](t, pending); r.Err != kerr.NotCoordinator {
		t.Fatalf("waiting join after the move: %+v", r)
	}
	if b, err := c.CoordinatorFor(mine); err != nil || b.ID == 1 {
		t.Fatalf("coordinator of %s after broker 1 is fenced: %+v %v", mine, b, err)
	}
	testutil.Eventually(t, 10*time.Second, "the group to be unloaded", func() bool { st, _, _ := c.stateOf(mine); return st == Dead })

	if _, err := (&metadata.Image{}).CoordinatorBroker("x"); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("no coordinators: %v", err)
	}
}

func TestCloseAnswersWaitingCalls(t *testing.T) {
	store := newTestStore(t)
	c := New(testConfig(), store)
	stableGroup(t, c, "g", 1)
	pending := joinNew(t, c, joinReq("g", ""))
	c.Close()
	if r := wait[JoinResult](t, pending); r.Err != kerr.NotCoordinator {
		t.Fatalf("join after close: %+v", r)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g"}); err != kerr.NotCoordinator {
		t.Fatalf("heartbeat after close: %v", err)
	}
	c.Close()
}

func TestOffsetRetention(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	cfg := testConfig()
	cfg.OffsetsRetention = time.Hour
	cfg.Now = clock.Now
	c := newTestCoordinator(t, cfg, newTestStore(t))
	ctx := context.Background()
	advance := clock.advance

	// A simple group: each offset lives an hour past its commit.
	c.CommitOffsets(ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: offsets("t", 0, 1)})
	advance(40 * time.Minute)
	c.CommitOffsets(ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: offsets("t", 1, 1)})
	// An explicit retention (v2-v4).
	c.CommitOffsets(ctx, CommitRequest{Group: "explicit", Generation: -1, Retention: time.Minute, Offsets: offsets("t", 0, 1)})
	// A consumer group that is live: nothing expires while it subscribes.
	ids := stableGroup(t, c, "live", 1)
	_, gen, _ := c.stateOf("live")
	c.CommitOffsets(ctx, CommitRequest{Group: "live", MemberID: ids[0], Generation: gen, Offsets: append(offsets("t", 0, 1), offsets("u", 0, 1)...)})

	advance(30 * time.Minute)
	if err := c.ExpireOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fetched(t, c, "simple"); len(got) != 1 || got["t/1"] != 1 {
		t.Fatalf("simple after 70m: %v", got)
	}
	if got := fetched(t, c, "explicit"); len(got) != 0 {
		t.Fatalf("explicit after 30m: %v", got)
	}
	if got := fetched(t, c, "live"); len(got) != 2 {
		t.Fatalf("live after 30m: %v", got)
	}
	advance(31 * time.Minute)
	c.ExpireOffsets(ctx)
	// u is not subscribed: it expires an hour after its commit; t stays.
	if got := fetched(t, c, "live"); len(got) != 1 || got["t/0"] != 1 {
		t.Fatalf("live after 61m: %v", got)
	}
	// Once the group empties, retention runs from then.
	c.Leave("live", []LeavingMember{{MemberID: ids[0]}})
	advance(59 * time.Minute)
	c.ExpireOffsets(ctx)
	if got := fetched(t, c, "live"); len(got) != 1 {
		t.Fatalf("59m after emptying: %v", got)
	}
	advance(2 * time.Minute)
	c.ExpireOffsets(ctx)
	if got := fetched(t, c, "live"); len(got) != 0 {
		t.Fatalf("61m after emptying: %v", got)
	}
	if gs, _ := c.ListGroups(ctx, nil); len(gs) != 0 {
		t.Fatalf("groups left after expiry: %+v", gs)
	}
}

func TestLagCollector(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	c.CommitOffsets(ctx, CommitRequest{Group: "g", Generation: -1, Offsets: offsets("t", 0, 40, 1, 7)})
	hw := func(topic string, p int32) (int64, bool) {
		if topic == "t" && p == 0 {
			return 100, true
		}
		return 0, false
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.LagCollector(hw))
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
			series[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"shale_consumer_group_lag,group=g,partition=0,topic=t":              60,
		"shale_consumer_group_committed_offset,group=g,partition=0,topic=t": 40,
		"shale_consumer_group_members,group=g,state=Empty":                  0,
		"shale_consumer_group_rebalances_total":                             0,
		// kafka_exporter's names for the same figures.
		"kafka_consumergroup_lag,consumergroup=g,partition=0,topic=t":            60,
		"kafka_consumergroup_current_offset,consumergroup=g,partition=0,topic=t": 40,
		"kafka_consumergroup_lag_sum,consumergroup=g,topic=t":                    60,
		"kafka_consumergroup_current_offset_sum,consumergroup=g,topic=t":         40,
		"kafka_consumergroup_members,consumergroup=g":                            0,
	}
	if len(series) != len(want) {
		t.Fatalf("series %v, want %v", series, want)
	}
	for k, v := range want {
		if got, ok := series[k]; !ok || got != v {
			t.Fatalf("series %v, want %v", series, want)
		}
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	store := newTestStore(t)
	before := runtime.NumGoroutine()
	c := New(testConfig(), store)
	stableGroup(t, c, "g", 3)
	joinNew(t, c, joinReq("g", "")) // a waiting join, a pending rebalance timer
	c.Close()
	testutil.Eventually(t, 10*time.Second, "the coordinator's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// registeredAs is another broker's cache under this broker's registration epoch: what
// this broker's own cache would say, since every cache follows the same metadata.
type registeredAs struct {
	metadata.Store
	epoch int64
}

func (s *registeredAs) BrokerEpoch() int64 { return s.epoch }
