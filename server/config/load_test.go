package config

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefault(t *testing.T) {
	c := Default()
	if !c.IsBroker() || !c.IsController() {
		t.Errorf("roles %v", c.ProcessRoles)
	}
	if h, p := c.KafkaListener(); h != "127.0.0.1" || p != 9092 {
		t.Errorf("KafkaListener %s:%d", h, p)
	}
	if h, p := c.AdvertisedKafka(); h != "127.0.0.1" || p != 9092 {
		t.Errorf("AdvertisedKafka %s:%d", h, p)
	}
	if h, p := c.ControllerListener(); h != "127.0.0.1" || p != 9093 {
		t.Errorf("ControllerListener %s:%d", h, p)
	}
	if got, want := c.Voters(), []Voter{{1, "127.0.0.1", 9093}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Voters %v, want %v", got, want)
	}
	want := Config{
		NodeID: 1, LogDir: "./data", NumPartitions: 1, DefaultReplicationFactor: 1, MinInsyncReplicas: 1,
		AutoCreateTopicsEnable: true, DeleteTopicEnable: true, LogSegmentBytes: 1 << 30,
		MaxIncrementalFetchSessionCacheSlots: 1000, ProducerIDExpirationMs: 86400000,
		ProducerIDExpirationCheckIntervalMs: 600000,
		TransactionMaxTimeoutMs:             900000, TransactionalIDExpirationMs: 604800000, TransactionVersion: 2,
		TransactionAbortTimedOutTransactionCleanupIntervalMs: 10000, TransactionRemoveExpiredTransactionCleanupIntervalMs: 3600000,
		AutoLeaderRebalanceEnable: true, LeaderImbalanceCheckIntervalSeconds: 300, LeaderImbalancePerBrokerPercentage: 10,
		LogRollMs: 168 * 3600 * 1000, LogRetentionMs: 168 * 3600 * 1000, LogRetentionBytes: -1,
		LogRetentionCheckIntervalMs: 300000, LogFlushIntervalMessages: math.MaxInt64,
		NumRecoveryThreadsPerDataDir: 8, LogMappedSegmentsMax: 8192,
		LogCleanerEnable: true, LogCleanerThreads: 1, LogCleanerDedupeBufferSize: 128 << 20, LogCleanerIOMaxBytesPerSecond: math.MaxFloat64, LogCleanerBackoffMs: 15000,
		LogFlushIntervalMs: math.MaxInt64, LogWritebackBytes: 4 << 20, LogIndexIntervalBytes: 4096, LogIndexSizeMaxBytes: 10485760,
		MessageMaxBytes: 1048588, LogMessageTimestampType: "CreateTime", CompressionType: "producer",
		SocketRequestMaxBytes: 104857600, FetchSendfileEnable: true, QueuedMaxRequests: 500, QueuedMaxRequestBytes: 268435456, ConnectionsMaxIdleMs: 600000,
		MaxConnections: math.MaxInt32, MaxConnectionsPerIP: math.MaxInt32, QuotaWindowNum: 11, QuotaWindowSizeSeconds: 1,
		TelemetryMaxBytes: 1048576, TelemetryMaxSeries: 10000,
		BrokerSessionTimeoutMs: 9000, BrokerHeartbeatIntervalMs: 2000,
		OffsetsRetentionMinutes: 10080, OffsetMetadataMaxBytes: 4096, OffsetsTopicNumPartitions: 50, GroupInitialRebalanceDelayMs: 3000, GroupMinSessionTimeoutMs: 6000,
		GroupShareRecordLockDurationMs: 30000, GroupShareDeliveryCountLimit: 5, GroupSharePartitionMaxRecordLocks: 2000, ShareAutoOffsetReset: "latest",
		GroupConsumerSessionTimeoutMs: 45000, GroupConsumerHeartbeatIntervalMs: 5000,
		GroupConsumerAssignors: []string{"uniform", "range"}, GroupConsumerMaxSize: 2147483647, GroupConsumerMigrationPolicy: "bidirectional",
		GroupConsumerMinSessionTimeoutMs: 45000, GroupConsumerMaxSessionTimeoutMs: 60000,
		GroupConsumerMinHeartbeatIntervalMs: 5000, GroupConsumerMaxHeartbeatIntervalMs: 15000,
		GroupShareMinSessionTimeoutMs: 45000, GroupShareMaxSessionTimeoutMs: 60000,
		GroupShareMinHeartbeatIntervalMs: 5000, GroupShareMaxHeartbeatIntervalMs: 15000,
		GroupShareMinRecordLockDurationMs: 15000, GroupShareMaxRecordLockDurationMs: 60000,
		GroupMaxSessionTimeoutMs: 1800000, GroupShareSessionTimeoutMs: 45000, GroupShareHeartbeatIntervalMs: 5000, GroupShareMaxSize: 200,
		ReplicaLagTimeMaxMs: 30000, ReplicaFetchMaxBytes: 1048576,
		ReplicaFetchBackoffMs: 1000, ReplicaHighWatermarkCheckpointIntervalMs: 5000,
		LeaderReplicationThrottledRate: math.MaxInt64, FollowerReplicationThrottledRate: math.MaxInt64,
		ReplicaFetchWaitMaxMs: 500, NumReplicaFetchers: 1, HTTPListener: "127.0.0.1:9644", ConsoleEnable: true, SchemaRegistryListener: "127.0.0.1:8081", RESTProxyListener: "127.0.0.1:8082",
		SchemaRegistrySecurity: HTTPSecurity{SSLClientAuth: "none", AuthenticationMethod: "NONE", AuthenticationRealm: "SchemaRegistry"},
		RESTProxySecurity:      HTTPSecurity{SSLClientAuth: "none", AuthenticationMethod: "NONE", AuthenticationRealm: "RestProxy"}, LogLevel: slog.LevelInfo,
		InterBrokerListenerName: "PLAINTEXT", ControllerListenerNames: []string{"CONTROLLER"},
		SSLKeystoreType: "PEM", SSLTruststoreType: "PEM", SSLClientAuth: "none", SSLPrincipalMappingRules: "DEFAULT",
		SSLEndpointIdentificationAlgorithm: "https", SASLEnabledMechanisms: []string{"SCRAM-SHA-256", "SCRAM-SHA-512"},
		SASLMechanismInterBrokerProtocol: "SCRAM-SHA-512",
		RemoteStorage: RemoteStorage{TaskIntervalMs: 30000, Region: "us-east-1", RequestTimeoutMs: 30000, CacheSizeBytes: 1 << 30, CacheChunkBytes: 1 << 20,
			ReaderThreads: 10, ReaderMaxPendingTasks: 100, FetchMaxWaitMs: 500},
	}
	// Compare the scalar fields by zeroing the ones checked above or not comparable.
	got := *c
	got.ProcessRoles, got.ControllerQuorumVoters, got.Listeners, got.AdvertisedListeners = nil, nil, nil, nil
	got.ListenerSecurityProtocolMap, got.origins, got.extraTopicDefaults = nil, nil, nil
	got.derivedAdvertised, got.derivedVoters, got.derivedControllerListener, got.Warnings = false, false, false, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Default()\n got %+v\nwant %+v", got, want)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings on defaults: %v", c.Warnings)
	}
	if td := c.TopicDefaults(); len(td) != 0 {
		t.Errorf("TopicDefaults of the defaults = %v, want none (they equal the topic defaults)", td)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "num.partitions=2\nbroker.rack=file\nlog.level=debug\n")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want func(c *Config) any
		eq   any
	}{
		{"file over default", []string{"--config", file}, nil, func(c *Config) any { return c.NumPartitions }, int32(2)},
		{"env over file", []string{"--config", file}, []string{"SHALE_NUM_PARTITIONS=3"}, func(c *Config) any { return c.NumPartitions }, int32(3)},
		{"flag over env", []string{"--config", file, "--num.partitions=4"}, []string{"SHALE_NUM_PARTITIONS=3"}, func(c *Config) any { return c.NumPartitions }, int32(4)},
		{"flag with space", []string{"--num.partitions", "5"}, nil, func(c *Config) any { return c.NumPartitions }, int32(5)},
		{"flag before config", []string{"--broker.rack=flag", "--config", file}, nil, func(c *Config) any { return c.BrokerRack }, "flag"},
		{"last flag wins", []string{"--num.partitions=6", "--num.partitions=7"}, nil, func(c *Config) any { return c.NumPartitions }, int32(7)},
		{"file value kept", []string{"--config", file}, nil, func(c *Config) any { return c.LogLevel }, slog.LevelDebug},
		{"env empty value", []string{"--config", file}, []string{"SHALE_BROKER_RACK="}, func(c *Config) any { return c.BrokerRack }, ""},
		{"env ignores other vars", nil, []string{"PATH=/bin", "NUM_PARTITIONS=9"}, func(c *Config) any { return c.NumPartitions }, int32(1)},
		{"values trimmed", []string{"--num.partitions= 8 "}, nil, func(c *Config) any { return c.NumPartitions }, int32(8)},
		{"bool case-insensitive", []string{"--auto.create.topics.enable=FALSE"}, nil, func(c *Config) any { return c.AutoCreateTopicsEnable }, false},

		{"retention hours default", nil, nil, func(c *Config) any { return c.LogRetentionMs }, int64(168 * msPerHour)},
		{"retention minutes over hours", []string{"--log.retention.hours=5", "--log.retention.minutes=3"}, nil, func(c *Config) any { return c.LogRetentionMs }, int64(3 * msPerMinute)},
		{"retention ms over minutes", []string{"--log.retention.ms=1234", "--log.retention.minutes=3"}, nil, func(c *Config) any { return c.LogRetentionMs }, int64(1234)},
		{"retention negative is forever", []string{"--log.retention.hours=-5"}, nil, func(c *Config) any { return c.LogRetentionMs }, int64(-1)},
		{"higher layer replaces the family", []string{"--config", writeFile(t, "log.retention.ms=1000\n"), "--log.retention.hours=2"}, nil, func(c *Config) any { return c.LogRetentionMs }, int64(2 * msPerHour)},
		{"env hours replace file ms", []string{"--config", writeFile(t, "log.retention.ms=1000\n")}, []string{"SHALE_LOG_RETENTION_HOURS=1"}, func(c *Config) any { return c.LogRetentionMs }, int64(msPerHour)},
		{"roll hours", []string{"--log.roll.hours=1"}, nil, func(c *Config) any { return c.LogRollMs }, int64(msPerHour)},
		{"roll ms over hours", []string{"--log.roll.hours=1", "--log.roll.ms=10"}, nil, func(c *Config) any { return c.LogRollMs }, int64(10)},
		{"log.dir", []string{"--log.dir=/x"}, nil, func(c *Config) any { return c.LogDir }, "/x"},
		{"log.dirs over log.dir", []string{"--config", writeFile(t, "log.dir=/x\nlog.dirs=/y\n")}, nil, func(c *Config) any { return c.LogDir }, "/y"},
		{"env log.dirs", nil, []string{"SHALE_LOG_DIRS=/z"}, func(c *Config) any { return c.LogDir }, "/z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.want(c); !reflect.DeepEqual(got, tc.eq) {
				t.Errorf("got %v, want %v", got, tc.eq)
			}
		})
	}
}

func TestWarningsAndUnknowns(t *testing.T) {
	file := writeFile(t, "num.network.threads=3\nzookeeper.connect=localhost:2181\nnode.id=1\n")
	c, err := Load([]string{"--config", file}, []string{"SHALE_NO_SUCH=1", "SHALE_BIN=/bin/shale"})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(c.Warnings, "\n")
	if len(c.Warnings) != 3 {
		t.Errorf("warnings %q, want 2 for the file and 1 for the environment", c.Warnings)
	}
	for _, want := range []string{"server.properties:1: ignoring num.network.threads", "server.properties:2: ignoring zookeeper.connect", "SHALE_BIN, SHALE_NO_SUCH"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings %q lack %q", joined, want)
		}
	}

	if _, err := Load([]string{"--num.network.threads=3"}, nil); err == nil || !strings.Contains(err.Error(), "num.network.threads") {
		t.Errorf("unknown flag: err %v", err)
	}
	if _, err := Load([]string{"--help"}, nil); !errors.Is(err, ErrHelp) {
		t.Errorf("--help: err %v", err)
	}
	if _, err := Load([]string{"server.properties"}, nil); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("positional: err %v", err)
	}
	if _, err := Load([]string{"--config", filepath.Join(t.TempDir(), "missing")}, nil); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := Load([]string{"--config", writeFile(t, "a=\\u12")}, nil); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad file: err %v", err)
	}
	c, err = Load([]string{"--listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://:9093"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, p := c.AdvertisedKafka(); h != "127.0.0.1" || p != 9092 {
		t.Errorf("advertised %s:%d", h, p)
	}
	if h, _ := c.KafkaListener(); h != "0.0.0.0" {
		t.Errorf("bind host %q", h)
	}
	if v := c.Voters(); v[0].Host != "127.0.0.1" || v[0].Port != 9093 {
		t.Errorf("voters %v", v)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "advertised.listeners") {
		t.Errorf("warnings %q", c.Warnings)
	}
}

// A Kafka 3.x KRaft sample file loads as is, with warnings for the keys Shale ignores.
func TestKafkaSampleFile(t *testing.T) {
	file := writeFile(t, `# Licensed to the Apache Software Foundation (ASF)
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`)
	c, err := Load([]string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LogDir != "/tmp/kraft-combined-logs" || c.LogRetentionMs != 168*msPerHour {
		t.Errorf("log dir %q retention %d", c.LogDir, c.LogRetentionMs)
	}
	if c.NumRecoveryThreadsPerDataDir != 1 {
		t.Errorf("num.recovery.threads.per.data.dir %d, the file says 1", c.NumRecoveryThreadsPerDataDir)
	}
	if h, p := c.AdvertisedKafka(); h != "localhost" || p != 9092 {
		t.Errorf("advertised %s:%d", h, p)
	}
	if len(c.Warnings) != 7 {
		t.Errorf("%d warnings, want 7: %q", len(c.Warnings), c.Warnings)
	}
	// Set explicitly in the file, so reported as broker-level although equal to defaults.
	want := map[string]string{"retention.ms": "604800000", "segment.bytes": "1073741824"}
	if got := c.TopicDefaults(); !reflect.DeepEqual(map[string]string(got), want) {
		t.Errorf("TopicDefaults %v, want %v", got, want)
	}
}

func TestTopicDefaults(t *testing.T) {
	c, err := Load([]string{
		"--log.retention.hours=24", "--message.max.bytes=2000000", "--log.roll.hours=1",
		"--log.flush.interval.messages=1", "--log.index.interval.bytes=100", "--log.index.size.max.bytes=1024",
		"--log.retention.bytes=5000", "--log.message.timestamp.type=LogAppendTime", "--compression.type=zstd",
		"--min.insync.replicas=2", "--unclean.leader.election.enable=true", "--log.segment.bytes=1048576",
		"--log.flush.interval.ms=1000", "--log.preallocate=true", "--num.partitions=3",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"retention.ms": "86400000", "max.message.bytes": "2000000", "segment.ms": "3600000",
		"flush.messages": "1", "index.interval.bytes": "100", "segment.index.bytes": "1024",
		"retention.bytes": "5000", "message.timestamp.type": "LogAppendTime", "compression.type": "zstd",
		"min.insync.replicas": "2", "unclean.leader.election.enable": "true", "segment.bytes": "1048576",
		"flush.ms": "1000", "preallocate": "true",
	}
	if got := c.TopicDefaults(); !reflect.DeepEqual(map[string]string(got), want) {
		t.Errorf("TopicDefaults\n got %v\nwant %v", got, want)
	}
}

func TestSettingsSources(t *testing.T) {
	file := writeFile(t, "\nlog.retention.minutes=10\n")
	c, err := Load([]string{"--config", file, "--node.id=3"}, []string{"SHALE_BROKER_RACK=r1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Setting{}
	for _, s := range c.Settings() {
		got[s.Key] = s
	}
	for _, want := range []Setting{
		{Key: "node.id", Value: "3", Source: "flag --node.id"},
		{Key: "broker.rack", Value: "r1", Source: "environment SHALE_BROKER_RACK"},
		{Key: "log.retention.ms", Value: "600000", Source: file + ":2", Via: "log.retention.minutes"},
		{Key: "num.partitions", Value: "1", Source: "default"},
		{Key: "controller.quorum.voters", Value: "3@127.0.0.1:9093", Source: "default"},
	} {
		if got[want.Key] != want {
			t.Errorf("%s: got %+v, want %+v", want.Key, got[want.Key], want)
		}
	}
}

func TestSetBoundPort(t *testing.T) {
	c, err := Load([]string{"--listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetBoundPort("PLAINTEXT", 40001)
	c.SetBoundPort("CONTROLLER", 40002)
	c.SetBoundPort("CONTROLLER", 40003) // already bound: ignored
	if _, p := c.KafkaListener(); p != 40001 {
		t.Errorf("kafka port %d", p)
	}
	if _, p := c.AdvertisedKafka(); p != 40001 {
		t.Errorf("advertised port %d", p)
	}
	if _, p := c.ControllerListener(); p != 40002 {
		t.Errorf("controller port %d", p)
	}
	if v := c.Voters(); v[0].Port != 40002 {
		t.Errorf("voters %v", v)
	}
}

func TestUsageListsEveryKey(t *testing.T) {
	var b strings.Builder
	Usage(&b)
	for name := range keysByName {
		if !strings.Contains(b.String(), "--"+name+" ") && !strings.Contains(b.String(), "--"+name+",") {
			t.Errorf("usage lacks --%s", name)
		}
	}
}

// A single node told only its Kafka listener is its own quorum: it gets a loopback
// controller listener on a free port instead of a refusal.
func TestSingleNodeWithoutControllerListener(t *testing.T) {
	c, err := Load([]string{"--listeners=PLAINTEXT://127.0.0.1:9092"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host, port := c.ControllerListener(); host != "127.0.0.1" || port != 0 || !c.DerivedControllerListener() {
		t.Fatalf("controller listener %s:%d, derived %v", host, port, c.DerivedControllerListener())
	}
	c.SetBoundPort("CONTROLLER", 40002)
	if v := c.Voters(); len(v) != 1 || v[0].ID != 1 || v[0].Addr() != "127.0.0.1:40002" {
		t.Errorf("voters %v", v)
	}
	if l := c.BrokerListeners(); len(l) != 1 || l[0].Name != "PLAINTEXT" {
		t.Errorf("broker listeners %v", l)
	}
	if _, err := Load([]string{"--listeners=PLAINTEXT://127.0.0.1:9092", "--controller.quorum.voters=1@127.0.0.1:9093"}, nil); err == nil {
		t.Error("a controller with configured voters and no controller listener was accepted")
	}
	c, err = Load(nil, nil)
	if err != nil || c.DerivedControllerListener() {
		t.Errorf("defaults: derived %v, %v", c.DerivedControllerListener(), err)
	}
}
