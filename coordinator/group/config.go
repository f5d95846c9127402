package group

import (
	"log/slog"
	"time"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// Config configures a Coordinator. Zero values take Kafka's defaults, except
// InitialRebalanceDelay, where zero means no delay (DefaultConfig has Kafka's 3s).
type Config struct {
	// NodeID is this broker's node.id: the coordinator serves the groups that hash to it.
	NodeID int32
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the first
	// rebalance of an empty group waits for more members to join (extended, up to the
	// rebalance timeout, while new members keep arriving). Kafka's default is 3s.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout are group.min.session.timeout.ms (default
	// 6s) and group.max.session.timeout.ms (default 30m): a JoinGroup outside gets
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxGroupSize is group.max.size; 0 (the default) means no limit.
	MaxGroupSize int
	// NewMemberJoinTimeout bounds how long a new member's first JoinGroup may wait in a
	// rebalance before the member is dropped (Kafka's 5 minutes).
	NewMemberJoinTimeout time.Duration
	// OffsetsRetention is offsets.retention.minutes (default 7 days): committed offsets
	// of a group that has been empty this long (or, for groups that never used group
	// management, offsets not committed again for this long) are deleted.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms (default 10m).
	OffsetsRetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (default
	// metadata.DefaultOffsetMetadataMaxBytes): a longer commit metadata string, measured
	// by metadata.OffsetMetadataFits, gets OFFSET_METADATA_TOO_LARGE. The coordinator is
	// the only place that applies it (OffsetCommit and TxnOffsetCommit alike); a value
	// above metadata.MaxOffsetMetadataBytes, the controller's own bound, is lowered to it.
	OffsetMetadataMaxBytes int
	// StoreTimeout bounds each metadata store call made without a caller's context
	// (retention sweeps, metric scrapes). Default 10s.
	StoreTimeout time.Duration

	// ConsumerAssignors is group.consumer.assignors (default uniform, range): the
	// server-side assignors consumer groups (KIP-848) may ask for, the first the default.
	ConsumerAssignors []string
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are
	// group.consumer.session.timeout.ms (default 45s) and
	// group.consumer.heartbeat.interval.ms (default 5s), for groups whose
	// consumer.session.timeout.ms and consumer.heartbeat.interval.ms group configs are
	// unset.
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// ConsumerMaxGroupSize is group.consumer.max.size; 0 means no limit.
	ConsumerMaxGroupSize int
	// ConsumerMigrationPolicy is group.consumer.migration.policy: which online
	// conversions between the classic and the consumer protocol a live group may make
	// (MigrationBidirectional, the default, MigrationUpgrade, MigrationDowngrade,
	// MigrationDisabled). Empty groups convert whatever it says, as in Kafka.
	ConsumerMigrationPolicy string

	Logger *slog.Logger
	// Now is the clock for commit timestamps and retention; nil is time.Now.
	Now func() time.Time
	// Clock runs the session, rebalance and join timers; nil is the wall clock.
	Clock timer.Clock
}

// DefaultConfig is Kafka's defaults for node id.
func DefaultConfig(nodeID int32) Config {
	return Config{NodeID: nodeID, InitialRebalanceDelay: 3 * time.Second}
}

func (c Config) withDefaults() Config {
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.NewMemberJoinTimeout <= 0 {
		c.NewMemberJoinTimeout = 5 * time.Minute
	}
	if c.OffsetsRetention <= 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval <= 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = metadata.DefaultOffsetMetadataMaxBytes
	}
	c.OffsetMetadataMaxBytes = min(c.OffsetMetadataMaxBytes, metadata.MaxOffsetMetadataBytes)
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 10 * time.Second
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = DefaultConsumerAssignors
	}
	if c.ConsumerSessionTimeout <= 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerHeartbeatInterval <= 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.ConsumerMigrationPolicy == "" {
		c.ConsumerMigrationPolicy = MigrationBidirectional
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
