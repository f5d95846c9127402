package partition

import (
	"slices"
	"time"
)

// ReplicaPosition is a leader's view of one in-sync follower, for choosing the replica a
// consumer reads from (KIP-392).
type ReplicaPosition struct {
	ID int32
	// LogEndOffset and LogStartOffset are from the follower's last fetch in this leader
	// epoch; -1 until it has fetched (or said).
	LogEndOffset, LogStartOffset int64
	LastCaughtUp                 time.Time
}

// InSyncFollowers returns the leader's view of the followers in the ISR, as the
// controller last committed it (not a pending expansion: a replica the controller has
// not yet admitted may be far behind). Nil unless this replica leads.
func (p *Partition) InSyncFollowers() []ReplicaPosition {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Role() != RoleLeader {
		return nil
	}
	var out []ReplicaPosition
	for _, id := range p.state.ISR {
		if id == p.nodeID || !slices.Contains(p.state.Replicas, id) {
			continue
		}
		rp := ReplicaPosition{ID: id, LogEndOffset: -1, LogStartOffset: -1}
		if f := p.followers[id]; f != nil {
			rp.LogEndOffset, rp.LogStartOffset, rp.LastCaughtUp = f.leo, f.logStart, f.lastCaughtUp
		}
		out = append(out, rp)
	}
	return out
}
