package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleInitProducerID(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		// Transactions need a transaction coordinator, which Shale does not have yet;
		// a non-retriable error makes the client fail fast rather than retry forever.
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return Result{Resp: resp}
	}
	// An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or (KIP-679) WRITE on
	// some topic.
	if s.authorizing() && !s.visible(r, opIdempotentWrite, resCluster, clusterResource) && !s.allowedAnyTopic(r, opWrite) {
		s.auditDenial(r, s.principalOf(r), opIdempotentWrite, resCluster, clusterResource)
		resp.ErrorCode = errClusterDenied.Code
		return Result{Resp: resp}
	}
	// Without a transactional id Kafka always hands out a new id at epoch 0, also when
	// the producer asks to bump the epoch of its old one (KIP-360).
	id, err := s.deps.ProducerIDs.Next(ctx)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		s.lg.Warn("InitProducerId failed", "err", err)
		return Result{Resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return Result{Resp: resp}
}
