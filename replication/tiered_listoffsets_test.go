package replication_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
)

// TestTieredListOffsetsMaxTimestamp: ListOffsets max-timestamp (-3, KIP-734) looks at the
// whole log: the record with the largest timestamp is found in the remote log while no
// local record's is larger, and in the local log once one is.
func TestTieredListOffsetsMaxTimestamp(t *testing.T) {
	store := objstore.NewMemory()
	b := brokertest.Start(t, tieredOptions(store),
		brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "maxts"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("2048"),
		"local.retention.bytes": kadm.StringPtr("1"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).UnixMilli()
	const maxAt, maxTs = 7, 40 * 60 * 1000 // 40 minutes after base: later than every other record
	produce := func(i int, ts int64) {
		t.Helper()
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%d-%0100d", i, i)), Timestamp: time.UnixMilli(base + ts)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		ts := int64(i) * 1000
		if i == maxAt {
			ts = maxTs
		}
		produce(i, ts)
	}
	p := b.Replicas().Replica(topic, 0)
	waitFor(t, "the start of the log only remote", func() bool { return p.LocalLogStartOffset() > 100 })

	listMax := func() kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 7, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -3, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b.Client())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if got := listMax(); got.ErrorCode != 0 || got.Offset != maxAt || got.Timestamp != base+maxTs {
		t.Fatalf("max timestamp with the largest one remote: offset %d timestamp %d error %d, want offset %d timestamp %d", got.Offset, got.Timestamp, got.ErrorCode, maxAt, base+maxTs)
	}
	produce(200, maxTs+1)
	if got := listMax(); got.ErrorCode != 0 || got.Offset != 200 || got.Timestamp != base+maxTs+1 {
		t.Fatalf("max timestamp with a larger one local: offset %d timestamp %d error %d, want offset 200", got.Offset, got.Timestamp, got.ErrorCode)
	}
}
