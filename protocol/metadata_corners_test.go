package protocol_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
)

func autoCreateMetadata(rc *rawConn, topic string) kmsg.MetadataResponseTopic {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	req.AllowAutoTopicCreation = true
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: strPtr(topic)}}
	return rc.roundTrip(req).(*kmsg.MetadataResponse).Topics[0]
}

// A Metadata request that may auto-create a topic that was just deleted answers as Kafka
// does: the topic is created in the background and this answer says LEADER_NOT_AVAILABLE
// with no partitions; a later request sees the new topic.
func TestMetadataAutoCreateAnswersFromItsImage(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("gone", 2, nil)
	oldID := tb.broker.Image().Topic("gone").ID
	if _, err := tb.admin().DeleteTopic(ctxTimeout(t, 10*time.Second), "gone"); err != nil {
		t.Fatal(err)
	}
	tb.waitApplied("the deletion", func(im *metadata.Image) bool { return im.Topic("gone") == nil })

	rc := dialRaw(t, tb.addr)
	mt := autoCreateMetadata(rc, "gone")
	if mt.ErrorCode != kerr.LeaderNotAvailable.Code || len(mt.Partitions) != 0 {
		t.Fatalf("first answer: error %v, %d partitions; want LEADER_NOT_AVAILABLE and none", kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
	}
	im := tb.waitApplied("the re-creation", func(im *metadata.Image) bool { return im.Topic("gone") != nil })
	if im.Topic("gone").ID == oldID {
		t.Fatal("recreated topic kept the old id")
	}
	if mt := autoCreateMetadata(rc, "gone"); mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
		t.Fatalf("after creation: error %v, %d partitions", kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
	}
}

// An auto-creation that fails says why on the next request, instead of
// LEADER_NOT_AVAILABLE forever.
func TestMetadataAutoCreateFailureSurfaces(t *testing.T) {
	tb := startBroker(t, func(c *protocol.Config) { c.DefaultReplicationFactor = 3 })
	rc := dialRaw(t, tb.addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mt := autoCreateMetadata(rc, "too-replicated")
		if mt.ErrorCode == kerr.InvalidReplicationFactor.Code {
			break
		}
		if mt.ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("error %v, want LEADER_NOT_AVAILABLE then INVALID_REPLICATION_FACTOR", kerr.ErrorForCode(mt.ErrorCode))
		}
		if time.Now().After(deadline) {
			t.Fatal("still LEADER_NOT_AVAILABLE after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
