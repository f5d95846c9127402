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
	// v5+ is transactions v2 (KIP-890 part 2): the end bumps the producer's epoch and
	// the response carries the id and epoch to continue with (-1 on error).
	pid, epoch, err := s.deps.Txn.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, r.Version >= 5)
	resp.ErrorCode = txnErrorCode(err, r.Version < 2)
	if err == nil {
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
	}
	return Result{Resp: resp}
}

// endTxnAPI: v0-v3; with transaction.version 2, v5 (KIP-890's second part: the epoch
// bump per transaction), with v4 between, which only adds TRANSACTION_ABORTABLE.
var endTxnAPI = api{key: kmsg.EndTxn, min: 0, max: 3, maxV2: 5, handle: (*Server).handleEndTxn, needs: needTxn | needGroups}
