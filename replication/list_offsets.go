package replication

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/partition"
)

// Special ListOffsets timestamps.
const (
	ListLatest       = -1
	ListEarliest     = -2
	ListMaxTimestamp = -3 // KIP-734, ListOffsets v7+
)

// ListOffsetsPartition is one partition of a ListOffsets.
type ListOffsetsPartition struct {
	Topic              string
	Index              int32
	CurrentLeaderEpoch int32
	// Timestamp is the time to look up, or ListLatest, ListEarliest or ListMaxTimestamp.
	Timestamp int64
	// Follower is a replica's ListOffsets (ReplicaID >= 0): it sees up to the log end.
	Follower bool
	// ReadCommitted (isolation_level 1) sees up to the last stable offset.
	ReadCommitted bool
}

// ListedOffset is one partition's ListOffsets answer; -1 where there is nothing to say
// (no record at or after the timestamp, a timestamp for latest and earliest).
type ListedOffset struct {
	Offset      int64
	Timestamp   int64
	LeaderEpoch int32
}

// ListOffset answers ListOffsets for a partition this broker leads (Leader's fencing
// check), within the reader's read bound: latest is the bound itself, a timestamp
// finds the first record at or after it below the bound, max-timestamp the record
// with the largest timestamp below it.
func (m *Manager) ListOffset(lp ListOffsetsPartition) (ListedOffset, error) {
	none := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	p, err := m.Leader(lp.Topic, lp.Index, lp.CurrentLeaderEpoch)
	if err != nil {
		return none, err
	}
	out, err := listOffset(p, lp.Timestamp, isolationFor(lp.Follower, lp.ReadCommitted))
	if err != nil {
		return none, m.ReplicaGone(lp.Topic, lp.Index, err)
	}
	return out, nil
}

func listOffset(p *partition.Partition, ts int64, iso isolation) (ListedOffset, error) {
	out := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	limit := iso.limit(p)
	switch ts {
	case ListLatest:
		out.Offset, out.LeaderEpoch = limit, p.LeaderEpoch()
		return out, nil
	case ListEarliest:
		out.Offset = p.LogStartOffset()
		out.LeaderEpoch = epochAt(p, out.Offset)
		return out, nil
	case ListMaxTimestamp:
		return findMaxTimestamp(p, limit)
	}
	if ts < 0 {
		return out, fmt.Errorf("%w: timestamp %d", kerr.InvalidRequest, ts)
	}
	base, ok, err := p.OffsetForTimestamp(ts)
	if err != nil || !ok || base >= limit {
		return out, err
	}
	return refineToRecord(p, base, limit, func(recTS int64) bool { return recTS >= ts })
}

// refineToRecord finds, from the batch at base on, the first record below limit whose
// timestamp satisfies match.
func refineToRecord(p *partition.Partition, base, limit int64, match func(int64) bool) (ListedOffset, error) {
	out := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	for off := base; off < limit; {
		view, err := p.Read(off, 1, false, true)
		if err != nil {
			return out, err
		}
		if view.Size == 0 {
			view.Release()
			return out, nil
		}
		batch := view.Chunks[0]
		h, recs, err := records.Records(batch)
		if err != nil {
			view.Release()
			return out, err
		}
		for _, rec := range recs {
			recTS := h.FirstTimestamp + rec.TimestampDelta
			if h.LogAppendTime() {
				recTS = h.MaxTimestamp
			}
			if o := h.BaseOffset + int64(rec.OffsetDelta); o < limit && match(recTS) {
				out.Offset, out.Timestamp, out.LeaderEpoch = o, recTS, h.PartitionLeaderEpoch
				view.Release()
				return out, nil
			}
		}
		off = h.LastOffset() + 1
		view.Release()
	}
	return out, nil
}

func findMaxTimestamp(p *partition.Partition, limit int64) (ListedOffset, error) {
	var best shalelog.Header
	found := false
	err := p.ScanHeaders(p.LogStartOffset(), func(h shalelog.Header) bool {
		if h.BaseOffset >= limit {
			return false
		}
		if !found || h.MaxTimestamp > best.MaxTimestamp {
			best, found = h, true
		}
		return true
	})
	if err != nil || !found {
		return ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, err
	}
	return refineToRecord(p, best.BaseOffset, limit, func(ts int64) bool { return ts == best.MaxTimestamp })
}

// epochAt is the leader epoch of the batch holding offset, -1 when unknown.
func epochAt(p *partition.Partition, offset int64) int32 {
	epoch := int32(-1)
	p.ScanHeaders(offset, func(h shalelog.Header) bool {
		epoch = h.PartitionLeaderEpoch
		return false
	})
	return epoch
}
