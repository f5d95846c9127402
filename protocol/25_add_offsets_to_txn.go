package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAddOffsetsToTxn adds a consumer group to a producer's transaction, so that its
// TxnOffsetCommits commit with it.
func (s *Server) handleAddOffsetsToTxn(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !s.allowed(r, opWrite, resTxnID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.allowed(r, opRead, resGroup, req.Group):
		resp.ErrorCode = errGroupDenied.Code
	default:
		err := s.deps.Txn.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		resp.ErrorCode = txnErrorCode(err, r.Version < 2)
	}
	return Result{Resp: resp}
}

// addOffsetsToTxnAPI: v0-v3; v4 belongs to KIP-890's second part, not served.
var addOffsetsToTxnAPI = api{key: kmsg.AddOffsetsToTxn, min: 0, max: 3, handle: (*Server).handleAddOffsetsToTxn, needs: needTxn | needGroups}
