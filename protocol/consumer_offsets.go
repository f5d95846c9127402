package protocol

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// __consumer_offsets, as Kafka's tools expect it: listed in Metadata as an internal
// topic, read-only, and readable. Its records are not on any broker's disk: committed
// offsets live in the controller quorum, and the partition's "leader" (the coordinator
// of its groups) reads them from the controller as the compacted log Kafka would have
// (see controller/offsets_log.go), encoded with Kafka's OffsetCommit key and value
// schemas. The handlers reach this file through one call each.

// offsetsLogPoll is how long one wait of a fetch at the end of the view parks on the
// controller before the fetch looks again.
const offsetsLogPoll = 500 * time.Millisecond

// offsetsLogTimeout bounds one read of the view from the controller.
const offsetsLogTimeout = 5 * time.Second

// fillOffsetsTopic adds __consumer_offsets to a Metadata response: to every all-topics
// response, and in place of the UNKNOWN_TOPIC_OR_PARTITION entry the handler wrote for a
// request that names it.
func (s *Server) fillOffsetsTopic(im *metadata.Image, resp *kmsg.MetadataResponse, req *kmsg.MetadataRequest, all bool) {
	if len(im.Coordinators) == 0 {
		return
	}
	id := metadata.OffsetsTopicID(im.ClusterID)
	if all {
		resp.Topics = append(resp.Topics, offsetsTopicMetadata(im, id, req))
		return
	}
	for i := range resp.Topics {
		mt := &resp.Topics[i]
		if (mt.Topic != nil && *mt.Topic == metadata.OffsetsTopic) || (mt.Topic == nil && mt.TopicID == id) {
			*mt = offsetsTopicMetadata(im, id, req)
		}
	}
}

func offsetsTopicMetadata(im *metadata.Image, id [16]byte, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := metadata.OffsetsTopic
	mt.Topic, mt.TopicID, mt.IsInternal = &name, id, true
	mt.AuthorizedOperations = authorizedOpsUnset
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = 1<<3 | 1<<8 | 1<<10 // READ, DESCRIBE, DESCRIBE_CONFIGS
	}
	for p, co := range im.Coordinators {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = int32(p), -1, co.Epoch
		if b, ok := im.Brokers[co.Broker]; ok && !b.Fenced {
			mp.Leader = co.Broker
			mp.Replicas, mp.ISR = []int32{co.Broker}, []int32{co.Broker}
		} else {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offsetsTopicByID resolves the id of __consumer_offsets, which no topic in the image has.
func offsetsTopicByID(im *metadata.Image, id [16]byte) bool {
	return len(im.Coordinators) > 0 && id == metadata.OffsetsTopicID(im.ClusterID)
}

// internalTopicWriteError refuses a client's write to __consumer_offsets as Kafka's
// ReplicaManager does (InvalidTopicException: "Cannot append to internal topic").
func internalTopicWriteError(topic string) error {
	if topic != metadata.OffsetsTopic {
		return nil
	}
	return fmt.Errorf("%w: cannot append to internal topic %s", kerr.InvalidTopicException, topic)
}

// offsetsPartition checks that this broker serves partition p of the view at the
// leader epoch the client knows (-1: any).
func (s *Server) offsetsPartition(im *metadata.Image, p, currentEpoch int32) error {
	if p < 0 || int(p) >= len(im.Coordinators) {
		return kerr.UnknownTopicOrPartition
	}
	co := im.Coordinators[p]
	if err := replication.CheckLeaderEpoch(currentEpoch, co.Epoch); err != nil {
		return err
	}
	if co.Broker != s.cfg.NodeID {
		return kerr.NotLeaderForPartition
	}
	return nil
}

// fetchOffsetsTopic answers one Fetch partition of __consumer_offsets: it fills rp with
// the records from the fetch offset on and returns their size, or, with nothing to
// read, a channel closed once the controller has something new (or after a poll).
func (s *Server) fetchOffsetsTopic(im *metadata.Image, it fetchItem, maxBytes int, rp *kmsg.FetchResponseTopicPartition) (int, <-chan struct{}, error) {
	if err := s.offsetsPartition(im, it.key.partition, it.part.CurrentLeaderEpoch); err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), offsetsLogTimeout)
	defer cancel()
	slice, err := s.deps.Meta.ReadOffsetsLog(ctx, it.key.partition, it.part.FetchOffset, int32(min(maxBytes, math.MaxInt32)), 0)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: reading committed offsets from the controller: %v", kerr.NotLeaderForPartition, err)
	}
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = slice.LogEnd, slice.LogEnd, slice.LogStart
	if it.part.FetchOffset < slice.LogStart || it.part.FetchOffset > slice.LogEnd {
		return 0, nil, kerr.OffsetOutOfRange
	}
	if len(slice.Records) == 0 {
		return 0, s.pollOffsetsLog(it.key.partition, it.part.FetchOffset), nil
	}
	batch, err := offsetsBatch(slice.Records)
	if err != nil {
		return 0, nil, err
	}
	rp.RecordBatches = batch
	return len(batch), nil, nil
}

// pollOffsetsLog returns a channel closed when the controller reports a record of
// partition p at from or later, or after offsetsLogPoll; the fetch then looks again.
func (s *Server) pollOffsetsLog(p int32, from int64) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		ctx, cancel := context.WithTimeout(context.Background(), offsetsLogPoll+offsetsLogTimeout)
		defer cancel()
		_, _ = s.deps.Meta.ReadOffsetsLog(ctx, p, from, 1, offsetsLogPoll)
	}()
	return ch
}

// offsetsBatch encodes records (in offset order) as one RecordBatch, as a compacted
// partition holds them: offsets with gaps, keys and values in the versions Kafka writes
// (key v1; value v3, or v1 for an offset with an explicit expiry), a tombstone's value
// null. Records that would overflow the batch's int32 offset deltas wait for the next
// fetch.
func offsetsBatch(recs []metadata.OffsetsLogRecord) ([]byte, error) {
	base := recs[0].LogOffset
	first, maxTS := int64(-1), int64(-1)
	out := make([]records.Record, 0, len(recs))
	for _, r := range recs {
		if r.LogOffset-base > math.MaxInt32 {
			break
		}
		key := kmsg.OffsetCommitKey{Version: 1, Group: r.Group, Topic: r.Offset.Topic, Partition: r.Offset.Partition}
		rec := records.Record{OffsetDelta: int32(r.LogOffset - base), Key: key.AppendTo(nil)}
		ts := time.Now().UnixMilli() // a tombstone's time is when it is read
		if !r.Tombstone {
			v := kmsg.OffsetCommitValue{Version: 3, Offset: r.Offset.Offset, LeaderEpoch: r.Offset.LeaderEpoch,
				Metadata: r.Offset.Metadata, CommitTimestamp: r.Offset.CommitTime.UnixMilli()}
			if !r.Offset.ExpireTime.IsZero() {
				v.Version, v.ExpireTimestamp = 1, r.Offset.ExpireTime.UnixMilli()
			}
			rec.Value = v.AppendTo(nil)
			ts = v.CommitTimestamp
		}
		if first < 0 {
			first = ts
		}
		rec.TimestampDelta = ts - first
		maxTS = max(maxTS, ts)
		out = append(out, rec)
	}
	h := shalelog.Header{BaseOffset: base, PartitionLeaderEpoch: -1, FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := records.Build(h, shalelog.CodecNone, out)
	if err != nil {
		return nil, fmt.Errorf("encode %s records: %w", metadata.OffsetsTopic, err)
	}
	return b, nil
}

// listOffsetsTopic answers ListOffsets for a partition of __consumer_offsets: earliest
// is the view's start, latest its end; a timestamp finds the first commit at or after
// it.
func (s *Server) listOffsetsTopic(lp kmsg.ListOffsetsRequestTopicPartition, rp *kmsg.ListOffsetsResponseTopicPartition) {
	im := s.image()
	if err := s.offsetsPartition(im, lp.Partition, lp.CurrentLeaderEpoch); err != nil {
		rp.ErrorCode = errorCode(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), offsetsLogTimeout)
	defer cancel()
	maxBytes := int32(0)
	if lp.Timestamp >= 0 || lp.Timestamp == replication.ListMaxTimestamp {
		maxBytes = math.MaxInt32
	}
	slice, err := s.deps.Meta.ReadOffsetsLog(ctx, lp.Partition, 0, maxBytes, 0)
	if err != nil {
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	rp.LeaderEpoch = im.Coordinators[lp.Partition].Epoch
	switch {
	case lp.Timestamp == replication.ListLatest:
		rp.Offset = slice.LogEnd
	case lp.Timestamp == replication.ListEarliest:
		rp.Offset = slice.LogStart
	case lp.Timestamp == replication.ListMaxTimestamp || lp.Timestamp >= 0:
		// Offset -1 when no commit matches, as for a log without such a record.
		for _, r := range slice.Records {
			if r.Tombstone {
				continue
			}
			ts := r.Offset.CommitTime.UnixMilli()
			if lp.Timestamp == replication.ListMaxTimestamp && ts > rp.Timestamp || lp.Timestamp >= 0 && ts >= lp.Timestamp && rp.Timestamp < 0 {
				rp.Offset, rp.Timestamp = r.LogOffset, ts
			}
		}
	default:
		rp.ErrorCode = kerr.InvalidRequest.Code
	}
}
