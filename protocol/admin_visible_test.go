package protocol_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An admin write is answered only once the broker that answered it shows the change:
// reading it back through the same broker never returns the old state. (Before, a
// DescribeConfigs right after IncrementalAlterConfigs returned the old value in 16 of
// 50 tries.)
func TestAdminWritesVisibleOnAnswer(t *testing.T) {
	tb := startBroker(t, withoutAutoCreate())
	tb.createTopic("vis", 1, nil)
	adm := tb.admin()
	ctx := ctxTimeout(t, 60*time.Second)
	const tries = 30
	for i := range tries {
		v := fmt.Sprint(100000 + i)
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &v}}, "vis")
		if err != nil || res[0].Err != nil {
			t.Fatalf("alter: %v %v", err, res[0].Err)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, "vis")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("vis", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && (c.Value == nil || *c.Value != v) {
				t.Fatalf("try %d: retention.ms %v right after setting %s", i, c.MaybeValue(), v)
			}
		}
	}

	rc := dialRaw(t, tb.addr)
	meta := func(topic string) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: strPtr(topic)}}
		return rc.roundTrip(req).(*kmsg.MetadataResponse).Topics[0]
	}
	for i := range 10 {
		name := fmt.Sprint("vis-", i)
		if r, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil || r.Err != nil {
			t.Fatalf("create: %v %v", err, r.Err)
		}
		if r, err := adm.CreatePartitions(ctx, 2, name); err != nil || r[name].Err != nil {
			t.Fatalf("create partitions: %v %v", err, r[name].Err)
		}
		if mt := meta(name); mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
			t.Fatalf("try %d: %d partitions (error %v) right after growing to 3", i, len(mt.Partitions), kerr.ErrorForCode(mt.ErrorCode))
		}
		if r, err := adm.DeleteTopics(ctx, name); err != nil || r[name].Err != nil {
			t.Fatalf("delete: %v %v", err, r[name].Err)
		}
		if mt := meta(name); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("try %d: topic still listed (error %v) right after its deletion", i, kerr.ErrorForCode(mt.ErrorCode))
		}
	}
}
