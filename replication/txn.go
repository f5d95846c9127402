package replication

import (
	"context"
)

// TxnVerifier asks the transaction coordinator whether a partition was added to a
// producer's ongoing transaction (KIP-890's server-side defense): a partition takes no
// transactional write of a producer epoch before the coordinator knows of it, so that a
// late write of an aborted or completed transaction cannot start a transaction nobody
// will ever end. It returns nil when the partition is part of the transaction, and
// Kafka's error otherwise (INVALID_TXN_STATE, PRODUCER_FENCED,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...), which the produce answers with.
type TxnVerifier interface {
	VerifyAdded(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32) error
}

// txnVerifierBox holds the verifier so that it can be installed after the Manager is
// built (the coordinator needs the Manager to write its markers).
type txnVerifierBox struct{ v TxnVerifier }

// SetTxnVerifier installs the verifier transactional produces are checked with. Without
// one, transactional produces are refused with INVALID_TXN_STATE.
func (m *Manager) SetTxnVerifier(v TxnVerifier) {
	m.txnVerifier.Store(&txnVerifierBox{v: v})
}

func (m *Manager) verifier() TxnVerifier {
	if b := m.txnVerifier.Load(); b != nil {
		return b.v
	}
	return nil
}
