package replication

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/partition"
)

// Follower fetching (KIP-392). A consumer that sends its rack (Fetch v11+) may read a
// partition from a follower. When replica.selector.class names a selector, the leader
// answers such a consumer's fetch with the replica it should read from instead (the
// preferred read replica) and no records; the consumer then fetches from that follower,
// which serves it up to its own high watermark.

// ClientMetadata is what a consumer's fetch says about it (Kafka's ClientMetadata): only
// fetches of v11 and later carry it, and only those may be served by a follower.
type ClientMetadata struct {
	// RackID is the client's rack (client.rack), "" when it has none.
	RackID string
	// ClientID is the request header's client id.
	ClientID string
	// Listener is the listener the fetch came in on: a preferred replica must be
	// reachable on it.
	Listener string
}

// ReplicaView is one replica a selector may choose (Kafka's ReplicaView).
type ReplicaView struct {
	ID   int32
	Rack string
	// LogEndOffset is the replica's log end offset, as the leader last heard it.
	LogEndOffset int64
	// TimeSinceLastCaughtUp is how long ago the replica last reached the leader's log
	// end (0 for the leader).
	TimeSinceLastCaughtUp time.Duration
}

// PartitionView is what a selector chooses among: the in-sync replicas that hold the
// fetch offset and are reachable, the leader among them (Kafka's PartitionView).
type PartitionView struct {
	Replicas []ReplicaView
	Leader   ReplicaView
}

// ReplicaSelector chooses the replica a consumer should read a partition from (Kafka's
// org.apache.kafka.common.replica.ReplicaSelector). ok false, or the leader, keeps the
// consumer on the leader.
type ReplicaSelector interface {
	Select(topic string, index int32, client ClientMetadata, view PartitionView) (r ReplicaView, ok bool)
}

// The selectors replica.selector.class may name, by Kafka's class names.
const (
	RackAwareReplicaSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	LeaderReplicaSelectorClass    = "org.apache.kafka.common.replica.LeaderReplicaSelector"
)

// ParseReplicaSelector resolves replica.selector.class: "" (Kafka's default) is no
// selector, so consumers always read from leaders. Kafka's class names are accepted, and
// their short forms (the class's simple name, or "rack-aware" and "leader").
func ParseReplicaSelector(name string) (ReplicaSelector, error) {
	switch strings.TrimSpace(name) {
	case "":
		return nil, nil
	case RackAwareReplicaSelectorClass, "RackAwareReplicaSelector", "rack-aware":
		return RackAwareReplicaSelector{}, nil
	case LeaderReplicaSelectorClass, "LeaderReplicaSelector", "leader":
		return LeaderReplicaSelector{}, nil
	}
	return nil, fmt.Errorf("unknown replica.selector.class %q: %s or %s", name, RackAwareReplicaSelectorClass, LeaderReplicaSelectorClass)
}

// LeaderReplicaSelector always chooses the leader (Kafka's LeaderReplicaSelector).
type LeaderReplicaSelector struct{}

// Select returns the leader.
func (LeaderReplicaSelector) Select(_ string, _ int32, _ ClientMetadata, view PartitionView) (ReplicaView, bool) {
	return view.Leader, true
}

// RackAwareReplicaSelector chooses a replica in the client's rack, as Kafka's
// RackAwareReplicaSelector does: the leader when it is in that rack or when no replica
// is (or the client names no rack); otherwise the most caught-up replica of the rack
// (the highest log end offset, then the least time since it was last caught up, then
// the highest broker id).
type RackAwareReplicaSelector struct{}

// Select picks the replica.
func (RackAwareReplicaSelector) Select(_ string, _ int32, client ClientMetadata, view PartitionView) (ReplicaView, bool) {
	if client.RackID == "" {
		return view.Leader, true
	}
	var best ReplicaView
	found := false
	for _, r := range view.Replicas {
		if r.Rack != client.RackID {
			continue
		}
		if r.ID == view.Leader.ID {
			return view.Leader, true // the leader is in the client's rack
		}
		if !found || compareReplicas(r, best) > 0 {
			best, found = r, true
		}
	}
	if !found {
		return view.Leader, true
	}
	return best, true
}

// compareReplicas orders replicas by how caught up they are (Kafka's
// ReplicaView.comparator): log end offset, then less time since last caught up, then id.
func compareReplicas(a, b ReplicaView) int {
	if c := cmp.Compare(a.LogEndOffset, b.LogEndOffset); c != 0 {
		return c
	}
	if c := cmp.Compare(b.TimeSinceLastCaughtUp, a.TimeSinceLastCaughtUp); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// preferredReadReplica is the follower a consumer should read p from instead of this
// leader, or -1 (Kafka's ReplicaManager.findPreferredReadReplica): the selector chooses
// among the leader and the followers of the committed ISR that hold fetchOffset (by
// their last fetch) and whose broker is registered, unfenced and reachable on the
// client's listener. Followers outside the ISR may lag without bound, and the leader
// stops pointing consumers at one as soon as it leaves.
func (m *Manager) preferredReadReplica(p *partition.Partition, client *ClientMetadata, fetchOffset int64) int32 {
	sel := m.cfg.ReplicaSelector
	if sel == nil || client == nil {
		return -1
	}
	im := m.Image()
	reachable := func(id int32) (string, bool) {
		b, ok := im.Brokers[id]
		if !ok || b.Fenced {
			return "", false
		}
		if _, ok := b.On(client.Listener); !ok {
			return "", false
		}
		return b.Rack, true
	}
	now := m.now()
	var view PartitionView
	for _, f := range p.InSyncFollowers() {
		if f.LogEndOffset < fetchOffset || f.LogStartOffset > fetchOffset {
			continue
		}
		rack, ok := reachable(f.ID)
		if !ok {
			continue
		}
		since := time.Duration(0)
		if !f.LastCaughtUp.IsZero() {
			since = now.Sub(f.LastCaughtUp)
		}
		view.Replicas = append(view.Replicas, ReplicaView{ID: f.ID, Rack: rack, LogEndOffset: f.LogEndOffset, TimeSinceLastCaughtUp: since})
	}
	if len(view.Replicas) == 0 {
		return -1 // only the leader to choose
	}
	leaderRack, _ := reachable(m.cfg.NodeID)
	view.Leader = ReplicaView{ID: m.cfg.NodeID, Rack: leaderRack, LogEndOffset: p.LogEndOffset()}
	view.Replicas = append(view.Replicas, view.Leader)
	r, ok := sel.Select(p.Topic(), p.Index(), *client, view)
	if !ok || r.ID == m.cfg.NodeID {
		return -1
	}
	for _, v := range view.Replicas {
		if v.ID == r.ID {
			return r.ID
		}
	}
	return -1 // a selector's choice outside the view is not sent to clients
}

// replicaForRead is the fencing check of a read: the leader at the fetch's epoch (see
// Leader), or, for a consumer whose fetch may be served by a follower (Fetch v11+, as
// in Kafka), this broker's follower replica at that epoch. An older epoch than the
// follower's is FENCED_LEADER_EPOCH and a newer one UNKNOWN_LEADER_EPOCH, as on the
// leader. A replica that follows no leader (there is none, or the controller has
// fenced this broker) serves nobody: NOT_LEADER_OR_FOLLOWER.
func (m *Manager) replicaForRead(who Reader, f FetchPartition) (p *partition.Partition, leader bool, err error) {
	p, err = m.Leader(f.Topic, f.Index, f.CurrentLeaderEpoch)
	if err == nil {
		return p, true, nil
	}
	if who.IsFollower() || who.Client == nil || errors.Is(err, ErrBrokerFenced) || !errors.Is(err, kerr.NotLeaderForPartition) {
		return nil, false, err
	}
	p = m.parts.Get(f.Topic, f.Index)
	if p == nil || p.Role() != partition.RoleFollower || m.store.Fenced() {
		return nil, false, err
	}
	if err := CheckLeaderEpoch(f.CurrentLeaderEpoch, p.LeaderEpoch()); err != nil {
		return nil, false, err
	}
	return p, false, nil
}
