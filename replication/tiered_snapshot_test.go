package replication_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/server/broker/brokertest"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// TestTieredStorageUploadsProducerSnapshots: every uploaded segment carries the
// partition's producer state as of its end, as Kafka's producer snapshots: an idempotent
// producer's last sequence there is the segment's last offset (one record per batch,
// sequence 0 at offset 0), so that a replica rebuilding from the remote log could
// restore it.
func TestTieredStorageUploadsProducerSnapshots(t *testing.T) {
	store := objstore.NewMemory()
	b := brokertest.Start(t, tieredOptions(store),
		brokertest.WithController(controllertest.WithConfig(func(c *controller.Config) { c.RemoteLogStorageSystemEnable = true })))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.Client(kgo.ProducerLinger(0))
	defer cl.Close()
	const topic = "snapshots"
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
	for i := range 200 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%d-%0100d", i, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "uploads", func() bool { return b.Replicas().Image().RemoteLog(topic, 0).CoveredEnd() > 100 })
	producers := b.Replicas().Replica(topic, 0).Producers()
	if len(producers) != 1 {
		t.Fatalf("%d producers, want the one idempotent producer", len(producers))
	}
	r := remotelog.NewReader(remotelog.Direct(store))
	rl := b.Replicas().Image().RemoteLog(topic, 0)
	for _, s := range rl.Segments {
		seg := remotelog.Segment{TopicID: s.TopicID, Partition: s.Partition, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset}
		if _, err := hex.Decode(seg.UploadID[:], []byte(s.UploadID)); err != nil {
			t.Fatal(err)
		}
		raw, err := r.ProducerSnapshot(ctx, seg)
		if err != nil {
			t.Fatal(err)
		}
		if raw == nil {
			t.Fatalf("segment %d-%d uploaded without a producer snapshot", s.BaseOffset, s.EndOffset)
		}
		snap, err := partition.DecodeProducerSnapshot(raw)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Offset != s.EndOffset+1 || len(snap.Producers) != 1 || snap.Producers[0].ProducerID != producers[0].ProducerID ||
			int64(snap.Producers[0].LastSequence) != s.EndOffset {
			t.Fatalf("segment %d-%d: snapshot %+v, want producer %d at sequence %d as of %d", s.BaseOffset, s.EndOffset, snap, producers[0].ProducerID, s.EndOffset, s.EndOffset+1)
		}
	}
}
