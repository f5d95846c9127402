package replication

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// Special ListOffsets timestamps.
const (
	ListLatest       = -1
	ListEarliest     = -2
	ListMaxTimestamp = -3 // KIP-734, ListOffsets v7+
	// ListEarliestLocal is the first offset of the local log (KIP-1005, ListOffsets
	// v9+): with tiered storage it is above the earliest offset, the remote log's start.
	ListEarliestLocal = -4
	// ListLatestTiered is the highest offset the remote log holds, -1 without one
	// (KIP-1005, ListOffsets v9+).
	ListLatestTiered = -5
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
	iso := isolationFor(lp.Follower, lp.ReadCommitted)
	if rl := m.remoteLog(p); rl != nil && !lp.Follower {
		if out, ok, err := m.listRemoteOffset(p, rl, lp.Timestamp, iso); err != nil || ok {
			return out, err
		}
	}
	switch lp.Timestamp {
	case ListEarliestLocal:
		lp.Timestamp = ListEarliest
	case ListLatestTiered:
		if rl := m.remoteLog(p); rl != nil && len(rl.Segments) > 0 {
			last := rl.Segments[len(rl.Segments)-1]
			out := ListedOffset{Offset: rl.HighestOffset, Timestamp: -1, LeaderEpoch: -1}
			if n := len(last.Epochs); n > 0 {
				out.LeaderEpoch = last.Epochs[n-1].Epoch
			}
			return out, nil
		}
		return none, nil
	}
	out, err := listOffset(p, lp.Timestamp, iso)
	if err != nil {
		return none, m.ReplicaGone(lp.Topic, lp.Index, err)
	}
	return out, nil
}

// listRemoteOffset answers the ListOffsets the remote log has a say in: earliest (its
// start, when below the local log's) and a timestamp its segments reach. ok false leaves
// the answer to the local log.
func (m *Manager) listRemoteOffset(p *partition.Partition, rl *metadata.RemoteLog, ts int64, iso isolation) (ListedOffset, bool, error) {
	none := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	switch {
	case ts == ListEarliest:
		start := logStart(p, rl)
		if start >= p.LogStartOffset() {
			return none, false, nil
		}
		out := ListedOffset{Offset: start, Timestamp: -1, LeaderEpoch: -1}
		if s, ok := rl.Find(start); ok {
			for _, e := range s.Epochs {
				if e.StartOffset <= start {
					out.LeaderEpoch = e.Epoch
				}
			}
		}
		return out, true, nil
	case ts >= 0:
		return m.remoteOffsetForTimestamp(rl, ts, min(iso.limit(p), p.LogStartOffset()))
	case ts == ListMaxTimestamp:
		return m.remoteMaxTimestamp(p, rl, iso)
	}
	return none, false, nil
}

// remoteMaxTimestamp answers max-timestamp over the whole log: the remote log's record
// with the largest timestamp when no local record's is larger (on a tie the earlier
// offset, as the local scan keeps the first), else the local log's.
func (m *Manager) remoteMaxTimestamp(p *partition.Partition, rl *metadata.RemoteLog, iso isolation) (ListedOffset, bool, error) {
	local, err := findMaxTimestamp(p, iso.limit(p))
	if err != nil {
		return local, false, m.ReplicaGone(p.Topic(), p.Index(), err)
	}
	var best metadata.RemoteSegment
	found := false
	for _, s := range rl.Segments {
		if s.EndOffset >= rl.StartOffset && (!found || s.MaxTimestampMs > best.MaxTimestampMs) {
			best, found = s, true
		}
	}
	if !found || best.MaxTimestampMs < 0 || (local.Offset >= 0 && local.Timestamp > best.MaxTimestampMs) {
		return local, true, nil
	}
	seg, ok := storeSegment(best)
	if !ok {
		return local, true, nil
	}
	ctx, cancel := m.withTimeout(m.ctx, m.cfg.RemoteRequestTimeout)
	defer cancel()
	base, ok, err := m.tier.reader.OffsetForTimestamp(ctx, seg, best.MaxTimestampMs)
	if err == nil && ok {
		var b []byte
		if b, err = m.tier.reader.Read(ctx, seg, max(base, rl.StartOffset), 1); err == nil {
			var out ListedOffset
			out, ok, err = recordAtOrAfter(b, rl.StartOffset, best.EndOffset+1, best.MaxTimestampMs)
			if err == nil && ok && out.Timestamp == best.MaxTimestampMs {
				return out, true, nil
			}
		}
	}
	if err != nil {
		m.tier.errs.WithLabelValues("read").Inc()
		return ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, false, fmt.Errorf("%w: reading the remote log: %w", kerr.KafkaStorageError, err)
	}
	// The record is below the log start (DeleteRecords cut into the segment).
	return local, true, nil
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
		found, ok, err := matchRecord(batch, 0, limit, match)
		if err != nil || ok {
			view.Release()
			return found, err
		}
		h, err := shalelog.ParseHeader(batch)
		view.Release()
		if err != nil {
			return out, err
		}
		off = h.LastOffset() + 1
	}
	return out, nil
}

// matchRecord finds the first record of one batch at or past start and below limit
// whose timestamp satisfies match.
func matchRecord(batch []byte, start, limit int64, match func(int64) bool) (ListedOffset, bool, error) {
	out := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	h, recs, err := records.Records(batch)
	if err != nil {
		return out, false, err
	}
	for _, rec := range recs {
		recTS := h.FirstTimestamp + rec.TimestampDelta
		if h.LogAppendTime() {
			recTS = h.MaxTimestamp
		}
		if o := h.BaseOffset + int64(rec.OffsetDelta); o >= start && o < limit && match(recTS) {
			out.Offset, out.Timestamp, out.LeaderEpoch = o, recTS, h.PartitionLeaderEpoch
			return out, true, nil
		}
	}
	return out, false, nil
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
