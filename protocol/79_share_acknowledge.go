package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleShareAcknowledge is KIP-932's ShareAcknowledge: acknowledgements outside a fetch,
// each partition answered once its new state is committed. Epoch -1 also closes the
// share session, releasing what the member still holds on its partitions.
func (s *Server) handleShareAcknowledge(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(err *kerr.Error) Result {
		resp.ErrorCode = err.Code
		return Result{Resp: resp}
	}
	group, member, code := s.shareRequester(r, req.GroupID, req.MemberID)
	if code != nil {
		return fail(code)
	}
	renew := req.Version >= 2 && req.IsRenewAck
	var acks []*ackPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			acks = append(acks, &ackPart{key: sharePartKey{t.TopicID, p.Partition}, batches: ackBatchesOf(p.AcknowledgementBatches,
				func(b *kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
				})})
		}
	}
	key := shareSessionKey{group, member}
	var closed []sharePartKey
	switch epoch := req.ShareSessionEpoch; epoch {
	case 0:
		// Nothing was acquired in a session not yet opened.
		return fail(kerr.InvalidShareSessionEpoch)
	case -1:
		var err error
		if closed, err = s.shareSessions.close(key); err != nil {
			return fail(err.(*kerr.Error))
		}
	default:
		if _, err := s.shareSessions.advance(key, epoch, nil, nil); err != nil {
			return fail(err.(*kerr.Error))
		}
	}
	s.acknowledge(ctx, r, group, member, acks, renew)
	if closed != nil {
		s.deps.Shares.ReleaseMember(ctx, shareKeys(s.image(), group, closed), member)
	}
	topicIdx := map[[16]byte]int{}
	var hints bool
	for _, a := range acks {
		ti, ok := topicIdx[a.key.topicID]
		if !ok {
			ti = len(resp.Topics)
			topicIdx[a.key.topicID] = ti
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = a.key.topicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition, p.ErrorCode = a.key.partition, a.code
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		if a.leader != nil && a.leader.Leader >= 0 {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = a.leader.Leader, a.leader.LeaderEpoch
			hints = true
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
	if hints {
		for _, b := range liveBrokers(s.image(), r.Listener) {
			ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
			ne.NodeID, ne.Host, ne.Port, ne.Rack = b.ID, b.Host, b.Port, rackOf(b)
			resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
		}
	}
	return Result{Resp: resp}
}

// shareAcknowledgeAPI: as ShareFetch's versions; v2 renews locks (KIP-1222).
var shareAcknowledgeAPI = api{key: kmsg.ShareAcknowledge, min: 0, max: 2, handle: (*Server).handleShareAcknowledge, needs: needShares}
