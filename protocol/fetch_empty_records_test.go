package protocol_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchErrorCarriesEmptyRecords: a partition answered with an error carries an empty
// record set, not a null one, as Kafka's does (MemoryRecords.EMPTY): librdkafka refuses
// the whole response over a null set ("invalid MessageSetSize -1") and fetches again
// at once, forever, which left kcat spinning at a follower-fetching leader's redirect.
func TestFetchErrorCarriesEmptyRecords(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("empty-records", 1, nil)
	rc := dialRaw(t, tb.addr)
	for _, version := range []int16{4, 11} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "empty-records"
		for _, p := range []int32{0, 7} { // 7 does not exist
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 0, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d: response %+v", version, resp.Topics)
		}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.Partition == 7 && rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("v%d: partition 7 answered error %d, want UNKNOWN_TOPIC_OR_PARTITION", version, rp.ErrorCode)
			}
			if rp.RecordBatches == nil {
				t.Fatalf("v%d: partition %d (error %d) carries a null record set, want an empty one", version, rp.Partition, rp.ErrorCode)
			}
		}
	}
}
