package replication

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionEpochTag is the tagged field (Fetch v12+, flexible versions) in which a Shale
// follower tells the leader the partition epoch of the state its replica has applied.
// Kafka's Fetch has no such field; the leader needs it to tell a fetch sent by a replica
// since deleted and made anew from one sent by the replica it tracks (see
// partition.FollowerFetched). Tagged fields that a receiver does not know are skipped,
// so the tag is invisible to Kafka's brokers and clients; the number is far above the
// ones Kafka assigns, which count up from 0.
const partitionEpochTag = 10000

// SetFetchPartitionEpoch adds the follower's partition epoch to one partition of a
// replica Fetch.
func SetFetchPartitionEpoch(p *kmsg.FetchRequestTopicPartition, epoch int32) {
	p.UnknownTags.Set(partitionEpochTag, binary.BigEndian.AppendUint32(nil, uint32(epoch)))
}

// FetchPartitionEpoch is the partition epoch a replica Fetch's partition carries, or -1
// when it carries none (a consumer, a broker of an earlier version, a malformed tag).
func FetchPartitionEpoch(p *kmsg.FetchRequestTopicPartition) int32 {
	epoch := int32(-1)
	p.UnknownTags.Each(func(tag uint32, v []byte) {
		if tag == partitionEpochTag && len(v) == 4 {
			epoch = int32(binary.BigEndian.Uint32(v))
		}
	})
	return epoch
}
