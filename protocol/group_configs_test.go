package protocol_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
