package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/partition"
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

// TxnAdder is a TxnVerifier that also adds a partition to the producer's transaction,
// starting one if none is ongoing: transactions v2 (KIP-890 part 2) let Produce v12+
// join the transaction without the client's AddPartitionsToTxn.
type TxnAdder interface {
	AddToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32) error
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

// MarkerPartition is one partition a transaction marker goes to, and after
// WriteTxnMarkers its outcome.
type MarkerPartition struct {
	Topic string
	Index int32
	Err   error

	p   *partition.Partition
	res partition.MarkerResult
}

// TxnMarker is the coordinator's decision on one producer's transaction, for the
// partitions it wrote to.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []*MarkerPartition
}

// WriteTxnMarkers appends each marker to its partitions as leader and waits, like an
// acks=all produce, until the ISR has it (or timeout or ctx end): Kafka's
// WriteTxnMarkers. Each partition's outcome is left in its Err.
func (m *Manager) WriteTxnMarkers(ctx context.Context, markers []*TxnMarker, timeout time.Duration) {
	var waiting []*MarkerPartition
	for _, mk := range markers {
		for _, mp := range mk.Partitions {
			p, err := m.Leader(mp.Topic, mp.Index, -1)
			if err != nil {
				mp.Err = err
				continue
			}
			res, err := p.AppendMarker(mk.ProducerID, mk.ProducerEpoch, records.Marker{Commit: mk.Commit, CoordinatorEpoch: mk.CoordinatorEpoch})
			if err != nil {
				if isStorageError(err) {
					m.lg.Error("append of a transaction marker failed", "topic", mp.Topic, "partition", mp.Index, "err", err)
				}
				mp.Err = m.ReplicaGone(mp.Topic, mp.Index, err)
				continue
			}
			mp.p, mp.res = p, res
			waiting = append(waiting, mp)
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, mp := range waiting {
		for mp.Err == nil {
			w := mp.p.Waiter()
			done, err := mp.p.MarkerDone(mp.res)
			if err != nil {
				mp.Err = err
			}
			if done || err != nil {
				break
			}
			select {
			case <-w:
				continue
			case <-deadline.C:
				mp.Err = fmt.Errorf("%w: transaction marker not replicated to the in-sync replicas within %v", kerr.RequestTimedOut, timeout)
			case <-ctx.Done():
				mp.Err = fmt.Errorf("%w: the request ended before the transaction marker was replicated: %w", kerr.RequestTimedOut, ctx.Err())
			}
			// Every later partition gets the same answer unless it is already done.
			for _, rest := range waiting {
				if rest.Err == nil {
					if done, err := rest.p.MarkerDone(rest.res); err != nil {
						rest.Err = err
					} else if !done {
						rest.Err = mp.Err
					}
				}
			}
			return
		}
	}
}

// verifyTxn runs KIP-890's check for a transactional batch, before the append: the
// partition asks the coordinator only for a producer's first write of a transaction.
// A marker appended while the coordinator answered cancels the answer, which may
// predate it, and the write is refused. A Produce v12 (transactions v2) asks again, so
// that the answer it acts on postdates the marker: that is the common case of the next
// transaction's first write racing the previous one's marker (which the coordinator
// waits for), and a late write of the ended transaction cannot be admitted by asking
// again, its epoch being fenced. Transactions v1 keep one epoch across transactions, so
// asking again could admit a late write into the next transaction: they do not.
func (m *Manager) verifyTxn(ctx context.Context, pp *ProducePartition, h shalelog.Header) error {
	attempts := 1
	if pp.AddToTxn {
		attempts = 3
	}
	for range attempts {
		token, needed := pp.p.BeginTxnVerification(h.ProducerID, h.ProducerEpoch)
		if !needed {
			return nil
		}
		v := m.verifier()
		if v == nil {
			return fmt.Errorf("%w: this broker has no transaction coordinator to verify the write with", kerr.InvalidTxnState)
		}
		if pp.TransactionalID == "" {
			return fmt.Errorf("%w: a transactional batch in a produce request without a transactional id", kerr.InvalidTxnState)
		}
		check := v.VerifyAdded
		if a, ok := v.(TxnAdder); ok && pp.AddToTxn {
			check = a.AddToTxn
		}
		if err := check(ctx, pp.TransactionalID, h.ProducerID, h.ProducerEpoch, pp.Topic, pp.Index); err != nil {
			return err
		}
		if pp.p.CompleteTxnVerification(h.ProducerID, token) || attempts == 1 {
			// Transactions v1: the append refuses the write if a marker cancelled it.
			return nil
		}
	}
	// Markers keep coming: a retriable error, as Kafka answers a verification that
	// could not complete.
	return fmt.Errorf("%w: transaction markers arrived during %d verifications", kerr.NotEnoughReplicas, attempts)
}
