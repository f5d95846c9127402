package protocol

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeTransactions describes the transactions this broker coordinates
// (KIP-664); ids it does not coordinate get NOT_COORDINATOR, as in Kafka, and tools ask
// each id's coordinator.
func (s *Server) handleDescribeTransactions(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	mayDescribe := s.topicCheck(r, opDescribe)
	for _, id := range req.TransactionalIDs {
		rs := kmsg.NewDescribeTransactionsResponseTransactionState()
		rs.TransactionalID = id
		rs.ProducerID, rs.ProducerEpoch, rs.StartTimestamp = -1, -1, -1
		if !s.allowed(r, opDescribe, resTxnID, id) {
			rs.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, rs)
			continue
		}
		st, err := s.deps.Txn.Describe(id)
		if err != nil {
			rs.ErrorCode = errorCode(err)
			resp.TransactionStates = append(resp.TransactionStates, rs)
			continue
		}
		rs.State, rs.TimeoutMillis, rs.StartTimestamp = st.Status.String(), st.TimeoutMs, st.StartMs
		rs.ProducerID, rs.ProducerEpoch = st.ProducerID, st.ProducerEpoch
		for _, topic := range slices.Sorted(maps.Keys(st.Partitions)) {
			// Kafka leaves out the topics the caller may not describe.
			if !mayDescribe(topic) {
				continue
			}
			rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			rt.Topic, rt.Partitions = topic, st.Partitions[topic]
			rs.Topics = append(rs.Topics, rt)
		}
		resp.TransactionStates = append(resp.TransactionStates, rs)
	}
	return Result{Resp: resp}
}

// describeTransactionsAPI: every version kmsg knows.
var describeTransactionsAPI = api{key: kmsg.DescribeTransactions, min: 0, max: 0, handle: (*Server).handleDescribeTransactions, needs: needTxn | needGroups}
