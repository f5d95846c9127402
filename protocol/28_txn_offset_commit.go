package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/metadata"
)

// handleTxnOffsetCommit is the group coordinator's side of a transaction's offsets: they
// are stored pending in the transaction and become the group's committed offsets when
// it commits (dropped if it aborts).
func (s *Server) handleTxnOffsetCommit(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	answer := func(code func(topic string, i int) int16) Result {
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code(t.Topic, i)
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return Result{Resp: resp}
	}
	all := func(c int16) Result { return answer(func(string, int) int16 { return c }) }
	switch {
	case !s.allowed(r, opWrite, resTxnID, req.TransactionalID):
		return all(kerr.TransactionalIDAuthorizationFailed.Code)
	case !s.allowed(r, opRead, resGroup, req.Group):
		return all(errGroupDenied.Code)
	}
	cr := group.CommitRequest{Group: req.Group, Generation: -1}
	if r.Version >= 3 {
		cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, optString(req.InstanceID)
	}
	mayRead := s.topicCheck(r, opRead)
	for _, t := range req.Topics {
		if !mayRead(t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			o := metadata.CommittedOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1, Metadata: optString(p.Metadata)}
			if r.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			cr.Offsets = append(cr.Offsets, o)
		}
	}
	if r.Version >= 5 {
		// Transactions v2: the group joins the transaction here, not through the
		// client's AddOffsetsToTxn.
		if err := s.deps.TxnVerifier.AddGroup(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); err != nil {
			code := txnErrorCode(err, false)
			return answer(func(topic string, _ int) int16 {
				if !mayRead(topic) {
					return errTopicDenied.Code
				}
				return code
			})
		}
	}
	write := func(ctx context.Context, fence metadata.GroupFence, offsets []metadata.CommittedOffset) error {
		return s.deps.Txn.CommitOffsets(ctx, fence, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offsets)
	}
	errs, err := s.deps.Groups.CommitTxnOffsets(ctx, cr, write)
	j := 0
	return answer(func(topic string, _ int) int16 {
		if !mayRead(topic) {
			return errTopicDenied.Code
		}
		defer func() { j++ }()
		if err != nil {
			return txnErrorCode(err, r.Version < 3)
		}
		return txnErrorCode(errs[j], r.Version < 3)
	})
}

// txnOffsetCommitAPI: v0-v3; with transaction.version 2 and a verifier to add through,
// v5 (v4 only adds TRANSACTION_ABORTABLE; v5 adds the group to the transaction,
// KIP-890's second part).
var txnOffsetCommitAPI = api{key: kmsg.TxnOffsetCommit, min: 0, max: 3, maxV2: 5, needsV2: needTxnVerifier,
	handle: (*Server).handleTxnOffsetCommit, needs: needTxn | needGroups}
