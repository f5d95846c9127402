package metadata

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AnyBrokerEpoch, passed to MayCoordinate, leaves the claimant's registration unchecked:
// the controller's fence names a coordinator epoch instead, which changes whenever the
// registration holding the role does. It is not -1, so that a broker not (yet)
// registered, whose epoch is -1, never matches a coordinator's registration.
const AnyBrokerEpoch int64 = math.MinInt64

// Standing is a broker's right to coordinate a key: the __consumer_offsets partition the
// key hashes to and the coordinator epoch under which the broker acts for it.
type Standing struct {
	Partition int32
	Epoch     int32
}

// CoordinatorBroker returns the broker that coordinates key (a group id or a
// transactional id: both hash to the offsets partitions alike) in this image, as
// FindCoordinator answers it. It fails with COORDINATOR_NOT_AVAILABLE while no broker
// does: the image has no coordinators yet, none was eligible, or the chosen one is
// unknown or fenced here (Kafka's answer when the offsets partition has no live leader).
func (im *Image) CoordinatorBroker(key string) (Broker, error) {
	_, co, ok := im.CoordinatorOf(key)
	if !ok || co.Broker < 0 {
		return Broker{}, kerr.CoordinatorNotAvailable
	}
	b, ok := im.Brokers[co.Broker]
	if !ok || b.Fenced {
		return Broker{}, kerr.CoordinatorNotAvailable
	}
	return b, nil
}

// MayCoordinate decides whether broker, registered at brokerEpoch (AnyBrokerEpoch to
// leave that unchecked), coordinates key in this image, and under which coordinator
// epoch. Every coordinator asks it before it acts for a group, a share group or a
// transactional id, the KIP-890 verifier asks it before it answers locally, and the
// controller's fence asks it before it compares the coordinator epoch a write names.
//
// The errors are Kafka's, as a coordinator answers a request for a key:
// COORDINATOR_NOT_AVAILABLE when no broker coordinates the key (no coordinators yet, or
// no eligible broker: Kafka's offsets partition without a leader); NOT_COORDINATOR when
// the role is another broker's, or is broker's only by a stale claim (fenced in this
// image, or held under another registration): Kafka's "this broker does not lead the
// offsets partition", on which clients look the coordinator up again. The errors are
// the bare *kerr.Error values, so that callers may compare them.
func (im *Image) MayCoordinate(broker int32, brokerEpoch int64, key string) (Standing, error) {
	p, co, ok := im.CoordinatorOf(key)
	if !ok {
		return Standing{}, kerr.CoordinatorNotAvailable
	}
	if err := im.mayCoordinate(co, broker, brokerEpoch); err != nil {
		return Standing{}, err
	}
	return Standing{Partition: p, Epoch: co.Epoch}, nil
}

// CoordinatedPartitions returns the offsets partitions broker, registered at brokerEpoch,
// coordinates in this image, with their coordinator epochs: MayCoordinate's answer for
// the keys of every partition at once, for a coordinator that loads whole partitions.
func (im *Image) CoordinatedPartitions(broker int32, brokerEpoch int64) map[int32]int32 {
	out := map[int32]int32{}
	if im == nil {
		return out
	}
	for p, co := range im.Coordinators {
		if im.mayCoordinate(co, broker, brokerEpoch) == nil {
			out[int32(p)] = co.Epoch
		}
	}
	return out
}

func (im *Image) mayCoordinate(co Coordinator, broker int32, brokerEpoch int64) error {
	if co.Broker < 0 {
		return kerr.CoordinatorNotAvailable
	}
	if co.Broker != broker {
		return kerr.NotCoordinator
	}
	if b, ok := im.Brokers[broker]; !ok || b.Fenced {
		return kerr.NotCoordinator
	}
	if brokerEpoch != AnyBrokerEpoch && co.BrokerEpoch != brokerEpoch {
		return kerr.NotCoordinator
	}
	return nil
}

// Registration is the part of a Store that StandingNow reads: this broker's current
// image, registration and lease.
type Registration interface {
	Current() *Image
	BrokerEpoch() int64
	LeaseValid() bool
}

// StandingNow is MayCoordinate asked by a running coordinator on node through store: on
// the current image, under the broker's current registration, and refused with
// NOT_COORDINATOR while the broker's lease is not valid, since a broker whose heartbeats
// lapsed may be replaced before its image says so. The group, share-group and
// transaction coordinators all ask it before they act for a key.
func StandingNow(store Registration, node int32, key string) (Standing, error) {
	st, err := store.Current().MayCoordinate(node, store.BrokerEpoch(), key)
	if err != nil {
		return Standing{}, err
	}
	if !store.LeaseValid() {
		return Standing{}, kerr.NotCoordinator
	}
	return st, nil
}

// CoordinatorStoreError maps a metadata store failure to the code Kafka's group and
// share-group coordinators send for a failed offsets-topic write: retriable
// COORDINATOR_NOT_AVAILABLE for timeouts and an unavailable quorum, NOT_COORDINATOR when
// this broker lost its standing, INVALID_COMMIT_OFFSET_SIZE for a commit too large to
// store. Both coordinators answer alike, so the mapping lives once, beside MayCoordinate.
func CoordinatorStoreError(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotController, kerr.RequestTimedOut, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.UnknownTopicOrPartition:
			return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
		case kerr.NotLeaderForPartition, kerr.StaleBrokerEpoch:
			return fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return fmt.Errorf("%w: %v", kerr.InvalidCommitOffsetSize, err)
		}
		return err
	}
	return fmt.Errorf("%w: metadata store: %v", kerr.CoordinatorNotAvailable, err)
}
