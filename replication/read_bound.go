package replication

import (
	"github.com/shalelog/shale/partition"
)

// This file is the one place that decides how far a reader sees a partition (Kafka's
// FetchIsolation): Fetch reads up to it and ListOffsets answers within it, so that a
// consumer is never told of an offset it cannot read, nor reads one it was not told of.

// isolation is the bound of one reader's view of a replica.
type isolation int8

const (
	// isolationHW: a consumer at read_uncommitted sees up to the replica's high
	// watermark; a consumer served by a follower (KIP-392) so sees up to the follower's
	// own high watermark, never further than what the leader has told it is committed.
	isolationHW isolation = iota
	// isolationLogEnd: a follower sees up to the log end, whatever its isolation level;
	// its fetch offset is how the leader learns what it holds.
	isolationLogEnd
	// isolationCommitted: a read_committed consumer sees up to the last stable offset.
	isolationCommitted
)

// isolationFor is the bound of a reader: a follower (a replica's fetch or ListOffsets)
// or a consumer at read_committed or not.
func isolationFor(follower, readCommitted bool) isolation {
	switch {
	case follower:
		return isolationLogEnd
	case readCommitted:
		return isolationCommitted
	}
	return isolationHW
}

// ReadLimit is the first offset of p that a reader does not see now: where its Fetch
// stops and what ListOffsets answers it for latest. The share partitions acquire
// records within a read_uncommitted consumer's.
func ReadLimit(p *partition.Partition, follower, readCommitted bool) int64 {
	return isolationFor(follower, readCommitted).limit(p)
}

// limit is the first offset the reader does not see on p now.
func (i isolation) limit(p *partition.Partition) int64 {
	switch i {
	case isolationLogEnd:
		return p.LogEndOffset()
	case isolationCommitted:
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// readBound is what limited the read the Progress follows.
type readBound int8

const (
	// boundHW: a consumer's read up to the high watermark (read_committed too while
	// no transaction holds its last stable offset below the high watermark).
	boundHW readBound = iota
	// boundLogEnd: a follower's read up to the log end.
	boundLogEnd
	// boundLSO: a read_committed read stopped below the high watermark by an open
	// transaction. When the last stable offset moves it can reveal bytes that passed the
	// high watermark long ago, which no counter tracks.
	boundLSO
)

// progressBound is what limited a fetch that read at isolation i, stopping at the last
// stable offset lso when i is isolationCommitted, taken with the high watermark hw:
// what a parked long poll must watch to know that reading again could return more.
func (i isolation) progressBound(lso, hw int64) readBound {
	switch {
	case i == isolationLogEnd:
		return boundLogEnd
	case i == isolationCommitted && lso < hw:
		return boundLSO
	}
	return boundHW
}
