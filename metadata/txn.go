package metadata

import "context"

// TxnStatus is a transaction's state, as Kafka's TransactionState.
type TxnStatus int8

const (
	TxnEmpty TxnStatus = iota
	TxnOngoing
	TxnPrepareCommit
	TxnPrepareAbort
	TxnCompleteCommit
	TxnCompleteAbort
	TxnDead
	TxnPrepareEpochFence
)

// String is Kafka's name for the state, as DescribeTransactions and ListTransactions
// report it.
func (s TxnStatus) String() string {
	switch s {
	case TxnEmpty:
		return "Empty"
	case TxnOngoing:
		return "Ongoing"
	case TxnPrepareCommit:
		return "PrepareCommit"
	case TxnPrepareAbort:
		return "PrepareAbort"
	case TxnCompleteCommit:
		return "CompleteCommit"
	case TxnCompleteAbort:
		return "CompleteAbort"
	case TxnDead:
		return "Dead"
	case TxnPrepareEpochFence:
		return "PrepareEpochFence"
	}
	return "Unknown"
}

// TxnState is one transactional id's metadata as the controller stores it.
type TxnState struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// LastProducerID and LastProducerEpoch are the id and epoch before the last bump, so
	// that a retried KIP-360 bump is recognised; -1 for none.
	LastProducerID    int64
	LastProducerEpoch int16
	TimeoutMs         int32
	Status            TxnStatus
	// Partitions are the partitions in the transaction, by topic.
	Partitions map[string][]int32
	// Groups are the consumer groups AddOffsetsToTxn added.
	Groups       []string
	StartMs      int64
	LastUpdateMs int64
	// PendingOffsets are TxnOffsetCommit's offsets by group, committed with the
	// transaction. Only loads fill them; writes of the state leave them to the controller.
	PendingOffsets map[string][]CommittedOffset
	// TxnVersion is the transaction version (KIP-890 part 2) the producer ended its last
	// transaction with: 2 when EndTxn v5+ bumped the producer epoch (then LastProducerID
	// and LastProducerEpoch are the id and epoch it ended with, so that its retried EndTxn
	// is recognised), 0 otherwise.
	TxnVersion int16
	// NextProducerID is set (>= 0) in PrepareCommit or PrepareAbort when ending a version
	// 2 transaction exhausted the producer's epochs: the Complete* state moves the
	// producer to this id at epoch 0. -1 otherwise.
	NextProducerID int64
}

// TxnStore is what a transaction coordinator needs from the metadata quorum besides the
// images: every call is committed through the controller before it returns.
type TxnStore interface {
	// WriteTxnState commits a transition of st.TransactionalID made by its coordinator
	// (fence: the broker and the coordinator epoch of the id's offsets partition); with
	// remove the id is forgotten. The controller refuses a stale fence with
	// NOT_COORDINATOR. A transition to CompleteCommit makes the pending offsets the groups'
	// committed offsets.
	WriteTxnState(ctx context.Context, fence GroupFence, st TxnState, remove bool) error
	// TxnOffsetCommit adds offsets to the pending offsets of a transaction, from the
	// group's coordinator (fence as CommitOffsets'). It fails with
	// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH or
	// INVALID_TXN_STATE when the transaction does not hold the group.
	TxnOffsetCommit(ctx context.Context, fence GroupFence, transactionalID string, producerID int64, producerEpoch int16, group string, offsets []CommittedOffset) error
	// LoadTxnStates returns the states of the transactional ids in the given offsets
	// partitions, with their pending offsets.
	LoadTxnStates(ctx context.Context, partitions []int32) ([]TxnState, error)
	// PendingTxnOffsets lists the partitions of group with offsets pending in an open
	// transaction, by topic.
	PendingTxnOffsets(ctx context.Context, group string) (map[string][]int32, error)
}
