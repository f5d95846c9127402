package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Group coordinators are chosen by the FSM, not by each broker from its own cache: two
// brokers whose caches differ could otherwise both act for a group. The coordinator of
// each __consumer_offsets partition is recomputed whenever a broker changes, and its
// coordinator epoch bumped when the choice (broker or registration) changes; offset
// writes carry the epoch their coordinator loaded the group in, and applyOffsetOps
// refuses any other.

// coordinatorChanges records, for a change that touches brokers (or fixes the number of
// offsets partitions), every offsets partition whose coordinator it moves.
func (c *change) coordinatorChanges() {
	base := c.base.Coordinators
	n := len(base)
	if n == 0 {
		n = int(c.offsetsPartitions)
	}
	if n == 0 || (len(c.brokers) == 0 && len(base) > 0) {
		return
	}
	var eligible []int32
	for _, id := range c.brokerIDs() {
		if c.eligible(id) {
			eligible = append(eligible, id)
		}
	}
	for p := range n {
		next := PickCoordinator(int32(p), eligible)
		brokerEpoch := int64(-1)
		if next >= 0 {
			brokerEpoch = c.broker(next).Epoch
		}
		epoch := int32(0)
		if p < len(base) {
			cur := base[p]
			if cur.Broker == next && cur.BrokerEpoch == brokerEpoch {
				continue
			}
			epoch = cur.Epoch + 1
		}
		if c.coordinators == nil {
			c.coordinators = map[int32]*pb.CoordinatorState{}
		}
		c.coordinators[int32(p)] = &pb.CoordinatorState{Partition: int32(p), Broker: next, BrokerEpoch: brokerEpoch, Epoch: epoch}
	}
}

// PickCoordinator chooses the coordinator of an offsets partition among eligible broker
// ids by rendezvous hashing, so that when a broker comes or goes only the partitions it
// wins or held move. -1 when there are none.
func PickCoordinator(partition int32, eligible []int32) int32 {
	best := int32(-1)
	var bestScore uint64
	for _, id := range eligible {
		h := fnv.New64a()
		var b [8]byte
		binary.BigEndian.PutUint32(b[:4], uint32(partition))
		binary.BigEndian.PutUint32(b[4:], uint32(id))
		h.Write(b[:])
		score := h.Sum64()
		if best < 0 || score > bestScore || (score == bestScore && id < best) {
			best, bestScore = id, score
		}
	}
	return best
}

// checkCoordinator refuses a write from a broker that is not key's coordinator at the
// coordinator epoch it names. The broker must still hold the role, as every coordinator
// asks before it acts (metadata.Image.MayCoordinate: COORDINATOR_NOT_AVAILABLE while no
// broker does, NOT_COORDINATOR when another does), and the write must carry the epoch the
// role has now: one under an earlier epoch was decided on state another broker may have
// changed since (NOT_COORDINATOR). Offsets, transactional offsets and transaction states
// are fenced alike; what names the kind of key in errors ("group", "transactional id").
// MayCoordinate also wants the broker registered and unfenced, which every coordinator
// the FSM commits is (coordinatorChanges moves a broker's partitions in the change that
// fences or unregisters it): a log applied when only broker and epoch were compared
// replays to the same state.
func checkCoordinator(im *metadata.Image, what, key string, broker, epoch int32) error {
	st, err := im.MayCoordinate(broker, metadata.AnyBrokerEpoch, key)
	if err == nil && st.Epoch == epoch {
		return nil
	}
	p, cur, ok := im.CoordinatorOf(key)
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		ke = kerr.NotCoordinator // the role is broker's, under another epoch
	}
	if !ok {
		return kafkaErrorf(ke, "%s %q: no coordinators yet", what, key)
	}
	return kafkaErrorf(ke, "%s %q (offsets partition %d): broker %d at coordinator epoch %d is not its coordinator (broker %d at epoch %d is)",
		what, key, p, broker, epoch, cur.Broker, cur.Epoch)
}

func coordinatorsToPB(cs []metadata.Coordinator) []*pb.CoordinatorState {
	out := make([]*pb.CoordinatorState, len(cs))
	for i, c := range cs {
		out[i] = &pb.CoordinatorState{Partition: int32(i), Broker: c.Broker, BrokerEpoch: c.BrokerEpoch, Epoch: c.Epoch}
	}
	return out
}

// applyCoordinators returns cs with the changes applied, cs itself untouched.
func applyCoordinators(cs []metadata.Coordinator, changes []*pb.CoordinatorState) ([]metadata.Coordinator, error) {
	out := make([]metadata.Coordinator, len(cs), max(len(cs), len(changes)))
	copy(out, cs)
	for _, ch := range changes {
		v := metadata.Coordinator{Broker: ch.Broker, BrokerEpoch: ch.BrokerEpoch, Epoch: ch.Epoch}
		switch {
		case ch.Partition >= 0 && int(ch.Partition) < len(out):
			out[ch.Partition] = v
		case int(ch.Partition) == len(out):
			out = append(out, v)
		default:
			return nil, fmt.Errorf("coordinator of offsets partition %d out of order (have %d)", ch.Partition, len(out))
		}
	}
	return out, nil
}
