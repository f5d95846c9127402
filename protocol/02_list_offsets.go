package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// Special ListOffsets timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3 // KIP-734, v7+
)

func (s *Server) handleListOffsets(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	mayDescribe := s.topicCheck(r, opDescribe)
	if req.ReplicaID >= 0 && s.authorizing() {
		// A follower (Shale's fetcher resets an out-of-range replica with ListOffsets)
		// is a broker: CLUSTER_ACTION, as for its Fetch, rather than DESCRIBE.
		ok := s.allowedCluster(r, opClusterAction)
		mayDescribe = func(string) bool { return ok }
	}
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, lp := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = lp.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			if !mayDescribe(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if t.Topic == metadata.OffsetsTopic {
				s.listOffsetsTopic(lp, &rp) // consumer_offsets.go
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			p, err := s.deps.Replicas.Leader(t.Topic, lp.Partition, lp.CurrentLeaderEpoch)
			if err != nil {
				rp.ErrorCode = errorCode(err)
			}
			if rp.ErrorCode == 0 {
				if err := listOffset(p, lp.Timestamp, req.ReplicaID >= 0, req.IsolationLevel == 1, &rp); err != nil {
					rp.ErrorCode = errorCode(s.deps.Replicas.ReplicaGone(t.Topic, lp.Partition, err))
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// listOffset fills rp with the offset for ts. Consumers see up to the high watermark,
// read_committed ones up to the last stable offset; followers see the log end.
func listOffset(p *partition.Partition, ts int64, follower, readCommitted bool, rp *kmsg.ListOffsetsResponseTopicPartition) error {
	limit := p.HighWatermark()
	switch {
	case follower:
		limit = p.LogEndOffset()
	case readCommitted:
		limit = p.LastStableOffset()
	}
	switch ts {
	case listLatest:
		rp.Offset, rp.LeaderEpoch = limit, p.LeaderEpoch()
		return nil
	case listEarliest:
		rp.Offset = p.LogStartOffset()
		rp.LeaderEpoch = epochAt(p, rp.Offset)
		return nil
	case listMaxTimestamp:
		return findMaxTimestamp(p, limit, rp)
	}
	if ts < 0 {
		return fmt.Errorf("%w: timestamp %d", kerr.InvalidRequest, ts)
	}
	base, ok, err := p.OffsetForTimestamp(ts)
	if err != nil || !ok || base >= limit {
		return err
	}
	return refineToRecord(p, base, limit, func(recTS int64) bool { return recTS >= ts }, rp)
}

// refineToRecord finds, from the batch at base on, the first record whose timestamp
// satisfies match, and fills rp with it.
func refineToRecord(p *partition.Partition, base, limit int64, match func(int64) bool, rp *kmsg.ListOffsetsResponseTopicPartition) error {
	for off := base; off < limit; {
		view, err := p.Read(off, 1, false, true)
		if err != nil {
			return err
		}
		if view.Size == 0 {
			view.Release()
			return nil
		}
		batch := view.Chunks[0]
		h, recs, err := records.Records(batch)
		if err != nil {
			view.Release()
			return err
		}
		for _, rec := range recs {
			recTS := h.FirstTimestamp + rec.TimestampDelta
			if h.LogAppendTime() {
				recTS = h.MaxTimestamp
			}
			if o := h.BaseOffset + int64(rec.OffsetDelta); o < limit && match(recTS) {
				rp.Offset, rp.Timestamp, rp.LeaderEpoch = o, recTS, h.PartitionLeaderEpoch
				view.Release()
				return nil
			}
		}
		off = h.LastOffset() + 1
		view.Release()
	}
	return nil
}

func findMaxTimestamp(p *partition.Partition, limit int64, rp *kmsg.ListOffsetsResponseTopicPartition) error {
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
		return err
	}
	return refineToRecord(p, best.BaseOffset, limit, func(ts int64) bool { return ts == best.MaxTimestamp }, rp)
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

func listOffsetsError(req *kmsg.ListOffsetsRequest, code int16) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.Timestamp, rp.Offset, rp.LeaderEpoch = p.Partition, code, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listOffsetsAPI: from v1 (v0's list of offsets per partition is not served; librdkafka
// needs at most v1 as minimum) to v7, KIP-734's max timestamp. v8+ (KIP-1005's
// local-log timestamps and later) are not served.
var listOffsetsAPI = api{key: kmsg.ListOffsets, min: 1, max: 7, handle: (*Server).handleListOffsets, errors: errorsOf(listOffsetsError)}
