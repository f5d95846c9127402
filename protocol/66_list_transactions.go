package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/metadata"
)

// handleListTransactions lists the transactions this broker coordinates (KIP-664), the
// ones the caller may describe; tools ask every broker.
func (s *Server) handleListTransactions(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters, MinDurationMs: -1}
	if r.Version >= 1 {
		f.MinDurationMs = req.DurationFilterMillis
	}
	for _, st := range req.StateFilters {
		if !knownTxnState(st) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, st)
			continue
		}
		f.States = append(f.States, st)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		// Only unknown states were asked for: nothing matches.
		return Result{Resp: resp}
	}
	states, loading := s.deps.Txn.List(f)
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return Result{Resp: resp}
	}
	for _, st := range states {
		if !s.visible(r, opDescribe, resTxnID, st.TransactionalID) {
			continue
		}
		rs := kmsg.NewListTransactionsResponseTransactionState()
		rs.TransactionalID, rs.ProducerID, rs.TransactionState = st.TransactionalID, st.ProducerID, st.Status.String()
		resp.TransactionStates = append(resp.TransactionStates, rs)
	}
	return Result{Resp: resp}
}

func knownTxnState(name string) bool {
	return slices.ContainsFunc([]metadata.TxnStatus{metadata.TxnEmpty, metadata.TxnOngoing, metadata.TxnPrepareCommit,
		metadata.TxnPrepareAbort, metadata.TxnCompleteCommit, metadata.TxnCompleteAbort, metadata.TxnDead,
		metadata.TxnPrepareEpochFence}, func(s metadata.TxnStatus) bool { return s.String() == name })
}

// listTransactionsAPI: v0-v1 (v1 filters by duration); v2 is not served.
var listTransactionsAPI = api{key: kmsg.ListTransactions, min: 0, max: 1, handle: (*Server).handleListTransactions, needs: needTxn | needGroups}
