package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// registerTxn registers the transaction APIs at the versions real clients negotiate.
// AddPartitionsToTxn v4 is the brokers' VerifyOnly form. With transaction.version 2 the
// broker serves KIP-890's second part: EndTxn v5 (the epoch bump per transaction, with
// v4 between, which only adds TRANSACTION_ABORTABLE), AddPartitionsToTxn v5 (a partition
// leader's or group coordinator's implicit add) and TxnOffsetCommit v5 (the group joins
// the transaction without AddOffsetsToTxn).
func (s *Server) registerTxn() {
	addPartitionsMax, endTxnMax := int16(4), int16(3)
	if s.cfg.TransactionVersion >= 2 {
		addPartitionsMax, endTxnMax = 5, 5
	}
	s.Register(kmsg.AddPartitionsToTxn, 0, addPartitionsMax, s.handleAddPartitionsToTxn)
	s.Register(kmsg.AddOffsetsToTxn, 0, 3, s.handleAddOffsetsToTxn)
	s.Register(kmsg.EndTxn, 0, endTxnMax, s.handleEndTxn)
	s.Register(kmsg.TxnOffsetCommit, 0, s.txnOffsetCommitMaxVersion(), s.handleTxnOffsetCommit)
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

// produceMaxVersion is Produce's highest version: v12 (v10 and v11 only add optional
// tagged fields to the response, KIP-951) with transaction.version 2, where v12's
// transactional batches join their transaction without AddPartitionsToTxn (KIP-890
// part 2); v9 otherwise.
func (s *Server) produceMaxVersion() int16 {
	if s.cfg.TransactionVersion >= 2 && s.deps.Txn != nil && s.deps.Groups != nil {
		return 12
	}
	return 9
}

// txnOffsetCommitMaxVersion is TxnOffsetCommit's highest version: v5 (v4 only adds
// TRANSACTION_ABORTABLE; v5 adds the group to the transaction, KIP-890 part 2) with
// transaction.version 2 and a verifier to add through; v3 otherwise.
func (s *Server) txnOffsetCommitMaxVersion() int16 {
	if s.cfg.TransactionVersion >= 2 && s.deps.TxnVerifier != nil {
		return 5
	}
	return 3
}
