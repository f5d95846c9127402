package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Remote reaches the transaction coordinator on another broker.
type Remote interface {
	AddPartitionsToTxn(ctx context.Context, to metadata.Broker, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
}

// Verifier is KIP-890's check for a partition leader (it implements
// replication.TxnVerifier, which the server's SetTxnVerifier call checks): it asks
// this broker's coordinator when the transactional id hashes here, and the id's
// coordinator broker with a VerifyOnly AddPartitionsToTxn (v4+) otherwise.
type Verifier struct {
	Coordinator *Coordinator
	Remote      Remote
}

// VerifyAdded returns nil when topic-partition is in the producer's ongoing
// transaction, else the error the produce answers with.
func (v *Verifier) VerifyAdded(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32) error {
	return produceError(v.verify(ctx, transactionalID, producerID, producerEpoch, topic, partition, false))
}

// AddToTxn adds topic-partition to the producer's transaction, starting one if none is
// ongoing (Produce v12+, KIP-890 part 2; replication.TxnAdder), and returns the error
// the produce answers with. The coordinator checks the producer id and epoch as
// AddPartitionsToTxn does, so a write of an ended transaction (whose epoch the end
// bumped) is fenced instead of starting a transaction.
func (v *Verifier) AddToTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32) error {
	return produceError(v.verify(ctx, transactionalID, producerID, producerEpoch, topic, partition, true))
}

// produceError turns the coordinator's answer into one a producer understands on
// Produce, as Kafka's AddPartitionsToTxnManager does: the coordinator being away or
// busy is NOT_ENOUGH_REPLICAS (retriable for every client), a fenced epoch
// INVALID_PRODUCER_EPOCH.
func produceError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable),
		errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions):
		return fmt.Errorf("%w: transaction coordinator: %w", kerr.NotEnoughReplicas, err)
	case errors.Is(err, kerr.ProducerFenced):
		return fmt.Errorf("%w: %w", kerr.InvalidProducerEpoch, err)
	}
	return err
}

func (v *Verifier) verify(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32, add bool) error {
	c := v.Coordinator
	im := c.store.Current()
	// This broker answers for the ids it may coordinate, and asks the coordinator
	// otherwise; verifyOne and AddPartitions decide again under the coordinator's lock.
	local, err := v.local(im, transactionalID)
	if err != nil {
		return err
	}
	if local {
		if add {
			return c.AddPartitions(ctx, transactionalID, producerID, producerEpoch, map[string][]int32{topic: {partition}})
		}
		return c.verifyOne(transactionalID, producerID, producerEpoch, topic, partition)
	}
	return v.remote(ctx, im, transactionalID, producerID, producerEpoch, topic, partition, add)
}

// AddGroup adds group to the producer's transaction, starting one if none is ongoing:
// TxnOffsetCommit v5+ (transactions v2) does so at the group's coordinator in place of
// the client's AddOffsetsToTxn. It returns the transaction coordinator's error. Between
// brokers the group travels as its __consumer_offsets partition, as Kafka's does; the
// controller accepts a transactional offset commit of a group whose offsets partition
// is in the transaction.
func (v *Verifier) AddGroup(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, group string) error {
	c := v.Coordinator
	im := c.store.Current()
	local, err := v.local(im, transactionalID)
	if err != nil {
		return err
	}
	if local {
		return c.AddOffsets(ctx, transactionalID, producerID, producerEpoch, group)
	}
	p := metadata.OffsetsPartition(group, len(im.Coordinators))
	return v.remote(ctx, im, transactionalID, producerID, producerEpoch, metadata.OffsetsTopic, p, true)
}

// local reports whether this broker may coordinate transactionalID in im, and so
// answers for it itself; an error other than NOT_COORDINATOR is the answer.
func (v *Verifier) local(im *metadata.Image, transactionalID string) (bool, error) {
	c := v.Coordinator
	_, err := im.MayCoordinate(c.cfg.NodeID, c.store.BrokerEpoch(), transactionalID)
	if errors.Is(err, kerr.NotCoordinator) {
		return false, nil
	}
	return err == nil, err
}

// remote asks transactionalID's coordinator broker to verify (or, with add, to add)
// topic-partition in the producer's transaction.
func (v *Verifier) remote(ctx context.Context, im *metadata.Image, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32, add bool) error {
	b, err := im.CoordinatorBroker(transactionalID)
	if err != nil {
		return err
	}
	if b.ID == v.Coordinator.cfg.NodeID {
		// Named the coordinator but fenced, or under a former registration: asking
		// itself over the network would only answer NOT_COORDINATOR again.
		return kerr.NotCoordinator
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	// v5 for an add (transactions v2), as Kafka's AddPartitionsToTxnManager sends it.
	req.Version = 4
	if add {
		req.Version = 5
	}
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = transactionalID, producerID, producerEpoch, !add
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	t.Topics = append(t.Topics, rt)
	req.Transactions = append(req.Transactions, t)
	resp, err := v.Remote.AddPartitionsToTxn(ctx, b, req)
	if err != nil {
		return fmt.Errorf("%w: verifying with the transaction coordinator: %w", kerr.CoordinatorNotAvailable, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != transactionalID {
			continue
		}
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				if tt.Topic == topic && p.Partition == partition {
					return kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	return fmt.Errorf("%w: the transaction coordinator did not answer for %s-%d", kerr.InvalidTxnState, topic, partition)
}
