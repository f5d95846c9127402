package config

import (
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"
)

// Config is a node's configuration. Each field's comment gives its key and its default;
// unless it says otherwise the key, the meaning and the default are Kafka's. Fields are
// filled and checked by Load or Default; code that builds a Config by hand must keep the
// same invariants (one log dir, PLAINTEXT listeners, voters including a controller's own
// node.id).
type Config struct {
	// AuthorizerClassName, SuperUsers and AllowEveryoneIfNoACLFound are
	// authorizer.class.name, super.users and allow.everyone.if.no.acl.found (authz.go).
	AuthorizerClassName       string
	SuperUsers                []string
	AllowEveryoneIfNoACLFound bool

	// NodeID is node.id (default 1): the broker and controller id of this process.
	NodeID int32
	// ProcessRoles is process.roles (default "broker,controller"): "broker",
	// "controller" or both. Shale has no ZooKeeper mode, so it is never empty.
	ProcessRoles []string
	// ControllerQuorumVoters is controller.quorum.voters, "id@host:port,...". Default "":
	// a controller node votes alone, as <node.id>@<its controller listener>; a
	// broker-only node must be told the voters.
	ControllerQuorumVoters []Voter
	// ControllerQuorumBootstrapServers is controller.quorum.bootstrap.servers,
	// "host:port,...". Default "": controller.quorum.voters alone. When set, a starting
	// controller takes the quorum's current voters from them (falling back to
	// controller.quorum.voters when none answers) and a broker dials them first.
	ControllerQuorumBootstrapServers []string
	// Listeners is listeners (default
	// "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"), NAME://host:port each.
	// An empty host or 0.0.0.0 binds every interface; port 0 binds a free port (see
	// SetBoundPort). Kafka's default is PLAINTEXT://:9092; Shale binds loopback so that a
	// node started for a try is not open to the network.
	Listeners []Listener
	// AdvertisedListeners is advertised.listeners: the addresses given to clients in
	// Metadata. Default: the non-controller listeners, with 127.0.0.1 for an empty or
	// wildcard host (Kafka would advertise the machine's canonical hostname; Shale warns
	// instead, since only an operator knows the name clients can reach).
	AdvertisedListeners []Listener
	// ListenerSecurityProtocolMap is listener.security.protocol.map (default
	// "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
	// listener name to security protocol. As in Kafka, a controller listener missing from
	// it is PLAINTEXT; a controller listener may be PLAINTEXT or SSL.
	ListenerSecurityProtocolMap map[string]string
	// ControllerListenerNames is controller.listener.names (default "CONTROLLER"). The
	// first is the listener a controller serves its quorum on.
	ControllerListenerNames []string
	// InterBrokerListenerName is inter.broker.listener.name (default "PLAINTEXT"): the
	// listener other brokers (replica fetchers) connect to.
	InterBrokerListenerName string
	// LogDir is log.dirs, or log.dir when log.dirs is unset (Shale's default "./data";
	// Kafka's is /tmp/kafka-logs). Shale keeps all partitions in one directory, so a list
	// of more than one is refused.
	LogDir string

	// NumPartitions is num.partitions (default 1): partitions of an auto-created topic or
	// of a CreateTopics request that asks for the broker default (-1).
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor (default 1).
	DefaultReplicationFactor int16
	// MinInsyncReplicas is min.insync.replicas (default 1): the fewest in-sync replicas
	// that must hold an acks=all write; topic config min.insync.replicas.
	MinInsyncReplicas int32
	// AutoCreateTopicsEnable is auto.create.topics.enable (default true): Metadata and
	// Produce for an unknown topic create it.
	AutoCreateTopicsEnable bool
	// DeleteTopicEnable is delete.topic.enable (default true).
	DeleteTopicEnable bool
	// MaxIncrementalFetchSessionCacheSlots is max.incremental.fetch.session.cache.slots
	// (default 1000; 0 keeps no fetch sessions).
	MaxIncrementalFetchSessionCacheSlots int32
	// ProducerIDExpirationMs is producer.id.expiration.ms (default 86400000): idempotent
	// producer state idle this long is forgotten.
	ProducerIDExpirationMs int64
	// ProducerIDExpirationCheckIntervalMs is producer.id.expiration.check.interval.ms
	// (default 600000).
	ProducerIDExpirationCheckIntervalMs int64
	// TransactionMaxTimeoutMs is transaction.max.timeout.ms (default 900000): the longest
	// transaction.timeout.ms a producer may ask for.
	TransactionMaxTimeoutMs int64
	// TransactionalIDExpirationMs is transactional.id.expiration.ms (default 604800000):
	// a transactional id with no transaction this long is forgotten.
	TransactionalIDExpirationMs int64
	// TransactionVersion is transaction.version (default 2): the feature level of
	// KIP-890's transactions v2 that ApiVersions finalizes.
	TransactionVersion int16
	// TransactionAbortTimedOutTransactionCleanupIntervalMs is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (default 10000).
	TransactionAbortTimedOutTransactionCleanupIntervalMs int64
	// TransactionRemoveExpiredTransactionCleanupIntervalMs is
	// transaction.remove.expired.transaction.cleanup.interval.ms (default 3600000).
	TransactionRemoveExpiredTransactionCleanupIntervalMs int64
	// UncleanLeaderElectionEnable is unclean.leader.election.enable (default false).
	UncleanLeaderElectionEnable bool
	// AutoLeaderRebalanceEnable is auto.leader.rebalance.enable (default true): the
	// active controller moves leadership back to preferred replicas when a broker's
	// leader imbalance exceeds LeaderImbalancePerBrokerPercentage.
	AutoLeaderRebalanceEnable bool
	// LeaderImbalanceCheckIntervalSeconds is leader.imbalance.check.interval.seconds
	// (default 300).
	LeaderImbalanceCheckIntervalSeconds int64
	// LeaderImbalancePerBrokerPercentage is leader.imbalance.per.broker.percentage
	// (default 10).
	LeaderImbalancePerBrokerPercentage int32

	// ReplicaFetchBackoffMs is replica.fetch.backoff.ms (default 1000).
	ReplicaFetchBackoffMs int64
	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate are
	// leader.replication.throttled.rate and follower.replication.throttled.rate: bytes
	// per second for the replicas a reassignment adds (and those the topic configs
	// *.replication.throttled.replicas list) while out of sync (default MaxInt64: none).
	// Static here: Shale has no dynamic broker configs. At least 1 (Kafka allows 0, which
	// stops throttled replication altogether).
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64
	// ReplicaHighWatermarkCheckpointIntervalMs is
	// replica.high.watermark.checkpoint.interval.ms (default 5000).
	ReplicaHighWatermarkCheckpointIntervalMs int64

	// LogSegmentBytes is log.segment.bytes (default 1073741824); topic segment.bytes.
	LogSegmentBytes int32
	// LogRollMs is log.roll.ms, or log.roll.hours (default 168) in ms when log.roll.ms is
	// unset; topic segment.ms.
	LogRollMs int64
	// LogRetentionMs is log.retention.ms, else log.retention.minutes, else
	// log.retention.hours (default 168), in ms; -1 (any negative value) keeps segments
	// forever. Topic retention.ms.
	LogRetentionMs int64
	// LogRetentionBytes is log.retention.bytes (default -1, no limit); topic
	// retention.bytes.
	LogRetentionBytes int64
	// LogRetentionCheckIntervalMs is log.retention.check.interval.ms (default 300000).
	LogRetentionCheckIntervalMs int64
	// NumRecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir: replicas opened
	// at once at startup (default 8; Kafka's is 1, see partition.DefaultRecoveryThreads).
	NumRecoveryThreadsPerDataDir int32
	// LogMappedSegmentsMax is log.mapped.segments.max (Shale): sealed segments mapped at
	// once across all replicas, three mappings and up to three descriptors each
	// (default 8192, see log.DefaultMaxMappedSegments).
	LogMappedSegmentsMax int32
	// LogCleanerThreads (log.cleaner.threads, default 1), LogCleanerDedupeBufferSize
	// (log.cleaner.dedupe.buffer.size, 128 MiB shared by the threads),
	// LogCleanerIOMaxBytesPerSecond (log.cleaner.io.max.bytes.per.second, no limit) and
	// LogCleanerBackoffMs (log.cleaner.backoff.ms, 15000) drive compaction.
	// LogCleanerEnable is log.cleaner.enable (default true).
	LogCleanerEnable              bool
	LogCleanerThreads             int32
	LogCleanerDedupeBufferSize    int64
	LogCleanerIOMaxBytesPerSecond float64
	LogCleanerBackoffMs           int64
	// LogFlushIntervalMessages is log.flush.interval.messages (default MaxInt64); topic
	// flush.messages.
	LogFlushIntervalMessages int64
	// LogFlushIntervalMs is log.flush.interval.ms (unset: MaxInt64, never by time); topic
	// flush.ms.
	LogFlushIntervalMs int64
	// LogWritebackBytes is log.writeback.bytes (Shale's, default 4 MiB, 0 off); topic
	// writeback.bytes: the step at which appends start the kernel's writeback of the
	// active segment (see log.Config.WritebackBytes).
	LogWritebackBytes int64
	// AcksAllFsync is acks.all.fsync (Shale's, default false, Kafka's behaviour); topic
	// acks.all.fsync: acks=all answers, and consumers' reads, wait until every ISR member
	// has fsynced the record (see partition.Settings.AcksAllFsync).
	AcksAllFsync bool
	// LogIndexIntervalBytes is log.index.interval.bytes (default 4096); topic
	// index.interval.bytes.
	LogIndexIntervalBytes int32
	// LogIndexSizeMaxBytes is log.index.size.max.bytes (default 10485760); topic
	// segment.index.bytes.
	LogIndexSizeMaxBytes int32
	// MessageMaxBytes is message.max.bytes (default 1048588): the largest record batch;
	// topic max.message.bytes.
	MessageMaxBytes int32
	// LogMessageTimestampType is log.message.timestamp.type (default CreateTime); topic
	// message.timestamp.type.
	LogMessageTimestampType string
	// CompressionType is compression.type (default producer); topic compression.type.
	CompressionType string

	// SocketRequestMaxBytes is socket.request.max.bytes (default 104857600): the largest
	// request the Kafka listener reads.
	SocketRequestMaxBytes int32
	// Limits and quotas (issue 13): see README "Quotas and limits".
	// QueuedMaxRequests is queued.max.requests (default 500): requests read but not yet
	// handled across the broker before readers are muted.
	QueuedMaxRequests int32
	// QueuedMaxRequestBytes is queued.max.request.bytes (default 268435456, where Kafka's
	// is -1, unbounded): request bytes held across the broker before readers are muted.
	QueuedMaxRequestBytes int64
	// FetchSendfileEnable is fetch.sendfile.enable (Shale, default true): plaintext
	// listeners send fetch responses' record bytes with sendfile.
	FetchSendfileEnable bool
	// ConnectionsMaxIdleMs is connections.max.idle.ms (default 600000): an idle connection
	// is closed after this long, and so is one whose client takes no response bytes.
	ConnectionsMaxIdleMs int64
	// MaxConnections is max.connections (default 2147483647): client connections per broker.
	MaxConnections int32
	// MaxConnectionsPerIP is max.connections.per.ip (default 2147483647).
	MaxConnectionsPerIP int32
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides ("host:n,...").
	MaxConnectionsPerIPOverrides string
	// QuotaWindowNum and QuotaWindowSizeSeconds are quota.window.num (default 11) and
	// quota.window.size.seconds (default 1): the samples a client's rate is measured over.
	QuotaWindowNum         int32
	QuotaWindowSizeSeconds int32
	// TelemetryMaxBytes is telemetry.max.bytes (Kafka's, default 1048576): the largest
	// client telemetry push (KIP-714). TelemetryMaxSeries is telemetry.max.series
	// (Shale's, default 10000): the most pushed series a broker exports on /metrics.
	TelemetryMaxBytes  int32
	TelemetryMaxSeries int32

	// BrokerRack is broker.rack (default "", none).
	BrokerRack string
	// BrokerSessionTimeoutMs is broker.session.timeout.ms (default 9000): how long the
	// controller keeps a broker's lease without a heartbeat before fencing it.
	BrokerSessionTimeoutMs int32
	// BrokerHeartbeatIntervalMs is broker.heartbeat.interval.ms (default 2000).
	BrokerHeartbeatIntervalMs int32

	// OffsetsRetentionMinutes is offsets.retention.minutes (default 10080): how long an
	// empty group's committed offsets are kept.
	OffsetsRetentionMinutes int32
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (default 4096): the longest
	// metadata string an offset commit may carry (OFFSET_METADATA_TOO_LARGE beyond), at
	// most metadata.MaxOffsetMetadataBytes.
	OffsetMetadataMaxBytes int32
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions (default 50): the
	// partitions of __consumer_offsets, over which groups spread across coordinators.
	// Fixed when the cluster is created, as in Kafka.
	OffsetsTopicNumPartitions int32
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms (default 3000).
	GroupInitialRebalanceDelayMs int32
	// GroupMinSessionTimeoutMs is group.min.session.timeout.ms (default 6000).
	GroupMinSessionTimeoutMs int32
	// GroupMaxSessionTimeoutMs is group.max.session.timeout.ms (default 1800000).
	GroupMaxSessionTimeoutMs int32
	// GroupShareSessionTimeoutMs, GroupShareHeartbeatIntervalMs and GroupShareMaxSize
	// are group.share.session.timeout.ms (default 45000),
	// group.share.heartbeat.interval.ms (default 5000) and group.share.max.size (default
	// 200): share-group (KIP-932) membership. Kafka also has them per group as group
	// configs; Shale has only these broker-wide values.
	GroupShareSessionTimeoutMs    int32
	GroupShareHeartbeatIntervalMs int32
	GroupShareMaxSize             int32
	// Share groups (KIP-932): group.share.record.lock.duration.ms (default 30000),
	// group.share.delivery.count.limit (5), group.share.partition.max.record.locks
	// (2000), and share.auto.offset.reset (latest), a group config in Kafka that Shale,
	// without group configs, takes as a broker-wide setting.
	GroupShareRecordLockDurationMs    int32
	GroupShareDeliveryCountLimit      int32
	GroupSharePartitionMaxRecordLocks int32
	ShareAutoOffsetReset              string
	// Group configs (KIP-848, KIP-932): group.consumer.session.timeout.ms (45000) and
	// group.consumer.heartbeat.interval.ms (5000), the consumer.* GROUP keys' defaults,
	// and the group.{consumer,share}.{min,max}.* bounds of the GROUP keys (Kafka's
	// defaults: sessions 45000-60000, heartbeats 5000-15000, record locks 15000-60000).
	GroupConsumerSessionTimeoutMs    int32
	GroupConsumerHeartbeatIntervalMs int32
	// GroupConsumerAssignors is group.consumer.assignors (default uniform,range), the
	// server-side assignors of consumer groups; GroupConsumerMaxSize is
	// group.consumer.max.size (default 2147483647, Kafka's: no practical limit).
	GroupConsumerAssignors []string
	GroupConsumerMaxSize   int32
	// GroupConsumerMigrationPolicy is group.consumer.migration.policy (default
	// bidirectional): disabled, upgrade, downgrade or bidirectional online conversion of
	// live groups between the classic and the consumer protocol.
	GroupConsumerMigrationPolicy        string
	GroupConsumerMinSessionTimeoutMs    int32
	GroupConsumerMaxSessionTimeoutMs    int32
	GroupConsumerMinHeartbeatIntervalMs int32
	GroupConsumerMaxHeartbeatIntervalMs int32
	GroupShareMinSessionTimeoutMs       int32
	GroupShareMaxSessionTimeoutMs       int32
	GroupShareMinHeartbeatIntervalMs    int32
	GroupShareMaxHeartbeatIntervalMs    int32
	GroupShareMinRecordLockDurationMs   int32
	GroupShareMaxRecordLockDurationMs   int32

	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms (default 30000): a follower that has
	// not caught up for this long leaves the ISR.
	ReplicaLagTimeMaxMs int64
	// ReplicaSelectorClass is replica.selector.class (default "", consumers read from
	// leaders), as one of Kafka's class names (replicaselector.go).
	ReplicaSelectorClass string
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes (default 1048576) per partition.
	ReplicaFetchMaxBytes int32
	// ReplicaFetchWaitMaxMs is replica.fetch.wait.max.ms (default 500).
	ReplicaFetchWaitMaxMs int32
	// NumReplicaFetchers is num.replica.fetchers (default 1) per source broker.
	NumReplicaFetchers int32

	// ClusterID is cluster.id (default "", optional): when set, the 22-character base64
	// UUID the node's data must belong to (kafka-storage.sh random-uuid makes one).
	ClusterID string
	// HTTPListener is http.listener (Shale's own; default "127.0.0.1:9644"): host:port
	// for metrics and health; "" turns it off.
	HTTPListener string
	// ConsoleEnable is console.enable (Shale's own; default true): brokers serve the web
	// console at / on http.listener. Kafka has no console.
	ConsoleEnable bool
	// ConsoleReadOnly is console.read.only (Shale's own; default false): the console
	// shows the cluster but refuses every change (producing a test record).
	ConsoleReadOnly bool
	// SchemaRegistryListener is schema.registry.listener (Shale's own; default
	// "127.0.0.1:8081", the port Confluent Schema Registry's clients expect): host:port
	// of the built-in schema registry's REST API on brokers; "" turns it off. Loopback by
	// default: the listener is open until schema.registry.authentication.method is set.
	SchemaRegistryListener string
	// SchemaRegistrySecurity is schema.registry.ssl.enable, .ssl.client.auth,
	// .authentication.method and .authentication.realm (httpsecurity.go).
	SchemaRegistrySecurity HTTPSecurity
	// RESTProxyListener is rest.proxy.listener (Shale's own; default "127.0.0.1:8082",
	// Confluent REST Proxy's port): host:port of the built-in HTTP proxy (Confluent REST
	// Proxy's v3 paths) on brokers; "" turns it off. Loopback by default: the
	// listener is open until rest.proxy.authentication.method is set.
	RESTProxyListener string
	// RESTProxySecurity is rest.proxy.ssl.enable, .ssl.client.auth, .authentication.method
	// and .authentication.realm (httpsecurity.go).
	RESTProxySecurity HTTPSecurity
	// LogLevel is log.level (Shale's own; default info): debug, info, warn or error.
	LogLevel slog.Level
	// RemoteStorage is tiered storage's settings (remotestorage.go).
	RemoteStorage RemoteStorage

	// Security (security.go). SSLKeystoreType and SSLTruststoreType are
	// ssl.keystore.type and ssl.truststore.type (default PEM, the only format Shale reads).
	SSLKeystoreType, SSLTruststoreType string
	// SSLKeystoreLocation is ssl.keystore.location (default ""): this node's certificate
	// chain and private key, one PEM file, reloaded when it changes.
	SSLKeystoreLocation string
	// SSLTruststoreLocation is ssl.truststore.location (default "": the system's CAs).
	SSLTruststoreLocation string
	// SSLClientAuth is ssl.client.auth (default none): required, requested or none.
	SSLClientAuth string
	// SSLPrincipalMappingRules is ssl.principal.mapping.rules (default DEFAULT).
	SSLPrincipalMappingRules string
	// SSLEndpointIdentificationAlgorithm is ssl.endpoint.identification.algorithm
	// (default https): brokers verify the host name in a peer broker's certificate.
	SSLEndpointIdentificationAlgorithm string
	// SASLEnabledMechanisms is sasl.enabled.mechanisms (Shale's default
	// SCRAM-SHA-256,SCRAM-SHA-512; Kafka's GSSAPI is not served).
	SASLEnabledMechanisms []string
	// SASLMechanismInterBrokerProtocol is sasl.mechanism.inter.broker.protocol (Shale's
	// default SCRAM-SHA-512).
	SASLMechanismInterBrokerProtocol string
	// SASLPlainUsersFile is sasl.plain.users.file (Shale's own; default ""): the
	// user=password file SASL/PLAIN checks.
	SASLPlainUsersFile string
	// SASLInterBrokerUsername and SASLInterBrokerPassword are sasl.inter.broker.username
	// and sasl.inter.broker.password (Shale's own; Kafka puts them in the listener's JAAS
	// config): the login brokers use on a SASL inter-broker listener.
	SASLInterBrokerUsername, SASLInterBrokerPassword string
	// ConnectionsMaxReauthMs is connections.max.reauth.ms (default 0, no limit).
	ConnectionsMaxReauthMs int64

	// Warnings are messages about the configuration that are not errors (unknown keys in
	// a file, a wildcard host advertised as 127.0.0.1); the caller logs them once it has
	// a logger.
	Warnings []string

	// extraTopicDefaults holds broker-level synonyms of topic configs that Shale accepts
	// only to pass on as topic defaults (log.cleanup.policy, log.preallocate, ...), by
	// broker key.
	extraTopicDefaults map[string]string
	// origins says where each key's value came from, by canonical key.
	origins map[string]origin
	// derivedAdvertised and derivedVoters record that those settings were computed from
	// the listeners, so SetBoundPort may update them.
	derivedAdvertised, derivedVoters bool
	// derivedControllerListener records that the controller listener was added because
	// none was configured and this node alone is the quorum.
	derivedControllerListener bool
}

// DerivedControllerListener reports whether the controller listener was not configured
// but chosen (loopback, a free port) because this node alone is the quorum.
func (c *Config) DerivedControllerListener() bool { return c.derivedControllerListener }

// Listener is one entry of listeners or advertised.listeners.
type Listener struct {
	Name string // upper-case listener name, e.g. PLAINTEXT
	Host string // "" binds every interface
	Port int
}

// Addr is host:port, for net.Listen or net.Dial.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String formats the listener as Kafka writes it, NAME://host:port.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Voter is one entry of controller.quorum.voters.
type Voter struct {
	ID   int32
	Host string
	Port int
}

// Addr is host:port.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// String formats the voter as Kafka writes it, id@host:port.
func (v Voter) String() string { return strconv.Itoa(int(v.ID)) + "@" + v.Addr() }

// IsBroker reports whether process.roles includes broker.
func (c *Config) IsBroker() bool { return slices.Contains(c.ProcessRoles, RoleBroker) }

// IsController reports whether process.roles includes controller.
func (c *Config) IsController() bool { return slices.Contains(c.ProcessRoles, RoleController) }

// Process roles.
const (
	RoleBroker     = "broker"
	RoleController = "controller"
)

// Voters returns the controller quorum.
func (c *Config) Voters() []Voter { return slices.Clone(c.ControllerQuorumVoters) }

// BrokerListeners returns the listeners that serve Kafka clients: every listener that is
// not a controller listener.
func (c *Config) BrokerListeners() []Listener {
	var ls []Listener
	for _, l := range c.Listeners {
		if !slices.Contains(c.ControllerListenerNames, l.Name) {
			ls = append(ls, l)
		}
	}
	return ls
}

// KafkaListener returns the bind address of the inter-broker listener, the main Kafka
// listener (host "" means every interface). ("", 0) on a node that is not a broker.
func (c *Config) KafkaListener() (host string, port int) {
	l, ok := findListener(c.Listeners, c.InterBrokerListenerName)
	if !ok || !c.IsBroker() {
		return "", 0
	}
	return l.Host, l.Port
}

// AdvertisedKafka returns the address advertised for the inter-broker listener, which
// Metadata gives to clients and other brokers. ("", 0) on a node that is not a broker.
func (c *Config) AdvertisedKafka() (host string, port int) {
	l, ok := c.Advertised(c.InterBrokerListenerName)
	if !ok || !c.IsBroker() {
		return "", 0
	}
	return l.Host, l.Port
}

// Advertised returns the advertised address of the named listener.
func (c *Config) Advertised(name string) (Listener, bool) {
	return findListener(c.AdvertisedListeners, name)
}

// ControllerListener returns the bind address of the listener the controller serves the
// quorum on (the first of controller.listener.names). ("", 0) on a node that is not a
// controller.
func (c *Config) ControllerListener() (host string, port int) {
	if !c.IsController() || len(c.ControllerListenerNames) == 0 {
		return "", 0
	}
	l, ok := findListener(c.Listeners, c.ControllerListenerNames[0])
	if !ok {
		return "", 0
	}
	return l.Host, l.Port
}

// SetBoundPort records the port a listener configured with port 0 was bound to, updating
// the settings the configuration derived from that listener: its advertised address when
// advertised.listeners was not given, and this node's voter entry when
// controller.quorum.voters was not given. Listeners with a non-zero port are left alone.
func (c *Config) SetBoundPort(name string, port int) {
	for i, l := range c.Listeners {
		if l.Name != name || l.Port != 0 {
			continue
		}
		c.Listeners[i].Port = port
		if c.derivedAdvertised {
			for j := range c.AdvertisedListeners {
				if c.AdvertisedListeners[j].Name == name {
					c.AdvertisedListeners[j].Port = port
				}
			}
		}
		if c.derivedVoters && len(c.ControllerListenerNames) > 0 && c.ControllerListenerNames[0] == name {
			for j := range c.ControllerQuorumVoters {
				if c.ControllerQuorumVoters[j].ID == c.NodeID {
					c.ControllerQuorumVoters[j].Port = port
				}
			}
		}
	}
}

func findListener(ls []Listener, name string) (Listener, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// BrokerSessionTimeout is broker.session.timeout.ms as a duration.
func (c *Config) BrokerSessionTimeout() time.Duration { return ms(int64(c.BrokerSessionTimeoutMs)) }

// BrokerHeartbeatInterval is broker.heartbeat.interval.ms as a duration.
func (c *Config) BrokerHeartbeatInterval() time.Duration {
	return ms(int64(c.BrokerHeartbeatIntervalMs))
}

// LogRetentionCheckInterval is log.retention.check.interval.ms as a duration.
func (c *Config) LogRetentionCheckInterval() time.Duration {
	return ms(c.LogRetentionCheckIntervalMs)
}

// ReplicaLagTimeMax is replica.lag.time.max.ms as a duration.
func (c *Config) ReplicaLagTimeMax() time.Duration { return ms(c.ReplicaLagTimeMaxMs) }

// ReplicaFetchWaitMax is replica.fetch.wait.max.ms as a duration.
func (c *Config) ReplicaFetchWaitMax() time.Duration { return ms(int64(c.ReplicaFetchWaitMaxMs)) }

// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms as a duration.
func (c *Config) GroupInitialRebalanceDelay() time.Duration {
	return ms(int64(c.GroupInitialRebalanceDelayMs))
}

// OffsetsRetention is offsets.retention.minutes as a duration.
func (c *Config) OffsetsRetention() time.Duration {
	return time.Duration(c.OffsetsRetentionMinutes) * time.Minute
}
