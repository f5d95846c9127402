package protocol_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication/share"
)

type groupOp struct {
	name  string
	value *string
	op    kmsg.IncrementalAlterConfigOp
}

// alterGroupConfigs sends one IncrementalAlterConfigs for group and returns its error.
func alterGroupConfigs(t *testing.T, cl *kgo.Client, group string, validateOnly bool, ops ...groupOp) error {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = o.name, o.value, o.op
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
}

type describedConfig struct {
	value  string
	source kmsg.ConfigSource
}

func describeGroupConfigs(t *testing.T, cl *kgo.Client, group string) map[string]describedConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	out := map[string]describedConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = describedConfig{*c.Value, c.Source}
	}
	return out
}

// TestGroupConfigsAlterAndDescribe: GROUP configs are set, deleted and replaced through
// the controller, described with their source, validated as Kafka validates them, and
// kept across a broker restart.
func TestGroupConfigsAlterAndDescribe(t *testing.T) {
	tb := startBroker(t)
	cl := tb.client()
	s := kmsg.StringPtr
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete

	if err := alterGroupConfigs(t, cl, "g", false,
		groupOp{"share.auto.offset.reset", s("earliest"), set},
		groupOp{"consumer.session.timeout.ms", s("50000"), set},
		groupOp{"share.isolation.level", s("read_committed"), set}); err != nil {
		t.Fatal(err)
	}
	got := describeGroupConfigs(t, cl, "g")
	if got["share.auto.offset.reset"] != (describedConfig{"earliest", kmsg.ConfigSourceGroupConfig}) ||
		got["consumer.session.timeout.ms"] != (describedConfig{"50000", kmsg.ConfigSourceGroupConfig}) ||
		got["share.isolation.level"] != (describedConfig{"read_committed", kmsg.ConfigSourceGroupConfig}) ||
		got["share.record.lock.duration.ms"] != (describedConfig{"30000", kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("described %v", got)
	}
	if other := describeGroupConfigs(t, cl, "other"); other["share.auto.offset.reset"].source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("another group: %v", other)
	}

	// Kafka's errors: every refusal is INVALID_CONFIG, and nothing changes.
	for name, ops := range map[string][]groupOp{
		"unknown key":             {{"session.timeout.ms", s("50000"), set}},
		"below the broker's min":  {{"share.record.lock.duration.ms", s("14999"), set}},
		"above the broker's max":  {{"consumer.heartbeat.interval.ms", s("15001"), set}},
		"not an int":              {{"share.session.timeout.ms", s("soon"), set}},
		"bad reset":               {{"share.auto.offset.reset", s("none"), set}},
		"bad isolation":           {{"share.isolation.level", s("committed"), set}},
		"append to a non-list":    {{"share.auto.offset.reset", s("latest"), kmsg.IncrementalAlterConfigOpAppend}},
		"one bad among good ones": {{"share.auto.offset.reset", s("latest"), set}, {"nope", s("1"), set}},
	} {
		if err := alterGroupConfigs(t, cl, "g", false, ops...); err != kerr.InvalidConfig {
			t.Errorf("%s: %v, want INVALID_CONFIG", name, err)
		}
	}
	if err := alterGroupConfigs(t, cl, "g", true, groupOp{"share.auto.offset.reset", s("by_duration:PT1H"), set}); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if got := describeGroupConfigs(t, cl, "g"); got["share.auto.offset.reset"].value != "earliest" {
		t.Fatalf("after refusals and a validate-only: %v", got)
	}

	if err := alterGroupConfigs(t, cl, "g", false, groupOp{"consumer.session.timeout.ms", nil, del}); err != nil {
		t.Fatal(err)
	}
	if got := describeGroupConfigs(t, cl, "g"); got["consumer.session.timeout.ms"] != (describedConfig{"45000", kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("after delete: %v", got)
	}

	// Legacy AlterConfigs replaces the whole set.
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	ac := kmsg.NewAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "share.record.lock.duration.ms", s("20000")
	ar.Configs = append(ar.Configs, ac)
	areq.Resources = append(areq.Resources, ar)
	aresp, err := areq.RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, aresp)
	}
	want := map[string]string{"share.record.lock.duration.ms": "20000"}
	check := func(cl *kgo.Client, when string) {
		t.Helper()
		set := map[string]string{}
		for k, c := range describeGroupConfigs(t, cl, "g") {
			if c.source == kmsg.ConfigSourceGroupConfig {
				set[k] = c.value
			}
		}
		if len(set) != len(want) || set["share.record.lock.duration.ms"] != "20000" {
			t.Fatalf("%s: set %v, want %v", when, set, want)
		}
	}
	check(cl, "after AlterConfigs")
	tb = tb.restart()
	check(tb.client(), "after a restart")
}

// TestShareGroupConfigEarliest: a share group whose share.auto.offset.reset group config
// is earliest reads records produced before it first fetched, on a broker whose own
// share.auto.offset.reset is latest; its record lock duration is its group config's.
func TestShareGroupConfigEarliest(t *testing.T) {
	tb := launchShares(t, t.TempDir(), nil, brokerConfig(), nil, &share.Config{Logger: quietLogger()})
	tb.createTopic("backlog", 1, nil)
	h := &shareHarness{t: t, tb: tb, cl: tb.client(), topic: "backlog", id: tb.broker.Image().Topic("backlog").ID, group: "late-readers",
		epoch: map[string]int32{}}
	h.produce("backlog", "old", "older")
	if err := alterGroupConfigs(t, h.cl, "late-readers", false,
		groupOp{"share.auto.offset.reset", kmsg.StringPtr("earliest"), kmsg.IncrementalAlterConfigOpSet},
		groupOp{"share.record.lock.duration.ms", kmsg.StringPtr("20000"), kmsg.IncrementalAlterConfigOpSet}); err != nil {
		t.Fatal(err)
	}
	var got []acquired
	var resp *kmsg.ShareFetchResponse
	ctx := ctxTimeout(t, 10*time.Second)
	for len(got) == 0 && ctx.Err() == nil {
		resp = h.fetch("m1", 10, time.Second)
		got = acquiredOf(t, sharePart(t, resp))
	}
	if !slices.Equal(got, []acquired{{0, 1, 1}}) {
		t.Fatalf("acquired %v, want the records produced before the group", got)
	}
	if resp.AcquisitionLockTimeoutMillis != 20000 {
		t.Fatalf("lock timeout %d, want the group's 20000", resp.AcquisitionLockTimeoutMillis)
	}
}

// TestShareGroupReadCommitted: a share group whose share.isolation.level is
// read_committed acquires committed records only, never an aborted transaction's nor
// beyond an open one's; another group on the same partition reads uncommitted.
func TestShareGroupReadCommitted(t *testing.T) {
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	tcfg := txn.Config{NodeID: 1, Logger: quietLogger(), MarkerRetryBackoff: 10 * time.Millisecond}
	scfg := &share.Config{AutoOffsetReset: "earliest", Logger: quietLogger()}
	tb := launchAll(t, t.TempDir(), nil, brokerConfig(), &gcfg, nil, &tcfg, scfg)
	tb.createTopic("tx", 1, nil)
	committed := &shareHarness{t: t, tb: tb, cl: tb.client(), topic: "tx", id: tb.broker.Image().Topic("tx").ID, group: "committed",
		epoch: map[string]int32{}}
	uncommitted := &shareHarness{t: t, tb: tb, cl: committed.cl, topic: "tx", id: committed.id, group: "uncommitted",
		epoch: map[string]int32{}}
	if err := alterGroupConfigs(t, committed.cl, "committed", false,
		groupOp{"share.isolation.level", kmsg.StringPtr("read_committed"), kmsg.IncrementalAlterConfigOpSet}); err != nil {
		t.Fatal(err)
	}

	ctx := ctxTimeout(t, 30*time.Second)
	p := txnProducer(t, tb, "tx-1", "tx")
	inTxn := func(commit kgo.TransactionEndTry, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	inTxn(kgo.TryCommit, "c1")       // 0, marker 1
	inTxn(kgo.TryAbort, "a1", "a2")  // 2-3, marker 4
	committed.produce("tx", "plain") // 5
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil { // 6, open
		t.Fatal(err)
	}
	committed.produce("tx", "after") // 7, beyond the open transaction

	// acquire fetches until want offsets were acquired, then once more to catch extras.
	acquire := func(h *shareHarness, want ...int64) []int64 {
		t.Helper()
		var got []int64
		add := func(rs []acquired) {
			for _, r := range rs {
				for o := r.first; o <= r.last; o++ {
					got = append(got, o)
				}
			}
		}
		for len(got) < len(want) && ctx.Err() == nil {
			add(acquiredOf(t, sharePart(t, h.fetch("m", 100, time.Second))))
		}
		add(acquiredOf(t, sharePart(t, h.fetch("m", 100, 100*time.Millisecond))))
		slices.Sort(got)
		return got
	}
	if got := acquire(committed, 0, 5); !slices.Equal(got, []int64{0, 5}) {
		t.Fatalf("read_committed group acquired %v, want 0 and 5", got)
	}
	if got := acquire(uncommitted, 0, 2, 3, 5, 6, 7); !slices.Equal(got, []int64{0, 2, 3, 5, 6, 7}) {
		t.Fatalf("read_uncommitted group acquired %v, want every data record", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil { // marker 8
		t.Fatal(err)
	}
	if got := acquire(committed, 6, 7); !slices.Equal(got, []int64{6, 7}) {
		t.Fatalf("read_committed group acquired %v after the commit, want 6 and 7", got)
	}
}

// TestShareGroupConfigByDuration: share.auto.offset.reset=by_duration:PT1H starts a
// share group at the first record no older than an hour.
func TestShareGroupConfigByDuration(t *testing.T) {
	tb := launchShares(t, t.TempDir(), nil, brokerConfig(), nil, &share.Config{Logger: quietLogger()})
	tb.createTopic("history", 1, nil)
	h := &shareHarness{t: t, tb: tb, cl: tb.client(), topic: "history", id: tb.broker.Image().Topic("history").ID, group: "recent",
		epoch: map[string]int32{}}
	now := time.Now()
	for _, ts := range []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now.Add(-time.Minute), now} {
		if err := h.cl.ProduceSync(ctxTimeout(t, 10*time.Second), &kgo.Record{Topic: "history", Value: []byte("v"), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := alterGroupConfigs(t, h.cl, "recent", false,
		groupOp{"share.auto.offset.reset", kmsg.StringPtr("by_duration:PT1H"), kmsg.IncrementalAlterConfigOpSet}); err != nil {
		t.Fatal(err)
	}
	var got []acquired
	ctx := ctxTimeout(t, 10*time.Second)
	for len(got) == 0 && ctx.Err() == nil {
		got = acquiredOf(t, sharePart(t, h.fetch("m1", 10, time.Second)))
	}
	if !slices.Equal(got, []acquired{{2, 3, 1}}) {
		t.Fatalf("acquired %v, want the records of the last hour (2-3)", got)
	}
}

// TestGroupConfigBoundsFromBrokerConfigs: the broker's group.share.min.* configs bound
// the GROUP keys, and its group.share.* values are the defaults described.
func TestGroupConfigBoundsFromBrokerConfigs(t *testing.T) {
	tb := startBroker(t, func(c *protocol.Config) {
		c.BrokerConfigs = map[string]string{"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "2000"}
	})
	cl := tb.client()
	if got := describeGroupConfigs(t, cl, "g")["share.record.lock.duration.ms"]; got != (describedConfig{"2000", kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("default lock duration %v, want the broker's 2000", got)
	}
	if err := alterGroupConfigs(t, cl, "g", false,
		groupOp{"share.record.lock.duration.ms", kmsg.StringPtr("1000"), kmsg.IncrementalAlterConfigOpSet}); err != nil {
		t.Fatalf("1000 with group.share.min.record.lock.duration.ms=1000: %v", err)
	}
	if err := alterGroupConfigs(t, cl, "g", false,
		groupOp{"share.record.lock.duration.ms", kmsg.StringPtr("60001"), kmsg.IncrementalAlterConfigOpSet}); err != kerr.InvalidConfig {
		t.Fatalf("above Kafka's default max: %v, want INVALID_CONFIG", err)
	}
}
