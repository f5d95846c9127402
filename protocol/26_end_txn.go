package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleEndTxn commits or aborts a producer's transaction. It answers once the
// decision (PrepareCommit or PrepareAbort) is committed through the controller; the
// markers follow in the background, and until they are written the producer's next
// transaction gets CONCURRENT_TRANSACTIONS, which clients retry.
func (s *Server) handleEndTxn(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.allowed(r, opWrite, resTxnID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return Result{Resp: resp}
	}
	err := s.deps.Txn.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = txnErrorCode(err, r.Version < 2)
	return Result{Resp: resp}
}

// endTxnAPI: v0-v3; v4+ belong to KIP-890's second part, not served.
var endTxnAPI = api{key: kmsg.EndTxn, min: 0, max: 3, handle: (*Server).handleEndTxn, needs: needTxn | needGroups}
