package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/metadata"
)

func (s *Server) handleOffsetCommit(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.CommitRequest{
		Group:      req.Group,
		MemberID:   req.MemberID,
		InstanceID: optString(req.InstanceID),
		Generation: req.Generation,
		// From v9 the generation of a consumer group's member is its member epoch.
		MemberEpochs: r.Version >= 9,
	}
	if r.Version >= 2 && r.Version <= 4 && req.RetentionTimeMillis > 0 {
		cr.Retention = time.Duration(req.RetentionTimeMillis) * time.Millisecond
	}
	if !s.allowed(r, opRead, resGroup, req.Group) {
		return Result{Resp: offsetCommitError(req, errGroupDenied.Code)}
	}
	mayRead := s.topicCheck(r, opRead)
	for _, t := range req.Topics {
		if !mayRead(t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			o := metadata.CommittedOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1, Metadata: optString(p.Metadata)}
			if r.Version >= 6 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			cr.Offsets = append(cr.Offsets, o)
		}
	}
	errs, err := s.deps.Groups.CommitOffsets(ctx, cr)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if !mayRead(t.Topic) {
				rp.ErrorCode = errTopicDenied.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if err != nil {
				rp.ErrorCode = errorCode(err)
			} else {
				rp.ErrorCode = errorCode(errs[i])
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

func offsetCommitError(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetCommitAPI: from v2, the first that librdkafka needs and the first without v1's
// per-partition commit timestamps; v9 is KIP-848's (member epochs, STALE_MEMBER_EPOCH);
// capped below topic ids (v10).
var offsetCommitAPI = api{key: kmsg.OffsetCommit, min: 2, max: 9, handle: (*Server).handleOffsetCommit, needs: needGroups, errors: errorsOf(offsetCommitError)}
