package metadata

import (
	"context"
	"time"
)

// Store is what a broker needs from the metadata quorum. Every mutating call is committed
// through the controller before it returns; the resulting image then arrives through
// Watch. Errors returned for a whole call or inside results wrap a *kerr.Error
// (github.com/twmb/franz-go/pkg/kerr) whenever Kafka has a code for the failure, so that
// protocol handlers can answer with errors.As; anything else is a transport failure that
// handlers report as a retriable error (REQUEST_TIMED_OUT / NOT_CONTROLLER).
type Store interface {
	// Current returns the latest committed image this broker has seen. Never nil.
	Current() *Image
	// Watch returns a channel that receives each new image (coalesced: a slow reader
	// sees the newest one). The channel is closed when ctx is done or the Store closes.
	Watch(ctx context.Context) <-chan *Image
	// LeaseValid reports whether this broker is registered, unfenced, and its heartbeat
	// lease has not lapsed by its own clock. A broker must not act as a leader otherwise.
	LeaseValid() bool
	// Fenced reports whether the controller's latest answer to this broker (its
	// registration or a heartbeat) said it is fenced, or it has no registration. Unlike a
	// lapsed lease this is knowledge, not the lack of it: a fenced broker must not act as
	// a leader, since its leaderships may have moved in metadata it has not yet applied.
	// A broker that cannot reach the controllers keeps the last answer and, as Kafka's
	// brokers do, goes on serving on the metadata it has.
	Fenced() bool
	// BrokerEpoch is the epoch of this broker's current registration, -1 before one.
	BrokerEpoch() int64

	CreateTopics(ctx context.Context, specs []TopicSpec, validateOnly bool) []TopicResult
	DeleteTopics(ctx context.Context, names []string) []error
	CreatePartitions(ctx context.Context, specs []PartitionsSpec, validateOnly bool) []error
	// AlterTopicConfigs changes one topic's configs. With incremental false the ops are a
	// whole new set (Kafka's AlterConfigs: unnamed configs revert to defaults).
	AlterTopicConfigs(ctx context.Context, topic string, ops []ConfigOp, incremental, validateOnly bool) error
	// AlterPartition proposes a new ISR for a partition this broker leads. It fails with
	// FENCED_LEADER_EPOCH or INVALID_UPDATE_VERSION when the epochs are stale.
	AlterPartition(ctx context.Context, req AlterPartitionRequest) (Partition, error)
	// AllocateProducerIDs hands this broker a block of producer ids unique in the cluster.
	AllocateProducerIDs(ctx context.Context) (first int64, count int32, err error)
	// ElectLeaders is Kafka's ElectLeaders: a preferred (else unclean) leader election
	// for the given partitions, nil for all. It returns each partition's outcome, nil
	// when a leader was elected, else ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
	// ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION; with nil partitions,
	// those that needed no election are left out.
	ElectLeaders(ctx context.Context, preferred bool, partitions map[string][]int32) (map[string]map[int32]error, error)
	// AlterPartitionReassignments is Kafka's AlterPartitionReassignments (KIP-455): it
	// starts, replaces or cancels each partition's reassignment and returns one outcome
	// per entry (nil, or INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR,
	// NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION).
	AlterPartitionReassignments(ctx context.Context, reassignments []Reassignment) ([]error, error)

	// CommitOffsets stores a group's committed offsets (batched through the quorum). The
	// controller refuses it with NOT_COORDINATOR unless fence names the group's current
	// coordinator and coordinator epoch.
	CommitOffsets(ctx context.Context, group string, fence GroupFence, offsets []CommittedOffset) error
	// FetchOffsets returns a group's committed offsets; nil topics means all of them.
	FetchOffsets(ctx context.Context, group string, topics map[string][]int32) ([]CommittedOffset, error)
	// DeleteGroupOffsets removes a group's committed offsets; nil topics means all. It is
	// fenced as CommitOffsets is.
	DeleteGroupOffsets(ctx context.Context, group string, fence GroupFence, topics map[string][]int32) error
	// ListOffsetGroups lists the groups that have committed offsets.
	ListOffsetGroups(ctx context.Context) ([]string, error)
	// ReadOffsetsLog reads partition of the __consumer_offsets view from offset from on:
	// the latest commit of every group offset in that partition whose log offset is at
	// least from, and the tombstones of recent deletions, in log order, up to about
	// maxBytes (at least one record). With nothing to return it waits up to maxWait for
	// a commit.
	ReadOffsetsLog(ctx context.Context, partition int32, from int64, maxBytes int32, maxWait time.Duration) (OffsetsLogSlice, error)

	Close() error
}

// TopicSpec asks for a new topic. NumPartitions and ReplicationFactor of -1 take the
// broker defaults (num.partitions, default.replication.factor); Assignments, when set,
// gives the replicas of each partition explicitly.
type TopicSpec struct {
	Name              string
	NumPartitions     int32
	ReplicationFactor int16
	Assignments       [][]int32
	Configs           map[string]string
}

// TopicResult is the outcome of creating one topic.
type TopicResult struct {
	Name  string
	Err   error
	Topic *Topic // the created (or validated) topic when Err is nil
}

// PartitionsSpec grows a topic to Count partitions.
type PartitionsSpec struct {
	Topic       string
	Count       int32
	Assignments [][]int32 // replicas for each new partition, optional
}

// ConfigOpType follows IncrementalAlterConfigs' operation codes.
type ConfigOpType int8

const (
	ConfigSet      ConfigOpType = 0
	ConfigDelete   ConfigOpType = 1
	ConfigAppend   ConfigOpType = 2
	ConfigSubtract ConfigOpType = 3
)

// ConfigOp is one change to a config.
type ConfigOp struct {
	Name  string
	Value *string
	Op    ConfigOpType
}

// AlterPartitionRequest carries the leader's view of the state it wants to change.
type AlterPartitionRequest struct {
	Topic          string
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// Reassignment is one partition's new target replicas; nil Replicas cancels the
// reassignment in progress. RefuseReplicationFactorChange refuses a target whose size
// differs from the partition's replicas (KIP-860).
type Reassignment struct {
	Topic                         string
	Partition                     int32
	Replicas                      []int32
	RefuseReplicationFactorChange bool
}

// OffsetsLogRecord is one record of the __consumer_offsets view: a group's committed
// offset, or a tombstone (Offset then carries only Topic and Partition).
type OffsetsLogRecord struct {
	LogOffset int64
	Group     string
	Tombstone bool
	Offset    CommittedOffset
}

// OffsetsLogSlice is what ReadOffsetsLog returns. LogEnd is the offset the next record of
// any partition will have at least; LogStart is the first offset still readable.
type OffsetsLogSlice struct {
	Records  []OffsetsLogRecord
	LogStart int64
	LogEnd   int64
}

// CommittedOffset is one committed consumer-group offset.
type CommittedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
	// ExpireTime is zero when the offset follows offsets.retention.minutes.
	ExpireTime time.Time
}
