package controller

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shalelog/shale/metadata/topicconfig"
)

// Config configures one controller of the quorum.
type Config struct {
	// NodeID is this controller's node.id. When it is not one of Voters, the controller
	// joins a running quorum: it never bootstraps one, and waits until the active
	// controller adds it (AddVoter; `shale controller add`).
	NodeID int32
	// Voters is controller.quorum.voters: the controllers of the quorum when it was
	// formed, or, for a joining controller, controllers of the running quorum.
	Voters []Voter
	// BootstrapServers is controller.quorum.bootstrap.servers, host:port of controllers
	// to ask for the quorum's current voters at start-up; their answer takes precedence
	// over Voters (bootstrap.go). Empty: Voters alone.
	BootstrapServers []string
	// BootstrapTLS is the client TLS for BootstrapServers (their gRPC service); nil:
	// plaintext.
	BootstrapTLS *tls.Config
	// BootstrapTimeout bounds the question to BootstrapServers. Default
	// DefaultBootstrapTimeout.
	BootstrapTimeout time.Duration
	// Address is the host:port peers dial to reach a joining controller (one not in
	// Voters); default the listener's address.
	Address string
	// ListenAddr is the host:port of this controller's CONTROLLER listener, which carries
	// both Raft and the gRPC service. Empty: this node's address in Voters.
	ListenAddr string
	// Listener, when set, is an already bound listener used instead of ListenAddr.
	Listener net.Listener
	// GRPCTLS, when set, serves the gRPC service (brokers' calls) over TLS only, with
	// ALPN h2; Raft between controllers stays as it is.
	GRPCTLS *tls.Config
	// ServeKafkaClients hands the connections of Kafka clients that were given this
	// controller's address to KafkaListener, for the broker in the same process to
	// serve; otherwise they are closed at once with a log line naming the brokers'
	// listeners.
	ServeKafkaClients bool
	// DataDir holds the Raft log and stable store (raft.db, raft-boltdb) and snapshots.
	DataDir string
	// Raft, when set, replaces the Raft stores the controller opens in DataDir and the
	// Raft transport on its listener, which then carries the gRPC service alone. Tests
	// run on hashicorp/raft's in-memory stores and transport (controllertest).
	Raft *RaftStorage
	// SessionTimeout is broker.session.timeout.ms: a broker whose heartbeats stop for this
	// long is fenced. Default 9s.
	SessionTimeout time.Duration
	// DefaultPartitions is num.partitions, for CreateTopics without a count. Default 1.
	DefaultPartitions int32
	// DefaultReplicationFactor is default.replication.factor. Default 1.
	DefaultReplicationFactor int16
	// UncleanLeaderElection is unclean.leader.election.enable, the default for topics
	// that do not set it. Default false.
	UncleanLeaderElection bool
	// RemoteLogStorageSystemEnable is remote.log.storage.system.enable: whether topics may
	// set remote.storage.enable (tiered storage, KIP-405). As in KRaft, the controller
	// validates topic configs against its own setting; set it alike on every node.
	RemoteLogStorageSystemEnable bool
	// TopicDefaults are the broker-level topic defaults (log.retention.ms, ...) the
	// cross-config checks of tiered storage resolve against (topicconfig.ValidateRemote).
	TopicDefaults topicconfig.BrokerDefaults
	// DisableAutoLeaderRebalance is auto.leader.rebalance.enable=false: no periodic
	// preferred-leader elections.
	DisableAutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds: how often
	// the active controller looks for brokers that lead too few of the partitions that
	// prefer them. Default 300s.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is leader.imbalance.per.broker.percentage: the
	// share of a broker's preferred partitions that may be led elsewhere before their
	// preferred leaders are elected. 0 takes the default 10; a negative value stands for
	// Kafka's 0 (any imbalance triggers).
	LeaderImbalancePerBrokerPercentage int32
	// Logger receives the controller's and Raft's logs. Default slog.Default().
	Logger *slog.Logger

	// HeartbeatTimeout and ElectionTimeout are Raft's (controller.quorum.election.timeout.ms
	// in KRaft terms): how long a follower waits without a leader before it stands for
	// election. Default 1s each.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLeaseTimeout is how long a Raft leader stays leader without reaching a
	// majority. Default 500ms; at most HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold is how many records since the last snapshot trigger a new one,
	// checked every SnapshotInterval. Defaults 8192 and 30s.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is how many records a snapshot leaves in the log, so that a follower
	// slightly behind catches up from the log rather than by a snapshot. Default 10240.
	TrailingLogs uint64
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions: how many partitions the
	// __consumer_offsets view has, hence how groups spread over coordinators. As in Kafka
	// it is fixed when the cluster is created (by its first controller); 0 takes the
	// default, 50.
	OffsetsTopicNumPartitions int32
	// OffsetCommitBatch is the most offset operations gathered into one Raft record.
	// Default 2048.
	OffsetCommitBatch int
	// VoterCatchUpTimeout bounds how long a controller being added may take to catch up
	// as a non-voter before the addition is undone. Default 60s.
	VoterCatchUpTimeout time.Duration
}

// RaftStorage is Raft's log, stable store, snapshot store and transport, for Config.Raft.
// The transport's address must be this node's address in Voters.
type RaftStorage struct {
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	Transport raft.Transport
}

// Defaults of Config.
const (
	DefaultSessionTimeout    = 9 * time.Second
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultLeaderImbalanceCheckInterval and DefaultLeaderImbalancePerBrokerPercentage
	// are Kafka's defaults of leader.imbalance.check.interval.seconds and
	// leader.imbalance.per.broker.percentage.
	DefaultLeaderImbalanceCheckInterval       = 300 * time.Second
	DefaultLeaderImbalancePerBrokerPercentage = 10
	defaultRaftTimeout                        = time.Second
	defaultLeaderLease                        = 500 * time.Millisecond
	defaultSnapshotThreshold                  = 8192
	defaultSnapshotInterval                   = 30 * time.Second
	defaultTrailingLogs                       = 10240
	defaultOffsetCommitBatch                  = 2048
	defaultProducerIDsPerCall                 = producerIDBlockSize
)

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.LeaderImbalanceCheckInterval <= 0 {
		out.LeaderImbalanceCheckInterval = DefaultLeaderImbalanceCheckInterval
	}
	switch {
	case out.LeaderImbalancePerBrokerPercentage == 0:
		out.LeaderImbalancePerBrokerPercentage = DefaultLeaderImbalancePerBrokerPercentage
	case out.LeaderImbalancePerBrokerPercentage < 0:
		out.LeaderImbalancePerBrokerPercentage = 0
	}
	if out.SessionTimeout <= 0 {
		out.SessionTimeout = DefaultSessionTimeout
	}
	if out.DefaultPartitions == 0 {
		out.DefaultPartitions = 1
	}
	if out.DefaultReplicationFactor == 0 {
		out.DefaultReplicationFactor = 1
	}
	if out.HeartbeatTimeout <= 0 {
		out.HeartbeatTimeout = defaultRaftTimeout
	}
	if out.ElectionTimeout <= 0 {
		out.ElectionTimeout = defaultRaftTimeout
	}
	if out.LeaderLeaseTimeout <= 0 {
		out.LeaderLeaseTimeout = min(defaultLeaderLease, out.HeartbeatTimeout)
	}
	if out.SnapshotThreshold == 0 {
		out.SnapshotThreshold = defaultSnapshotThreshold
	}
	if out.SnapshotInterval <= 0 {
		out.SnapshotInterval = defaultSnapshotInterval
	}
	if out.TrailingLogs == 0 {
		out.TrailingLogs = defaultTrailingLogs
	}
	if out.VoterCatchUpTimeout <= 0 {
		out.VoterCatchUpTimeout = defaultVoterCatchUpTimeout
	}
	if out.BootstrapTimeout <= 0 {
		out.BootstrapTimeout = DefaultBootstrapTimeout
	}
	if out.OffsetCommitBatch <= 0 {
		out.OffsetCommitBatch = defaultOffsetCommitBatch
	}
	switch {
	case out.NodeID < 0:
		return out, fmt.Errorf("controller: node.id %d is negative", out.NodeID)
	case len(out.Voters) == 0:
		return out, errors.New("controller: controller.quorum.voters is empty")
	case out.DataDir == "":
		return out, errors.New("controller: no data directory")
	case out.DefaultPartitions < 1:
		return out, fmt.Errorf("controller: num.partitions %d must be at least 1", out.DefaultPartitions)
	case out.DefaultReplicationFactor < 1:
		return out, fmt.Errorf("controller: default.replication.factor %d must be at least 1", out.DefaultReplicationFactor)
	case out.LeaderLeaseTimeout > out.HeartbeatTimeout:
		return out, errors.New("controller: LeaderLeaseTimeout must not exceed HeartbeatTimeout")
	}
	if out.joining() && out.selfAddr() == "" {
		return out, fmt.Errorf("controller: node.id %d is not in controller.quorum.voters %s, so it joins the running quorum, "+
			"but it has no address for its peers to dial", out.NodeID, FormatVoters(out.Voters))
	}
	seen := map[int32]bool{}
	for _, v := range out.Voters {
		if seen[v.ID] {
			return out, fmt.Errorf("controller: voter %d listed twice", v.ID)
		}
		seen[v.ID] = true
	}
	return out, nil
}

// joining reports whether this controller is not among the configured voters: it joins
// a running quorum instead of forming one.
func (c *Config) joining() bool {
	return !slices.ContainsFunc(c.Voters, func(v Voter) bool { return v.ID == c.NodeID })
}

func (c *Config) selfAddr() string {
	for _, v := range c.Voters {
		if v.ID == c.NodeID {
			return v.Addr
		}
	}
	switch {
	case c.Address != "":
		return c.Address
	case c.ListenAddr != "":
		return c.ListenAddr
	case c.Listener != nil:
		return c.Listener.Addr().String()
	}
	return ""
}
