package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The transaction APIs (24_add_partitions_to_txn.go, ...) are advertised at the
// versions real clients negotiate, capped below KIP-890's second part (AddPartitionsToTxn
// v5, EndTxn v4+, TxnOffsetCommit v4+, InitProducerId v5+: TRANSACTION_ABORTABLE and
// implicit partition adds), which clients would otherwise use to skip
// AddPartitionsToTxn.

// txnErrorCode is err's code for a transaction API; old versions (before KIP-588) do
// not know PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH, which they handle alike.
func txnErrorCode(err error, beforeProducerFenced bool) int16 {
	if beforeProducerFenced && errors.Is(err, kerr.ProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return errorCode(err)
}
