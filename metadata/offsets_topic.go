package metadata

import (
	"crypto/sha256"
	"unicode/utf16"
)

// OffsetsTopic is Kafka's internal topic of committed offsets. Shale keeps the offsets in
// the controller quorum; the topic is a read-only view of them for the tools that read
// it (lag monitors such as Burrow), and its partitions stand for the coordinators: the
// "leader" of partition p coordinates every group that Kafka's hash puts in p.
const OffsetsTopic = "__consumer_offsets"

// DefaultOffsetsTopicPartitions is offsets.topic.num.partitions' default.
const DefaultOffsetsTopicPartitions = 50

// Coordinator is who coordinates the groups of one __consumer_offsets partition, as the
// controller last committed it.
type Coordinator struct {
	Broker      int32 // -1 while no broker is eligible
	BrokerEpoch int64 // the registration of Broker that holds the role
	// Epoch is the coordinator epoch: bumped every time Broker or BrokerEpoch changes,
	// as Kafka bumps the leader epoch of the offsets partition. A coordinator writes a
	// group's offsets under the epoch it loaded the group in, and the controller refuses
	// writes under any other (NOT_COORDINATOR).
	Epoch int32
}

// GroupFence names the coordinator writing a group's offsets: its broker id and the
// coordinator epoch of the group's offsets partition when it loaded the group.
type GroupFence struct {
	Broker int32
	Epoch  int32
}

// OffsetsPartition is the __consumer_offsets partition of a group, as Kafka computes it:
// Utils.abs(groupId.hashCode()) % n, with Java's String.hashCode.
func OffsetsPartition(group string, n int) int32 {
	if n <= 0 {
		return 0
	}
	var h int32
	for _, r := range group {
		if r1, r2 := utf16.EncodeRune(r); r1 != '\uFFFD' {
			h = 31*h + r1
			h = 31*h + r2
			continue
		}
		h = 31*h + r
	}
	// Kafka's Utils.abs maps MinInt32 to 0 rather than overflowing.
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(n)
}

// CoordinatorOf returns a group's offsets partition and its coordinator; ok is false
// while the image has no coordinators (before the first controller leader record).
func (im *Image) CoordinatorOf(group string) (int32, Coordinator, bool) {
	if im == nil || len(im.Coordinators) == 0 {
		return 0, Coordinator{Broker: -1}, false
	}
	p := OffsetsPartition(group, len(im.Coordinators))
	return p, im.Coordinators[p], true
}

// OffsetsTopicID is the topic id Shale gives __consumer_offsets in a cluster: derived from
// the cluster id, so that every broker reports the same one.
func OffsetsTopicID(clusterID string) [16]byte {
	sum := sha256.Sum256([]byte(OffsetsTopic + "/" + clusterID))
	var id [16]byte
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x40 // a version-4 shaped UUID
	id[8] = id[8]&0x3f | 0x80
	return id
}

// GroupFence is the fence under which the group's coordinator in this image writes its
// offsets.
func (im *Image) GroupFence(group string) GroupFence {
	_, c, _ := im.CoordinatorOf(group)
	return GroupFence{Broker: c.Broker, Epoch: c.Epoch}
}
