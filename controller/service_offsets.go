package controller

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) AllocateProducerIds(ctx context.Context, req *pb.AllocateProducerIdsRequest) (*pb.AllocateProducerIdsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIdsRecord{
		BrokerId: req.BrokerId, BrokerEpoch: req.BrokerEpoch, Count: defaultProducerIDsPerCall}}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err != nil {
		return &pb.AllocateProducerIdsResponse{Error: toPBError(res.err)}, nil
	}
	b := res.value.(producerIDBlock)
	return &pb.AllocateProducerIdsResponse{FirstProducerId: b.first, Count: b.count}, nil
}

func validateCommit(group string, offsets []*pb.OffsetEntry) error {
	if group == "" {
		return kafkaErrorf(kerr.InvalidGroupID, "group id is empty")
	}
	// offset.metadata.max.bytes is the group coordinator's to apply, per partition; this
	// is only the quorum's sanity bound, which that setting may not exceed, measured alike.
	for _, o := range offsets {
		if !metadata.OffsetMetadataFits(o.Metadata, metadata.MaxOffsetMetadataBytes) {
			return kafkaErrorf(kerr.OffsetMetadataTooLarge, "%s-%d: metadata of %d bytes exceeds the controller's bound of %d UTF-16 code units",
				o.Topic, o.Partition, len(o.Metadata), metadata.MaxOffsetMetadataBytes)
		}
	}
	return nil
}

func (v *service) CommitOffsets(ctx context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := validateCommit(req.Group, req.Offsets); err != nil {
		return &pb.CommitOffsetsResponse{Error: toPBError(err)}, nil
	}
	now := time.Now().UnixMilli()
	for _, o := range req.Offsets {
		if o.CommitTimeMs == 0 {
			o.CommitTimeMs = now
		}
	}
	kafkaErr, err := v.outcome(v.s.committer.submit(ctx, &pb.OffsetOp{Group: req.Group, Commits: req.Offsets,
		Fenced: true, CoordinatorId: req.CoordinatorId, CoordinatorEpoch: req.CoordinatorEpoch}))
	if err != nil {
		return nil, err
	}
	return &pb.CommitOffsetsResponse{Error: kafkaErr}, nil
}

func topicFilter(all bool, tps []*pb.TopicPartitions) map[string][]int32 {
	if all {
		return nil
	}
	out := make(map[string][]int32, len(tps))
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
	}
	return out
}

func (v *service) FetchOffsets(ctx context.Context, req *pb.FetchOffsetsRequest) (*pb.FetchOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.FetchOffsetsResponse{}
	for _, o := range v.s.fsm.fetchOffsets(req.Group, topicFilter(req.AllTopics, req.Topics)) {
		resp.Offsets = append(resp.Offsets, offsetToPB(o))
	}
	return resp, nil
}

func offsetToPB(o metadata.CommittedOffset) *pb.OffsetEntry {
	e := &pb.OffsetEntry{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	if !o.CommitTime.IsZero() {
		e.CommitTimeMs = o.CommitTime.UnixMilli()
	}
	if !o.ExpireTime.IsZero() {
		e.ExpireTimeMs = o.ExpireTime.UnixMilli()
	}
	return e
}

func (v *service) DeleteGroupOffsets(ctx context.Context, req *pb.DeleteGroupOffsetsRequest) (*pb.DeleteGroupOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Group == "" {
		return &pb.DeleteGroupOffsetsResponse{Error: toPBError(kafkaErrorf(kerr.InvalidGroupID, "group id is empty"))}, nil
	}
	op := &pb.OffsetOp{Group: req.Group, Delete: true, DeleteAll: req.AllTopics, DeleteTopics: req.Topics,
		Fenced: true, CoordinatorId: req.CoordinatorId, CoordinatorEpoch: req.CoordinatorEpoch}
	kafkaErr, err := v.outcome(v.s.committer.submit(ctx, op))
	if err != nil {
		return nil, err
	}
	return &pb.DeleteGroupOffsetsResponse{Error: kafkaErr}, nil
}

// maxOffsetsLogWait bounds a ReadOffsetsLog long poll, whatever the broker asks.
const maxOffsetsLogWait = 30 * time.Second

func (v *service) ReadOffsetsLog(ctx context.Context, req *pb.ReadOffsetsLogRequest) (*pb.ReadOffsetsLogResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	wait := min(time.Duration(req.MaxWaitMs)*time.Millisecond, maxOffsetsLogWait)
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		recs, end, changed, err := v.s.fsm.readOffsetsLog(req.Partition, req.FromOffset, int(req.MaxBytes))
		if err != nil {
			return &pb.ReadOffsetsLogResponse{Error: toPBError(err)}, nil
		}
		if len(recs) > 0 || timer == nil {
			resp := &pb.ReadOffsetsLogResponse{LogEnd: end, Records: make([]*pb.OffsetsLogRecord, len(recs))}
			for i, r := range recs {
				e := offsetToPB(r.Offset)
				e.LogOffset = r.LogOffset
				resp.Records[i] = &pb.OffsetsLogRecord{Group: r.Group, Tombstone: r.Tombstone, Offset: e}
			}
			return resp, nil
		}
		select {
		case <-changed:
		case <-timer:
			timer = nil // one last read
		case <-ctx.Done():
			return nil, v.rpcError(ctx.Err())
		case <-v.s.ctx.Done():
			return nil, v.rpcError(raft.ErrRaftShutdown)
		}
	}
}

func (v *service) ListOffsetGroups(ctx context.Context, _ *pb.ListOffsetGroupsRequest) (*pb.ListOffsetGroupsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.ListOffsetGroupsResponse{Groups: v.s.fsm.offsetGroups()}, nil
}
