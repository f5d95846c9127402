package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// registerTxn registers the transaction APIs at the versions real clients negotiate,
// capped below KIP-890's second part (AddPartitionsToTxn v5, EndTxn v4+, TxnOffsetCommit
// v4+, InitProducerId v5+: TRANSACTION_ABORTABLE and implicit partition adds), which
// clients would otherwise use to skip AddPartitionsToTxn. AddPartitionsToTxn v4 is the
// brokers' VerifyOnly form.
func (s *Server) registerTxn() {
	s.Register(kmsg.AddPartitionsToTxn, 0, 4, s.handleAddPartitionsToTxn)
	s.Register(kmsg.AddOffsetsToTxn, 0, 3, s.handleAddOffsetsToTxn)
	s.Register(kmsg.EndTxn, 0, 3, s.handleEndTxn)
	s.Register(kmsg.TxnOffsetCommit, 0, 3, s.handleTxnOffsetCommit)
	s.Register(kmsg.DescribeTransactions, 0, 0, s.handleDescribeTransactions)
	s.Register(kmsg.ListTransactions, 0, 1, s.handleListTransactions)
}

// txnErrorCode is err's code for a transaction API; old versions (before KIP-588) do
// not know PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH, which they handle alike.
func txnErrorCode(err error, beforeProducerFenced bool) int16 {
	if beforeProducerFenced && errors.Is(err, kerr.ProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return errorCode(err)
}
