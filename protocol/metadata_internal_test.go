package protocol

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// A topic's offline replicas come from the image that answers the request, not from
// whatever image is current by the time the topic is written: one response, one image.
func TestMetadataTopicUsesTheRequestImage(t *testing.T) {
	im := &metadata.Image{
		Brokers: map[int32]metadata.Broker{1: {ID: 1}, 2: {ID: 2, Fenced: true}},
		Topics: map[string]*metadata.Topic{"t": {Name: "t", Partitions: []metadata.Partition{
			{Topic: "t", Index: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1}}}},
	}
	mt := metadataTopic(im, im.Topics["t"], kmsg.NewPtrMetadataRequest())
	if got := mt.Partitions[0].OfflineReplicas; !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("offline replicas %v, want [2 3]", got)
	}
}
