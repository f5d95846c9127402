package metadata

import "context"

// ConsumerGroupStore keeps the state of consumer groups (KIP-848) in the controller
// quorum, so that a coordinator taking a group over continues it at the same group and
// member epochs and assignments instead of making its members join again (Kafka keeps
// the same records in __consumer_offsets).
type ConsumerGroupStore interface {
	// WriteConsumerGroup stores st, or removes the group's state when remove is set,
	// unless fence is no longer the group's coordinator (NOT_COORDINATOR). A state
	// older than the stored one (by CoordinatorEpoch, then Version) is superseded: the
	// call succeeds and changes nothing.
	WriteConsumerGroup(ctx context.Context, fence GroupFence, st ConsumerGroupState, remove bool) error
	// LoadConsumerGroup returns the group's stored state, nil when it has none. It
	// reflects every write committed before the call.
	LoadConsumerGroup(ctx context.Context, group string) (*ConsumerGroupState, error)
	// ListConsumerGroups lists the groups with stored state, sorted. It reflects every
	// write committed before the call.
	ListConsumerGroups(ctx context.Context) ([]string, error)
}

// ConsumerGroupState is a consumer group's whole state as its coordinator wrote it.
type ConsumerGroupState struct {
	Group string
	// CoordinatorEpoch and Version order the writes: a coordinator epoch's writes
	// carry increasing versions.
	CoordinatorEpoch int32
	Version          int64
	GroupEpoch       int32
	Assignor         string
	Topics           []ConsumerGroupTopic
	Members          []ConsumerGroupMember
}

// ConsumerGroupTopic is a subscribed topic as the group's target assignment saw it.
type ConsumerGroupTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// ConsumerGroupMember is one member's state.
type ConsumerGroupMember struct {
	MemberID, InstanceID, RackID, ClientID, ClientHost string
	MemberEpoch, PreviousMemberEpoch                   int32
	// State is the member's reconciliation state: 0 stable, 1 unrevoked partitions,
	// 2 unreleased partitions.
	State              int8
	RebalanceTimeoutMs int32
	Names              []string
	Regex              string
	Assignor           string
	// Assigned, Revoking and Target map topic ids to sorted partitions.
	Assigned, Revoking, Target map[[16]byte][]int32
	// Classic is set for a member using the classic protocol.
	Classic *ConsumerGroupClassicMember
}

// ConsumerGroupClassicMember is a classic-protocol member's session timeout and
// JoinGroup protocols.
type ConsumerGroupClassicMember struct {
	SessionTimeoutMs int32
	Protocols        []ConsumerGroupClassicProtocol
}

// ConsumerGroupClassicProtocol is one protocol of a classic member's JoinGroup.
type ConsumerGroupClassicProtocol struct {
	Name     string
	Metadata []byte
}
