package share

import (
	"context"
	"encoding/binary"
)

// States is the share-partition state of share groups as the share-partition leaders
// persist it through the controller quorum (the leaders write it; the coordinator reads it
// for describe and list, and changes it only for the admin APIs, on groups without
// members, as Kafka's coordinator does through its persister).
type States interface {
	// ReadShareGroupState returns the state of every share partition of group that has
	// any, in no particular order; none (and no error) for a group without state.
	ReadShareGroupState(ctx context.Context, group string) ([]PartitionState, error)
	// AlterShareStartOffsets sets the start offsets of some of group's share partitions,
	// dropping their in-flight records (AlterShareGroupOffsets).
	AlterShareStartOffsets(ctx context.Context, group string, offsets []PartitionOffset) error
	// DeleteShareGroupState deletes the state of group's share partitions in
	// partitions, or all of them when partitions is nil.
	DeleteShareGroupState(ctx context.Context, group string, partitions map[string][]int32) error
	// ListShareStateGroups lists the groups that have share-partition state.
	ListShareStateGroups(ctx context.Context) ([]string, error)
}

// PartitionState is one share partition's persisted state, summarized.
type PartitionState struct {
	Topic     string
	Partition int32
	// StartOffset is the share-partition start offset: every record before it is
	// complete (acknowledged or archived). -1 before the partition is initialized.
	StartOffset int64
	StateEpoch  int32
	LeaderEpoch int32
	// InFlight counts the records at or after the start offset that are not yet
	// complete; Acquired those of them locked by a consumer now (as far as the leader
	// reports it); Acknowledged and Archived the records in the in-flight window already
	// accepted, or archived (delivery limit reached, or rejected).
	InFlight     int64
	Acquired     int64
	Acknowledged int64
	Archived     int64
}

// PartitionOffset is a new start offset for one share partition.
type PartitionOffset struct {
	Topic       string
	Partition   int32
	StartOffset int64
}

// CountsTag is the tagged field in which DescribeShareGroupOffsets carries a
// partition's in-flight, acquired, acknowledged and archived counts: a Shale extension
// (other clients skip tags they do not know) that `shale group describe` reads.
const CountsTag = 10932

// AppendCounts encodes the counts of s as CountsTag carries them: four
// big-endian int64s.
func AppendCounts(dst []byte, s PartitionState) []byte {
	for _, v := range []int64{s.InFlight, s.Acquired, s.Acknowledged, s.Archived} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// ParseCounts decodes what AppendCounts encoded into s's counts.
func ParseCounts(b []byte, s *PartitionState) bool {
	if len(b) != 32 {
		return false
	}
	s.InFlight = int64(binary.BigEndian.Uint64(b))
	s.Acquired = int64(binary.BigEndian.Uint64(b[8:]))
	s.Acknowledged = int64(binary.BigEndian.Uint64(b[16:]))
	s.Archived = int64(binary.BigEndian.Uint64(b[24:]))
	return true
}
