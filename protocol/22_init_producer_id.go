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
		return s.initTransactionalProducer(ctx, r, req, resp)
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

// initTransactionalProducer is InitProducerId with a transactional id: the transaction
// coordinator hands out the id's producer id and bumps its epoch.
func (s *Server) initTransactionalProducer(ctx context.Context, r *Request, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) Result {
	id := *req.TransactionalID
	switch {
	case s.deps.Txn == nil:
		// Without a coordinator a non-retriable error makes the client fail fast rather
		// than retry forever.
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return Result{Resp: resp}
	case !s.allowed(r, opWrite, resTxnID, id):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return Result{Resp: resp}
	}
	expectedPID, expectedEpoch := int64(-1), int16(-1)
	if r.Version >= 3 {
		expectedPID, expectedEpoch = req.ProducerID, req.ProducerEpoch
	}
	pid, epoch, err := s.deps.Txn.InitProducerID(ctx, id, req.TransactionTimeoutMillis, expectedPID, expectedEpoch)
	if err != nil {
		resp.ErrorCode = txnErrorCode(err, r.Version < 4)
		return Result{Resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	return Result{Resp: resp}
}

// initProducerIDAPI: v0 for librdkafka; capped below KIP-890's second part (v5+,
// TRANSACTION_ABORTABLE), as are the transaction APIs (txn.go).
var initProducerIDAPI = api{key: kmsg.InitProducerID, min: 0, max: 4, handle: (*Server).handleInitProducerID, errors: errorsOf(initProducerIDError)}

func initProducerIDError(req *kmsg.InitProducerIDRequest, code int16) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
