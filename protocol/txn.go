package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The transaction APIs (24_add_partitions_to_txn.go, ...) are advertised at the
// versions real clients negotiate; AddPartitionsToTxn v4 is the brokers' VerifyOnly form.
// With transaction.version 2 (api.maxV2) the broker serves KIP-890's second part:
// Produce v12 (the write joins its transaction at the leader), EndTxn v5 (the epoch bump
// per transaction, with v4 between, which only adds TRANSACTION_ABORTABLE),
// AddPartitionsToTxn v5 (a partition leader's or group coordinator's implicit add) and
// TxnOffsetCommit v5 (the group joins the transaction without AddOffsetsToTxn).
// InitProducerId stays below v5.

// txnErrorCode is err's code for a transaction API; old versions (before KIP-588) do
// not know PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH, which they handle alike.
func txnErrorCode(err error, beforeProducerFenced bool) int16 {
	if beforeProducerFenced && errors.Is(err, kerr.ProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return errorCode(err)
}
