package config

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
)

// keyDef describes one setting: its Kafka name, its default as text, and how to parse it
// into a Config field and format it back.
type keyDef struct {
	name string
	// def is the default as the text a properties file would hold; noDefault keys are
	// absent from the defaults layer (their field then comes from a synonym).
	def       string
	noDefault bool
	doc       string
	// synonyms are lower-precedence keys for the same setting, highest first, as Kafka
	// has log.retention.minutes and log.retention.hours under log.retention.ms.
	synonyms []synonym
	set      func(c *Config, v string) error
	get      func(c *Config) string
}

// synonym is a key that sets another key's field when that key is unset: the value,
// an integer, is multiplied by scale (scale 0 passes text through unchanged).
type synonym struct {
	name      string
	def       string
	noDefault bool
	scale     int64
	min       int64
}

const (
	msPerMinute = 60 * 1000
	msPerHour   = 60 * msPerMinute
	noMin       = math.MinInt64
)

type accessor struct {
	set func(c *Config, v string) error
	get func(c *Config) string
}

func key(name, def, doc string, a accessor) *keyDef {
	return &keyDef{name: name, def: def, doc: doc, set: a.set, get: a.get}
}

func parseInt(v string, bits int, min int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("out of range for a %d-bit integer", bits)
		}
		return 0, fmt.Errorf("not an integer")
	}
	if n < min {
		return 0, fmt.Errorf("must be at least %d", min)
	}
	return n, nil
}

func intField[T ~int16 | ~int32 | ~int64](bits int, field func(*Config) *T, min int64) accessor {
	return accessor{
		set: func(c *Config, v string) error {
			n, err := parseInt(v, bits, min)
			if err != nil {
				return err
			}
			*field(c) = T(n)
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(int64(*field(c)), 10) },
	}
}

func i16(field func(*Config) *int16, min int64) accessor { return intField(16, field, min) }
func i32(field func(*Config) *int32, min int64) accessor { return intField(32, field, min) }
func i64(field func(*Config) *int64, min int64) accessor { return intField(64, field, min) }

// f64 is a double setting, at least min.
func f64(field func(*Config) *float64, min float64) accessor {
	return accessor{
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("not a number")
			}
			if f < min {
				return fmt.Errorf("must be at least %g", min)
			}
			*field(c) = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(*field(c), 'g', -1, 64) },
	}
}

func boolField(field func(*Config) *bool) accessor {
	return accessor{
		set: func(c *Config, v string) error {
			// Kafka parses booleans case-insensitively and nothing else.
			switch strings.ToLower(v) {
			case "true":
				*field(c) = true
			case "false":
				*field(c) = false
			default:
				return fmt.Errorf("expected true or false")
			}
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

func stringField(field func(*Config) *string) accessor {
	return accessor{
		set: func(c *Config, v string) error { *field(c) = v; return nil },
		get: func(c *Config) string { return *field(c) },
	}
}

// splitList splits a Kafka list value: comma-separated, blanks around items ignored.
func splitList(v string) []string {
	var items []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

var keyTable = buildKeys()

// keysByName finds a key or synonym; the int is the synonym's index, -1 for the key.
var keysByName = indexKeys(keyTable)

type keyRef struct {
	def *keyDef
	syn int
}

func indexKeys(keys []*keyDef) map[string]keyRef {
	m := make(map[string]keyRef)
	for _, k := range keys {
		m[k.name] = keyRef{k, -1}
		for i, s := range k.synonyms {
			m[s.name] = keyRef{k, i}
		}
	}
	return m
}

func buildKeys() []*keyDef {
	keys := []*keyDef{
		key("node.id", "1", "This node's id as a broker and as a controller.",
			i32(func(c *Config) *int32 { return &c.NodeID }, 0)),
		key("process.roles", "broker,controller", "What this process is: broker, controller, or both.",
			accessor{set: setRoles, get: func(c *Config) string { return strings.Join(c.ProcessRoles, ",") }}),
		key("controller.quorum.voters", "", "The controller quorum, id@host:port,...; empty: a controller votes alone on its controller listener.",
			accessor{set: setVoters, get: getVoters}),
		key("controller.quorum.bootstrap.servers", "", "Controllers to ask for the quorum's current voters, host:port,... (KIP-853). When set they take precedence over controller.quorum.voters: a controller starting asks them for today's voters and uses controller.quorum.voters only when none answers (a quorum formed for the first time); a broker dials them first and follows the voters they report. Empty: controller.quorum.voters alone.",
			accessor{set: setBootstrapServers, get: func(c *Config) string { return strings.Join(c.ControllerQuorumBootstrapServers, ",") }}),
		key("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "Addresses to listen on, NAME://host:port,... (empty host or 0.0.0.0: every interface). A node that is its own quorum and lists no controller listener gets a loopback one on a free port.",
			accessor{set: setListeners(func(c *Config) *[]Listener { return &c.Listeners }), get: getListeners(func(c *Config) []Listener { return c.Listeners })}),
		key("advertised.listeners", "", "Addresses given to clients, NAME://host:port,...; empty: the non-controller listeners.",
			accessor{set: setListeners(func(c *Config) *[]Listener { return &c.AdvertisedListeners }), get: getListeners(func(c *Config) []Listener { return c.AdvertisedListeners })}),
		key("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Listener name to security protocol, NAME:PROTOCOL,...",
			accessor{set: setProtocolMap, get: getProtocolMap}),
		key("controller.listener.names", "CONTROLLER", "Listeners used by the controller quorum; the first is served by a controller.",
			accessor{set: func(c *Config, v string) error {
				c.ControllerListenerNames = nil
				for _, n := range splitList(v) {
					c.ControllerListenerNames = append(c.ControllerListenerNames, strings.ToUpper(n))
				}
				if len(c.ControllerListenerNames) == 0 {
					return fmt.Errorf("must name at least one listener")
				}
				return nil
			}, get: func(c *Config) string { return strings.Join(c.ControllerListenerNames, ",") }}),
		key("inter.broker.listener.name", "PLAINTEXT", "Listener other brokers connect to.",
			accessor{set: func(c *Config, v string) error {
				if v == "" {
					return fmt.Errorf("must not be empty")
				}
				c.InterBrokerListenerName = strings.ToUpper(v)
				return nil
			}, get: func(c *Config) string { return c.InterBrokerListenerName }}),
		{name: "log.dirs", def: "./data", doc: "The data directory (Shale uses exactly one).",
			synonyms: []synonym{{name: "log.dir", noDefault: true}},
			set:      setLogDirs, get: func(c *Config) string { return c.LogDir }},

		key("num.partitions", "1", "Partitions of a topic created without a count.",
			i32(func(c *Config) *int32 { return &c.NumPartitions }, 1)),
		key("default.replication.factor", "1", "Replication factor of a topic created without one.",
			i16(func(c *Config) *int16 { return &c.DefaultReplicationFactor }, 1)),
		key("min.insync.replicas", "1", "Fewest in-sync replicas that must hold an acks=all write.",
			i32(func(c *Config) *int32 { return &c.MinInsyncReplicas }, 1)),
		key("auto.create.topics.enable", "true", "Create unknown topics on Metadata and Produce.",
			boolField(func(c *Config) *bool { return &c.AutoCreateTopicsEnable })),
		key("delete.topic.enable", "true", "Allow DeleteTopics.",
			boolField(func(c *Config) *bool { return &c.DeleteTopicEnable })),
		key("max.incremental.fetch.session.cache.slots", "1000", "Fetch sessions (KIP-227) the broker keeps; 0 keeps none.",
			i32(func(c *Config) *int32 { return &c.MaxIncrementalFetchSessionCacheSlots }, 0)),
		key("producer.id.expiration.ms", "86400000", "Forget an idempotent producer's state after this long without a write.",
			i64(func(c *Config) *int64 { return &c.ProducerIDExpirationMs }, 1)),
		key("producer.id.expiration.check.interval.ms", "600000", "How often idle producer state is looked for.",
			i64(func(c *Config) *int64 { return &c.ProducerIDExpirationCheckIntervalMs }, 1)),
		key("transaction.max.timeout.ms", "900000", "The longest transaction.timeout.ms a transactional producer may ask for.",
			i64(func(c *Config) *int64 { return &c.TransactionMaxTimeoutMs }, 1)),
		key("transactional.id.expiration.ms", "604800000", "Forget a transactional id after this long without a transaction.",
			i64(func(c *Config) *int64 { return &c.TransactionalIDExpirationMs }, 1)),
		key("transaction.version", "2", "The transaction.version feature level ApiVersions finalizes (0-2; set it alike on every broker). 2, Kafka 4's level for a new cluster, serves transactions v2 (KIP-890 part 2: the producer epoch is bumped at every transaction end); 0 and 1 keep transactions v1.",
			i16(func(c *Config) *int16 { return &c.TransactionVersion }, 0)),
		key("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", "How often transactions open past their timeout are aborted.",
			i64(func(c *Config) *int64 { return &c.TransactionAbortTimedOutTransactionCleanupIntervalMs }, 1)),
		key("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", "How often expired transactional ids are removed.",
			i64(func(c *Config) *int64 { return &c.TransactionRemoveExpiredTransactionCleanupIntervalMs }, 1)),
		key("unclean.leader.election.enable", "false", "Let a replica outside the ISR become leader, losing data.",
			boolField(func(c *Config) *bool { return &c.UncleanLeaderElectionEnable })),
		key("replica.fetch.backoff.ms", "1000", "Pause after a failed follower fetch.",
			i64(func(c *Config) *int64 { return &c.ReplicaFetchBackoffMs }, 1)),
		key("leader.replication.throttled.rate", strconv.FormatInt(math.MaxInt64, 10), "Bytes per second a leader sends to the replicas a reassignment adds (and those leader.replication.throttled.replicas lists) while they are out of sync.",
			i64(func(c *Config) *int64 { return &c.LeaderReplicationThrottledRate }, 1)),
		key("follower.replication.throttled.rate", strconv.FormatInt(math.MaxInt64, 10), "Bytes per second a follower fetches for the replicas a reassignment adds (and those follower.replication.throttled.replicas lists) while they are out of sync.",
			i64(func(c *Config) *int64 { return &c.FollowerReplicationThrottledRate }, 1)),
		key("replica.high.watermark.checkpoint.interval.ms", "5000", "How often high watermarks are written to disk.",
			i64(func(c *Config) *int64 { return &c.ReplicaHighWatermarkCheckpointIntervalMs }, 1)),
		key("auto.leader.rebalance.enable", "true", "Move leadership back to preferred replicas when leaders are imbalanced.",
			boolField(func(c *Config) *bool { return &c.AutoLeaderRebalanceEnable })),
		key("leader.imbalance.check.interval.seconds", "300", "How often the controller checks for leader imbalance.",
			i64(func(c *Config) *int64 { return &c.LeaderImbalanceCheckIntervalSeconds }, 1)),
		key("leader.imbalance.per.broker.percentage", "10", "Share of a broker's preferred partitions led elsewhere that triggers a rebalance.",
			i32(func(c *Config) *int32 { return &c.LeaderImbalancePerBrokerPercentage }, 0)),

		key("log.segment.bytes", "1073741824", "Size at which a segment is rolled.",
			i32(func(c *Config) *int32 { return &c.LogSegmentBytes }, noMin)),
		{name: "log.roll.ms", noDefault: true, doc: "Age at which the active segment is rolled (else log.roll.hours).",
			synonyms: []synonym{{name: "log.roll.hours", def: "168", scale: msPerHour, min: 1}},
			set:      i64(func(c *Config) *int64 { return &c.LogRollMs }, noMin).set,
			get:      i64(func(c *Config) *int64 { return &c.LogRollMs }, noMin).get},
		{name: "log.retention.ms", noDefault: true, doc: "How long segments are kept, -1 forever (else log.retention.minutes, else log.retention.hours).",
			synonyms: []synonym{
				{name: "log.retention.minutes", noDefault: true, scale: msPerMinute, min: math.MinInt32},
				{name: "log.retention.hours", def: "168", scale: msPerHour, min: math.MinInt32},
			},
			set: setRetentionMs, get: func(c *Config) string { return strconv.FormatInt(c.LogRetentionMs, 10) }},
		key("log.retention.bytes", "-1", "Bytes each partition keeps before deleting old segments; -1 no limit.",
			i64(func(c *Config) *int64 { return &c.LogRetentionBytes }, noMin)),
		key("log.retention.check.interval.ms", "300000", "How often retention is applied.",
			i64(func(c *Config) *int64 { return &c.LogRetentionCheckIntervalMs }, 1)),
		key("num.recovery.threads.per.data.dir", "8", "Replicas opened (and recovered) at once at startup.",
			i32(func(c *Config) *int32 { return &c.NumRecoveryThreadsPerDataDir }, 1)),
		key("log.mapped.segments.max", "8192", "Shale: sealed segments kept mapped at once, 3 mappings each against vm.max_map_count; idle ones are unmapped beyond it.",
			i32(func(c *Config) *int32 { return &c.LogMappedSegmentsMax }, 1)),
		key("log.cleaner.enable", "true", "Run the log cleaner; false leaves topics with cleanup.policy=compact uncompacted.",
			boolField(func(c *Config) *bool { return &c.LogCleanerEnable })),
		key("log.cleaner.threads", "1", "Goroutines compacting topics with cleanup.policy=compact.",
			i32(func(c *Config) *int32 { return &c.LogCleanerThreads }, 1)),
		key("log.cleaner.dedupe.buffer.size", "134217728", "Memory for the cleaners' key maps, shared among log.cleaner.threads.",
			i64(func(c *Config) *int64 { return &c.LogCleanerDedupeBufferSize }, 1<<20)),
		key("log.cleaner.io.max.bytes.per.second", strconv.FormatFloat(math.MaxFloat64, 'g', -1, 64), "Bytes per second the cleaners read and write at most, all together.",
			f64(func(c *Config) *float64 { return &c.LogCleanerIOMaxBytesPerSecond }, 1)),
		key("log.cleaner.backoff.ms", "15000", "How long a cleaner with nothing to clean waits before looking again.",
			i64(func(c *Config) *int64 { return &c.LogCleanerBackoffMs }, 0)),
		key("log.flush.interval.messages", strconv.FormatInt(math.MaxInt64, 10), "Fsync after this many messages.",
			i64(func(c *Config) *int64 { return &c.LogFlushIntervalMessages }, noMin)),
		key("log.flush.interval.ms", strconv.FormatInt(math.MaxInt64, 10), "Fsync when the oldest unflushed message is this old.",
			i64(func(c *Config) *int64 { return &c.LogFlushIntervalMs }, noMin)),
		// 4 MiB: a partition's dirty pages stay within a few MiB behind its write head, so
		// that the kernel's dirty limits (and balance_dirty_pages stalls of producers, issue
		// 25) are not reached by thousands of partitions together; one sync_file_range per
		// 4 MiB costs nothing measurable, and matches the active segment's 4 MiB fallocate
		// step. RocksDB's bytes_per_sync is the same idea, usually at 1 MiB.
		key("log.writeback.bytes", "4194304", "Shale: every this many bytes appended to a partition, start writing them to disk (sync_file_range, not waited for), so that dirty pages stay bounded and producers do not stall in the kernel's writeback throttle; 0 leaves writeback to the kernel. Topic writeback.bytes.",
			i64(func(c *Config) *int64 { return &c.LogWritebackBytes }, 0)),
		key("acks.all.fsync", "false", "Shale: answer an acks=all produce only once every in-sync replica has fsynced the record (group commit: one fsync per replica covers every batch since the last), and let consumers read only such records; false is Kafka's behaviour. Topic acks.all.fsync.",
			boolField(func(c *Config) *bool { return &c.AcksAllFsync })),
		key("log.index.interval.bytes", "4096", "Bytes between offset index entries.",
			i32(func(c *Config) *int32 { return &c.LogIndexIntervalBytes }, noMin)),
		key("log.index.size.max.bytes", "10485760", "Size of a segment's offset index.",
			i32(func(c *Config) *int32 { return &c.LogIndexSizeMaxBytes }, noMin)),
		key("message.max.bytes", "1048588", "Largest record batch accepted.",
			i32(func(c *Config) *int32 { return &c.MessageMaxBytes }, noMin)),
		key("log.message.timestamp.type", "CreateTime", "CreateTime or LogAppendTime.",
			stringField(func(c *Config) *string { return &c.LogMessageTimestampType })),
		key("compression.type", "producer", "Codec batches are stored with; producer keeps the producer's.",
			stringField(func(c *Config) *string { return &c.CompressionType })),

		key("socket.request.max.bytes", "104857600", "Largest request read from a client.",
			i32(func(c *Config) *int32 { return &c.SocketRequestMaxBytes }, 1)),
		key("fetch.sendfile.enable", "true", "Shale: send fetch responses' record bytes on plaintext listeners with sendfile from the segment files; false writes them from the segments' mappings, as TLS listeners always do.",
			boolField(func(c *Config) *bool { return &c.FetchSendfileEnable })),
		// Limits and quotas (issue 13).
		key("queued.max.requests", "500", "Requests read but not yet handled, across the broker, before reading is paused.",
			i32(func(c *Config) *int32 { return &c.QueuedMaxRequests }, 1)),
		key("queued.max.request.bytes", "268435456", "Request bytes held across the broker before reading is paused; -1 no limit (Kafka's default).",
			i64(func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }, -1)),
		key("connections.max.idle.ms", "600000", "Close a connection idle this long, or whose client takes no response bytes this long; -1 never.",
			i64(func(c *Config) *int64 { return &c.ConnectionsMaxIdleMs }, -1)),
		key("max.connections", "2147483647", "Client connections a broker accepts.",
			i32(func(c *Config) *int32 { return &c.MaxConnections }, 0)),
		key("max.connections.per.ip", "2147483647", "Client connections a broker accepts from one address.",
			i32(func(c *Config) *int32 { return &c.MaxConnectionsPerIP }, 0)),
		key("max.connections.per.ip.overrides", "", "Per-address exceptions to max.connections.per.ip: host:count,...",
			stringField(func(c *Config) *string { return &c.MaxConnectionsPerIPOverrides })),
		key("quota.window.num", "11", "Samples a client's byte and request rates are measured over.",
			i32(func(c *Config) *int32 { return &c.QuotaWindowNum }, 1)),
		key("quota.window.size.seconds", "1", "Length of each quota sample.",
			i32(func(c *Config) *int32 { return &c.QuotaWindowSizeSeconds }, 1)),
		key("telemetry.max.bytes", "1048576", "Largest client telemetry push (KIP-714) the broker accepts.",
			i32(func(c *Config) *int32 { return &c.TelemetryMaxBytes }, 1)),
		key("telemetry.max.series", "10000", "Most client telemetry series a broker exports on /metrics; pushed points past it are dropped and counted (Shale).",
			i32(func(c *Config) *int32 { return &c.TelemetryMaxSeries }, 0)),
		key("broker.rack", "", "This broker's rack.",
			stringField(func(c *Config) *string { return &c.BrokerRack })),
		key("broker.session.timeout.ms", "9000", "Lease a broker keeps without heartbeats before it is fenced.",
			i32(func(c *Config) *int32 { return &c.BrokerSessionTimeoutMs }, 1)),
		key("broker.heartbeat.interval.ms", "2000", "Time between a broker's heartbeats to the controller.",
			i32(func(c *Config) *int32 { return &c.BrokerHeartbeatIntervalMs }, 1)),

		key("offsets.retention.minutes", "10080", "How long an empty group's committed offsets are kept.",
			i32(func(c *Config) *int32 { return &c.OffsetsRetentionMinutes }, 1)),
		key("offset.metadata.max.bytes", strconv.Itoa(metadata.DefaultOffsetMetadataMaxBytes), "Longest metadata string an offset commit may carry, in UTF-16 code units as Kafka counts it (at most 1048576).",
			i32(func(c *Config) *int32 { return &c.OffsetMetadataMaxBytes }, 1)),
		key("offsets.topic.num.partitions", "50", "Partitions of __consumer_offsets, over which groups spread across coordinators; fixed when the cluster is created.",
			i32(func(c *Config) *int32 { return &c.OffsetsTopicNumPartitions }, 1)),
		key("group.initial.rebalance.delay.ms", "3000", "Wait for more members before a new group's first rebalance.",
			i32(func(c *Config) *int32 { return &c.GroupInitialRebalanceDelayMs }, 0)),
		key("group.min.session.timeout.ms", "6000", "Smallest session timeout a group member may ask for.",
			i32(func(c *Config) *int32 { return &c.GroupMinSessionTimeoutMs }, 0)),
		key("group.max.session.timeout.ms", "1800000", "Largest session timeout a group member may ask for.",
			i32(func(c *Config) *int32 { return &c.GroupMaxSessionTimeoutMs }, 0)),
		key("group.share.session.timeout.ms", "45000", "A share-group member not heard from for this long leaves its group.",
			i32(func(c *Config) *int32 { return &c.GroupShareSessionTimeoutMs }, 1)),
		key("group.share.heartbeat.interval.ms", "5000", "How often share-group members are told to heartbeat.",
			i32(func(c *Config) *int32 { return &c.GroupShareHeartbeatIntervalMs }, 1)),
		key("group.share.max.size", "200", "Most members a share group may have.",
			i32(func(c *Config) *int32 { return &c.GroupShareMaxSize }, 1)),

		key("group.share.record.lock.duration.ms", "30000", "How long a share-group member holds the records it fetched before they are delivered again.",
			i32(func(c *Config) *int32 { return &c.GroupShareRecordLockDurationMs }, 1000)),
		key("group.share.delivery.count.limit", "5", "Deliveries after which a share group archives a record (or dead-letters it).",
			i32(func(c *Config) *int32 { return &c.GroupShareDeliveryCountLimit }, 2)),
		key("group.share.partition.max.record.locks", "2000", "Most records in flight per share partition.",
			i32(func(c *Config) *int32 { return &c.GroupSharePartitionMaxRecordLocks }, 100)),
		key("share.auto.offset.reset", "latest", "Where a share group starts on a partition it has no state for: latest or earliest.",
			stringField(func(c *Config) *string { return &c.ShareAutoOffsetReset })),
		// Group configs (KIP-848, KIP-932): the defaults of the consumer.* GROUP keys and
		// the bounds of every timing GROUP key, as Kafka's GroupCoordinatorConfig and
		// ShareGroupConfig have them.
		key("group.consumer.session.timeout.ms", "45000", "A consumer-group (KIP-848) member not heard from for this long leaves its group, unless the group sets consumer.session.timeout.ms.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerSessionTimeoutMs }, 1)),
		key("group.consumer.heartbeat.interval.ms", "5000", "How often consumer-group (KIP-848) members are told to heartbeat, unless the group sets consumer.heartbeat.interval.ms.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerHeartbeatIntervalMs }, 1)),
		key("group.consumer.assignors", "uniform,range", "Server-side assignors of consumer groups (KIP-848), the first the default: uniform, range.",
			consumerAssignorsField(func(c *Config) *[]string { return &c.GroupConsumerAssignors })),
		key("group.consumer.max.size", "2147483647", "Most members a consumer group (KIP-848) may have.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerMaxSize }, 1)),
		key("group.consumer.migration.policy", "bidirectional", "Online conversion of live groups between the classic and the consumer (KIP-848) protocol: bidirectional, upgrade, downgrade or disabled.",
			stringField(func(c *Config) *string { return &c.GroupConsumerMigrationPolicy })),
		key("group.consumer.min.session.timeout.ms", "45000", "Smallest consumer.session.timeout.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerMinSessionTimeoutMs }, 1)),
		key("group.consumer.max.session.timeout.ms", "60000", "Largest consumer.session.timeout.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerMaxSessionTimeoutMs }, 1)),
		key("group.consumer.min.heartbeat.interval.ms", "5000", "Smallest consumer.heartbeat.interval.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerMinHeartbeatIntervalMs }, 1)),
		key("group.consumer.max.heartbeat.interval.ms", "15000", "Largest consumer.heartbeat.interval.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupConsumerMaxHeartbeatIntervalMs }, 1)),
		key("group.share.min.session.timeout.ms", "45000", "Smallest share.session.timeout.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupShareMinSessionTimeoutMs }, 1)),
		key("group.share.max.session.timeout.ms", "60000", "Largest share.session.timeout.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupShareMaxSessionTimeoutMs }, 1)),
		key("group.share.min.heartbeat.interval.ms", "5000", "Smallest share.heartbeat.interval.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupShareMinHeartbeatIntervalMs }, 1)),
		key("group.share.max.heartbeat.interval.ms", "15000", "Largest share.heartbeat.interval.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupShareMaxHeartbeatIntervalMs }, 1)),
		key("group.share.min.record.lock.duration.ms", "15000", "Smallest share.record.lock.duration.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupShareMinRecordLockDurationMs }, 1000)),
		key("group.share.max.record.lock.duration.ms", "60000", "Largest share.record.lock.duration.ms a group config may set.",
			i32(func(c *Config) *int32 { return &c.GroupShareMaxRecordLockDurationMs }, 1000)),

		key("replica.lag.time.max.ms", "30000", "A follower behind for this long leaves the ISR.",
			i64(func(c *Config) *int64 { return &c.ReplicaLagTimeMaxMs }, 1)),
		key("replica.selector.class", "", "Chooses the replica a consumer that sends its rack reads from (KIP-392): "+RackAwareReplicaSelector+" (or RackAwareReplicaSelector) points it at an in-sync replica in its rack; empty keeps consumers on leaders.",
			replicaSelectorField(func(c *Config) *string { return &c.ReplicaSelectorClass })),
		key("replica.fetch.max.bytes", "1048576", "Bytes a follower fetches per partition per request.",
			i32(func(c *Config) *int32 { return &c.ReplicaFetchMaxBytes }, 0)),
		key("replica.fetch.wait.max.ms", "500", "Longest a follower's fetch waits for data.",
			i32(func(c *Config) *int32 { return &c.ReplicaFetchWaitMaxMs }, 0)),
		key("num.replica.fetchers", "1", "Fetcher connections per source broker.",
			i32(func(c *Config) *int32 { return &c.NumReplicaFetchers }, 1)),

		// Authorization (authz.go).
		key("authorizer.class.name", "", "Turns ACL authorization on: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or kafka.security.authorizer.AclAuthorizer); empty: every request is allowed.",
			accessor{set: setAuthorizerClassName, get: func(c *Config) string { return c.AuthorizerClassName }}),
		key("super.users", "", "Principals allowed everything, separated by semicolons (User:admin;User:broker).",
			accessor{set: setSuperUsers, get: func(c *Config) string { return strings.Join(c.SuperUsers, ";") }}),
		key("allow.everyone.if.no.acl.found", "false", "With an authorizer: a resource no ACL covers is open to everyone (else to super users only).",
			boolField(func(c *Config) *bool { return &c.AllowEveryoneIfNoACLFound })),

		key("cluster.id", "", "The cluster's id (22-character base64 UUID); optional.",
			accessor{set: setClusterID, get: func(c *Config) string { return c.ClusterID }}),
		key("http.listener", "127.0.0.1:9644", "Shale: host:port for metrics, health and the web console; empty turns it off.",
			accessor{set: setHTTPListener, get: func(c *Config) string { return c.HTTPListener }}),
		key("console.enable", "true", "Shale: brokers serve the web console at / on http.listener.",
			boolField(func(c *Config) *bool { return &c.ConsoleEnable })),
		key("console.read.only", "false", "Shale: the web console shows the cluster but changes nothing (no test records produced).",
			boolField(func(c *Config) *bool { return &c.ConsoleReadOnly })),
		key("schema.registry.listener", "127.0.0.1:8081", "Shale: host:port of the built-in schema registry (Confluent's REST API) on brokers; empty turns it off.",
			accessor{set: setSchemaRegistryListener, get: func(c *Config) string { return c.SchemaRegistryListener }}),
		key("rest.proxy.listener", "127.0.0.1:8082", "Shale: host:port of the built-in HTTP proxy (Confluent REST Proxy's v3 paths) on brokers; empty turns it off.",
			accessor{set: setRESTProxyListener, get: func(c *Config) string { return c.RESTProxyListener }}),
		key("log.level", "info", "Shale: debug, info, warn or error.",
			accessor{set: setLogLevel, get: func(c *Config) string { return strings.ToLower(c.LogLevel.String()) }}),
	}

	keys = append(keys, securityKeys()...)
	keys = append(keys, remoteStorageKeys()...)
	keys = append(keys, httpSecurityKeys("schema.registry", "schema registry", "SchemaRegistry",
		func(c *Config) *HTTPSecurity { return &c.SchemaRegistrySecurity })...)
	keys = append(keys, httpSecurityKeys("rest.proxy", "HTTP proxy", "RestProxy",
		func(c *Config) *HTTPSecurity { return &c.RESTProxySecurity })...)

	// Broker-level synonyms of topic configs that have no field of their own are accepted
	// and passed on as topic defaults, validated by the topic config's own rules.
	known := indexKeys(keys)
	for _, d := range topicconfig.All() {
		if d.BrokerName == "" {
			continue
		}
		if _, ok := known[d.BrokerName]; ok {
			continue
		}
		name, def := d.BrokerName, d
		keys = append(keys, key(name, d.Default, "Default of topic config "+d.Name+". "+d.Doc, accessor{
			set: func(c *Config, v string) error {
				if err := def.Validate(v); err != nil {
					return err
				}
				if c.extraTopicDefaults == nil {
					c.extraTopicDefaults = make(map[string]string)
				}
				c.extraTopicDefaults[name] = v
				return nil
			},
			get: func(c *Config) string { return c.extraTopicDefaults[name] },
		}))
	}
	return keys
}

func setRoles(c *Config, v string) error {
	c.ProcessRoles = nil
	for _, r := range splitList(v) {
		r = strings.ToLower(r)
		if r != RoleBroker && r != RoleController {
			return fmt.Errorf("unknown role %q (want broker, controller, or both)", r)
		}
		if slices.Contains(c.ProcessRoles, r) {
			return fmt.Errorf("role %s is listed twice", r)
		}
		c.ProcessRoles = append(c.ProcessRoles, r)
	}
	if len(c.ProcessRoles) == 0 {
		return fmt.Errorf("must be broker, controller, or both (Shale has no ZooKeeper mode)")
	}
	slices.Sort(c.ProcessRoles)
	return nil
}

func setLogDirs(c *Config, v string) error {
	dirs := splitList(v)
	switch len(dirs) {
	case 0:
		return fmt.Errorf("must name a directory")
	case 1:
		c.LogDir = dirs[0]
		return nil
	default:
		return fmt.Errorf("lists %d directories; Shale keeps all partitions in one directory, so give exactly one", len(dirs))
	}
}

func setRetentionMs(c *Config, v string) error {
	n, err := parseInt(v, 64, noMin)
	if err != nil {
		return err
	}
	switch {
	case n < 0:
		n = -1 // Kafka: any negative retention means unlimited
	case n == 0:
		return fmt.Errorf("must be -1 (unlimited) or at least 1")
	}
	c.LogRetentionMs = n
	return nil
}

func setClusterID(c *Config, v string) error {
	if v != "" {
		if err := checkClusterID(v); err != nil {
			return err
		}
	}
	c.ClusterID = v
	return nil
}

func setHTTPListener(c *Config, v string) error {
	if v != "" {
		if _, err := parseHostPort(v); err != nil {
			return err
		}
	}
	c.HTTPListener = v
	return nil
}

func setSchemaRegistryListener(c *Config, v string) error {
	if v != "" {
		if _, err := parseHostPort(v); err != nil {
			return err
		}
	}
	c.SchemaRegistryListener = v
	return nil
}

func setRESTProxyListener(c *Config, v string) error {
	if v != "" {
		if _, err := parseHostPort(v); err != nil {
			return err
		}
	}
	c.RESTProxyListener = v
	return nil
}

func setLogLevel(c *Config, v string) error {
	switch strings.ToLower(v) {
	case "trace", "debug":
		c.LogLevel = slog.LevelDebug
	case "info":
		c.LogLevel = slog.LevelInfo
	case "warn", "warning":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		return fmt.Errorf("want debug, info, warn or error")
	}
	return nil
}

func setProtocolMap(c *Config, v string) error {
	m := make(map[string]string)
	for _, item := range splitList(v) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" || proto == "" {
			return fmt.Errorf("entry %q is not NAME:PROTOCOL", item)
		}
		if !slices.Contains(securityProtocols, proto) {
			return fmt.Errorf("entry %q: unknown security protocol %s (want one of %s)", item, proto, strings.Join(securityProtocols, ", "))
		}
		if _, dup := m[name]; dup {
			return fmt.Errorf("listener %s is mapped twice", name)
		}
		m[name] = proto
	}
	c.ListenerSecurityProtocolMap = m
	return nil
}

func getProtocolMap(c *Config) string {
	var items []string
	for _, name := range slices.Sorted(maps.Keys(c.ListenerSecurityProtocolMap)) {
		items = append(items, name+":"+c.ListenerSecurityProtocolMap[name])
	}
	return strings.Join(items, ",")
}

var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
