package replication

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchPartitionEpochOnTheWire: the partition epoch a follower sets survives the
// Fetch encoding at the version the fetcher sends, and a fetch without it reads -1.
func TestFetchPartitionEpochOnTheWire(t *testing.T) {
	for _, epoch := range []int32{0, 7, 1 << 30} {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 15
		rt := kmsg.NewFetchRequestTopic()
		rp := kmsg.NewFetchRequestTopicPartition()
		SetFetchPartitionEpoch(&rp, epoch)
		rt.Partitions = append(rt.Partitions, rp, kmsg.NewFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)

		got := kmsg.NewPtrFetchRequest()
		got.Version = 15
		if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		ps := got.Topics[0].Partitions
		if e := FetchPartitionEpoch(&ps[0]); e != epoch {
			t.Fatalf("partition epoch %d read back as %d", epoch, e)
		}
		if e := FetchPartitionEpoch(&ps[1]); e != -1 {
			t.Fatalf("a partition without the tag read as epoch %d", e)
		}
	}
}
