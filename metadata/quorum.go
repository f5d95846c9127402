package metadata

import (
	"context"
	"time"
)

// QuorumAdmin is what a broker forwards to the controller quorum on behalf of an
// operator: the quorum's state (DescribeQuorum), changes to its voters (AddRaftVoter,
// RemoveRaftVoter, UpdateRaftVoter) and the removal of a broker's registration
// (UnregisterBroker). It is optional: protocol handlers use it when the Store implements
// it. Errors follow Store's rules.
type QuorumAdmin interface {
	DescribeQuorum(ctx context.Context) (QuorumState, error)
	// AddVoter adds controller id, reachable at addr (host:port of its CONTROLLER
	// listener), to the quorum; it returns once the controller is a voter.
	AddVoter(ctx context.Context, id int32, addr string) error
	// RemoveVoter removes controller id from the quorum.
	RemoveVoter(ctx context.Context, id int32) error
	// UpdateVoter changes the address (host:port of its CONTROLLER listener) of voter id;
	// the address it already has is a success that changes nothing.
	UpdateVoter(ctx context.Context, id int32, addr string) error
	// UnregisterBroker removes broker id's registration. Without force it is refused
	// while the broker still holds replicas.
	UnregisterBroker(ctx context.Context, id int32, force bool) error
}

// QuorumState describes the metadata log's replicas as the active controller sees them.
type QuorumState struct {
	LeaderID      int32
	LeaderEpoch   int64 // the Raft term
	HighWatermark int64 // the Raft commit index
	Voters        []QuorumReplica
	// Observers are controllers being added and brokers.
	Observers []QuorumReplica
}

// QuorumReplica is one replica of the metadata log. LogEndOffset is -1 and the times are
// zero when unknown.
type QuorumReplica struct {
	ID           int32
	Addr         string // controllers only
	LogEndOffset int64
	LastFetch    time.Time
	LastCaughtUp time.Time
}
