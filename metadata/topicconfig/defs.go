package topicconfig

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Type is a config's type, numbered as DescribeConfigs reports it.
type Type int8

const (
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
	TypeShort   Type = 4
	TypeLong    Type = 5
	TypeDouble  Type = 6
	TypeList    Type = 7
)

// Def describes one topic config.
type Def struct {
	Name string
	// BrokerName is the broker config that sets this config's default for all topics
	// ("" when there is none).
	BrokerName string
	Type       Type
	Default    string
	Doc        string
	// Unsupported, when set, says why Shale refuses values other than the default.
	Unsupported string
	check       func(string) error
}

// Validate checks one value against the definition.
func (d *Def) Validate(v string) error {
	if err := d.parse(v); err != nil {
		return err
	}
	if d.check != nil {
		return d.check(v)
	}
	return nil
}

func (d *Def) parse(v string) error {
	var err error
	switch d.Type {
	case TypeBoolean:
		if v != "true" && v != "false" {
			err = fmt.Errorf("expected true or false")
		}
	case TypeInt:
		_, err = strconv.ParseInt(v, 10, 32)
	case TypeShort:
		_, err = strconv.ParseInt(v, 10, 16)
	case TypeLong:
		_, err = strconv.ParseInt(v, 10, 64)
	case TypeDouble:
		_, err = strconv.ParseFloat(v, 64)
	}
	if err != nil {
		// Callers name the config (ValidateOne the topic config, config.Load the broker
		// key), and strconv's error would repeat the value.
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			err = ne.Err
		}
		return fmt.Errorf("invalid value %q: %w", v, err)
	}
	return nil
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n < min {
			return fmt.Errorf("value %d must be at least %d", n, min)
		}
		return nil
	}
}

// ratio accepts a fraction in [0, 1], as Kafka's min.cleanable.dirty.ratio.
func ratio(v string) error {
	f, _ := strconv.ParseFloat(v, 64)
	if f < 0 || f > 1 {
		return fmt.Errorf("value %s must be between 0 and 1", v)
	}
	return nil
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("value %q must be one of %s", v, strings.Join(allowed, ", "))
		}
		return nil
	}
}

var maxLongString = strconv.FormatInt(math.MaxInt64, 10)

// Names of the configs Shale acts on. Others in the table are accepted and reported so
// that tools that set them keep working, but only these change behaviour.
const (
	CleanupPolicy               = "cleanup.policy"
	CompressionType             = "compression.type"
	FlushMessages               = "flush.messages"
	FlushMs                     = "flush.ms"
	IndexIntervalBytes          = "index.interval.bytes"
	MaxMessageBytes             = "max.message.bytes"
	MessageTimestampDiffMaxMs   = "message.timestamp.difference.max.ms"
	MessageTimestampType        = "message.timestamp.type"
	MinInsyncReplicas           = "min.insync.replicas"
	RetentionBytes              = "retention.bytes"
	RetentionMs                 = "retention.ms"
	SegmentBytes                = "segment.bytes"
	SegmentIndexBytes           = "segment.index.bytes"
	SegmentMs                   = "segment.ms"
	UncleanLeaderElectionEnable = "unclean.leader.election.enable"
	DeleteRetentionMs           = "delete.retention.ms"
	MaxCompactionLagMs          = "max.compaction.lag.ms"
	MinCleanableDirtyRatio      = "min.cleanable.dirty.ratio"
	MinCompactionLagMs          = "min.compaction.lag.ms"
	// Tiered storage (KIP-405): whether the topic's closed segments go to the remote
	// log, and how much of the log stays local (-2: as much as retention.* keeps).
	RemoteStorageEnable = "remote.storage.enable"
	LocalRetentionMs    = "local.retention.ms"
	LocalRetentionBytes = "local.retention.bytes"
	// The replicas whose replication leader.replication.throttled.rate and
	// follower.replication.throttled.rate throttle, besides those a reassignment adds.
	LeaderReplicationThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerReplicationThrottledReplicas = "follower.replication.throttled.replicas"
	// WritebackBytes is Shale's own (issue 25): every this many bytes appended to a
	// partition's active segment, the broker starts the kernel's writeback of them
	// (sync_file_range), so that dirty pages stay bounded; 0 leaves it to the kernel.
	WritebackBytes = "writeback.bytes"
	// AcksAllFsync is Shale's own (issue 25): an acks=all produce is answered, and a
	// consumer reads a record, only once every ISR member has fsynced it.
	AcksAllFsync = "acks.all.fsync"
	// ShareDeadLetterTopic is Shale's own (beyond KIP-932): the topic that share groups
	// write this topic's rejected records, and those that reached the delivery limit, to.
	ShareDeadLetterTopic = "share.dead.letter.topic"

	// Confluent Server's broker-side schema ID validation: with KeySchemaValidation
	// (ValueSchemaValidation) on, every record's non-null key (value) must carry a schema
	// id registered in the built-in schema registry under the subject its subject name
	// strategy gives.
	KeySchemaValidation    = "confluent.key.schema.validation"
	ValueSchemaValidation  = "confluent.value.schema.validation"
	KeySubjectNameStrategy = "confluent.key.subject.name.strategy"
	// ValueSubjectNameStrategy is the value's; see SubjectNameStrategies.
	ValueSubjectNameStrategy = "confluent.value.subject.name.strategy"
)

// The subject name strategies Confluent's serializers ship, by the class names Confluent
// Server's topic configs take. The short names (TopicNameStrategy, ...) are accepted too,
// as Redpanda's compatible configs do.
const (
	TopicNameStrategy       = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
	RecordNameStrategy      = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
	TopicRecordNameStrategy = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
)

// SubjectNameStrategies are the accepted values of the *.subject.name.strategy configs.
var SubjectNameStrategies = []string{TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy,
	"TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"}

// throttledReplicas accepts Kafka's form of the *.replication.throttled.replicas
// configs: empty, "*", or partition:broker pairs separated by commas.
func throttledReplicas(v string) error {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return nil
	}
	for _, e := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			return fmt.Errorf("%q is not of the form partition:broker", e)
		}
		for _, n := range []string{p, b} {
			if _, err := strconv.ParseInt(strings.TrimSpace(n), 10, 32); err != nil {
				return fmt.Errorf("%q is not of the form partition:broker", e)
			}
		}
	}
	return nil
}

// defs is Kafka's topic config table, with Kafka's defaults.
var defs = sortedByName([]*Def{
	{Name: CleanupPolicy, BrokerName: "log.cleanup.policy", Type: TypeList, Default: "delete",
		Doc: "delete removes old segments by retention; compact keeps each key's latest record; compact,delete does both.", check: func(v string) error {
			for _, p := range strings.Split(v, ",") {
				switch strings.TrimSpace(p) {
				case "delete", "compact":
				default:
					return fmt.Errorf("value %q must be delete or compact", p)
				}
			}
			return nil
		}},
	{Name: CompressionType, BrokerName: "compression.type", Type: TypeString, Default: "producer",
		Doc:   "Codec the broker stores batches with; producer keeps the producer's codec.",
		check: oneOf("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")},
	{Name: KeySchemaValidation, Type: TypeBoolean, Default: "false",
		Doc: "Refuse a produced batch with INVALID_RECORD when a record's non-null key does not carry a schema id (magic byte 0, 4-byte id) registered in the schema registry under the subject confluent.key.subject.name.strategy gives."},
	{Name: KeySubjectNameStrategy, Type: TypeString, Default: TopicNameStrategy,
		Doc:   "Subject a key's schema id must be registered under: TopicNameStrategy <topic>-key, RecordNameStrategy the schema's record name, TopicRecordNameStrategy <topic>-<record name>.",
		check: oneOf(SubjectNameStrategies...)},
	{Name: ValueSchemaValidation, Type: TypeBoolean, Default: "false",
		Doc: "Refuse a produced batch with INVALID_RECORD when a record's non-null value does not carry a schema id (magic byte 0, 4-byte id) registered in the schema registry under the subject confluent.value.subject.name.strategy gives."},
	{Name: ValueSubjectNameStrategy, Type: TypeString, Default: TopicNameStrategy,
		Doc:   "Subject a value's schema id must be registered under: TopicNameStrategy <topic>-value, RecordNameStrategy the schema's record name, TopicRecordNameStrategy <topic>-<record name>.",
		check: oneOf(SubjectNameStrategies...)},
	{Name: DeleteRetentionMs, BrokerName: "log.cleaner.delete.retention.ms", Type: TypeLong, Default: "86400000",
		Doc: "How long a tombstone stays in a compacted topic after its segment's last write.", check: atLeast(0)},
	{Name: "file.delete.delay.ms", BrokerName: "log.segment.delete.delay.ms", Type: TypeLong, Default: "60000",
		Doc: "Accepted for compatibility; Shale deletes a segment once no reader holds it.", check: atLeast(0)},
	{Name: FlushMessages, BrokerName: "log.flush.interval.messages", Type: TypeLong, Default: maxLongString,
		Doc: "Fsync after this many messages; 1 fsyncs every append.", check: atLeast(1)},
	{Name: FlushMs, BrokerName: "log.flush.interval.ms", Type: TypeLong, Default: maxLongString,
		Doc: "Fsync when the oldest unflushed message is this old.", check: atLeast(0)},
	{Name: IndexIntervalBytes, BrokerName: "log.index.interval.bytes", Type: TypeInt, Default: "4096",
		Doc: "Bytes between offset index entries.", check: atLeast(0)},
	{Name: LeaderReplicationThrottledReplicas, Type: TypeList, Default: "",
		Doc: "Replicas (partition:broker, or *) whose leaders throttle their replication to out-of-sync followers at leader.replication.throttled.rate; a reassignment's new replicas always are.", check: throttledReplicas},
	{Name: FollowerReplicationThrottledReplicas, Type: TypeList, Default: "",
		Doc: "Replicas (partition:broker, or *) that, out of sync, fetch at most follower.replication.throttled.rate; a reassignment's new replicas always do.", check: throttledReplicas},
	{Name: MaxCompactionLagMs, BrokerName: "log.cleaner.max.compaction.lag.ms", Type: TypeLong, Default: maxLongString,
		Doc: "A compacted log with records older than this is cleaned whatever its dirty ratio.", check: atLeast(1)},
	{Name: MaxMessageBytes, BrokerName: "message.max.bytes", Type: TypeInt, Default: "1048588",
		Doc: "Largest record batch the topic accepts.", check: atLeast(0)},
	{Name: "message.downconversion.enable", BrokerName: "log.message.downconversion.enable", Type: TypeBoolean, Default: "true",
		Doc: "Accepted for compatibility; Shale serves only message format v2."},
	{Name: MessageTimestampDiffMaxMs, BrokerName: "log.message.timestamp.difference.max.ms", Type: TypeLong, Default: maxLongString,
		Doc: "Largest allowed difference between a CreateTime timestamp and the broker's clock.", check: atLeast(0)},
	{Name: MessageTimestampType, BrokerName: "log.message.timestamp.type", Type: TypeString, Default: "CreateTime",
		Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.", check: oneOf("CreateTime", "LogAppendTime")},
	{Name: MinCleanableDirtyRatio, BrokerName: "log.cleaner.min.cleanable.ratio", Type: TypeDouble, Default: "0.5",
		Doc: "Share of a compacted log not yet cleaned at which the cleaner takes it.", check: ratio},
	{Name: MinCompactionLagMs, BrokerName: "log.cleaner.min.compaction.lag.ms", Type: TypeLong, Default: "0",
		Doc: "Records younger than this are not compacted.", check: atLeast(0)},
	{Name: MinInsyncReplicas, BrokerName: "min.insync.replicas", Type: TypeInt, Default: "1",
		Doc: "Fewest in-sync replicas that must hold an acks=all write.", check: atLeast(1)},
	{Name: "preallocate", BrokerName: "log.preallocate", Type: TypeBoolean, Default: "false",
		Doc: "Accepted for compatibility; Shale always reserves the active segment's space ahead of writes."},
	{Name: LocalRetentionBytes, BrokerName: "log.local.retention.bytes", Type: TypeLong, Default: "-2",
		Doc: "With remote.storage.enable, bytes of log each partition keeps locally before deleting segments already in the remote log; -2 as retention.bytes.", check: atLeast(-2)},
	{Name: LocalRetentionMs, BrokerName: "log.local.retention.ms", Type: TypeLong, Default: "-2",
		Doc: "With remote.storage.enable, how long segments already in the remote log are kept locally; -2 as retention.ms.", check: atLeast(-2)},
	{Name: RemoteStorageEnable, Type: TypeBoolean, Default: "false",
		Doc: "Upload the topic's closed segments to the remote log (tiered storage, KIP-405); needs remote.log.storage.system.enable on the cluster; a compacted topic cannot enable it, and once enabled it cannot be turned off."},
	{Name: RetentionBytes, BrokerName: "log.retention.bytes", Type: TypeLong, Default: "-1",
		Doc: "Bytes of log each partition keeps before deleting old segments; -1 no limit."},
	{Name: RetentionMs, BrokerName: "log.retention.ms", Type: TypeLong, Default: "604800000",
		Doc: "How long segments are kept; -1 forever.", check: atLeast(-1)},
	{Name: SegmentBytes, BrokerName: "log.segment.bytes", Type: TypeInt, Default: "1073741824",
		Doc: "Size at which a segment is rolled.", check: atLeast(14)},
	{Name: SegmentIndexBytes, BrokerName: "log.index.size.max.bytes", Type: TypeInt, Default: "10485760",
		Doc: "Size of a segment's offset index.", check: atLeast(4)},
	{Name: "segment.jitter.ms", BrokerName: "log.roll.jitter.ms", Type: TypeLong, Default: "0",
		Doc: "Accepted for compatibility; Shale does not add jitter to rolls.", check: atLeast(0)},
	{Name: SegmentMs, BrokerName: "log.roll.ms", Type: TypeLong, Default: "604800000",
		Doc: "Time after which the active segment is rolled.", check: atLeast(1)},
	{Name: ShareDeadLetterTopic, Type: TypeString, Default: "",
		Doc: "Topic that share groups write this topic's rejected records, and those delivered group.share.delivery.count.limit times, to (Shale's, beyond KIP-932); empty: they are only archived."},
	{Name: WritebackBytes, BrokerName: "log.writeback.bytes", Type: TypeLong, Default: "4194304",
		Doc: "Shale: start the disk write of each this many bytes appended to a partition (sync_file_range), so that dirty pages stay bounded and producers do not hit the kernel's writeback throttle; nothing waits for it, durability does not change; 0 leaves writeback to the kernel.", check: atLeast(0)},
	{Name: AcksAllFsync, BrokerName: "acks.all.fsync", Type: TypeBoolean, Default: "false",
		Doc: "Shale: answer an acks=all produce only once every in-sync replica has fsynced the record (one group-commit fsync per replica covers every batch appended since the last), and show consumers only such records, so that a simultaneous power loss of every replica loses no acknowledged record; false is Kafka's behaviour (acknowledged once in every in-sync replica's memory)."},
	{Name: UncleanLeaderElectionEnable, BrokerName: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false",
		Doc: "Whether a replica outside the ISR may become leader, losing data."},
})

// Lookup returns the definition of a topic config.
func Lookup(name string) (*Def, bool) {
	i, ok := slices.BinarySearchFunc(defs, name, func(d *Def, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return defs[i], true
}

// All returns every definition, sorted by name. Callers must not modify them.
func All() []*Def { return defs }

func sortedByName(ds []*Def) []*Def {
	slices.SortFunc(ds, func(a, b *Def) int { return strings.Compare(a.Name, b.Name) })
	return ds
}
