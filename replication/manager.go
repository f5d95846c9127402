package replication

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/tiered/objstore"
	"github.com/shalelog/shale/tiered/remotelog"
)

// Config configures a Manager. Zero values take Kafka's defaults.
type Config struct {
	NodeID int32
	// FetcherOpts are added to the replica fetchers' Kafka clients: TLS and SASL for the
	// inter-broker listener.
	FetcherOpts   []kgo.Opt
	LogDir        string
	TopicDefaults topicconfig.BrokerDefaults
	// RetentionCheckInterval is log.retention.check.interval.ms (default 5 minutes).
	RetentionCheckInterval time.Duration
	// ReplicaLagTimeMax is replica.lag.time.max.ms: a follower that has not caught up for
	// this long leaves the ISR (default 30 s).
	ReplicaLagTimeMax time.Duration
	// NumReplicaFetchers is num.replica.fetchers: fetcher connections per source broker
	// (default 1).
	NumReplicaFetchers int
	// ReplicaFetchWaitMax is replica.fetch.wait.max.ms (default 500 ms).
	ReplicaFetchWaitMax time.Duration
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes per partition (default 1 MiB) and
	// ReplicaFetchResponseMaxBytes replica.fetch.response.max.bytes (default 10 MiB).
	ReplicaFetchMaxBytes         int32
	ReplicaFetchResponseMaxBytes int32
	// ReplicaFetchBackoff is replica.fetch.backoff.ms (default 1 s).
	ReplicaFetchBackoff time.Duration
	// HWCheckpointInterval is replica.high.watermark.checkpoint.interval.ms (default 5 s).
	HWCheckpointInterval time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms (default 1 day): idempotent
	// producer state idle this long is forgotten, checked every
	// ProducerIDExpirationCheckInterval (producer.id.expiration.check.interval.ms,
	// default 10 minutes).
	ProducerIDExpiration              time.Duration
	ProducerIDExpirationCheckInterval time.Duration
	// RecoveryThreads is num.recovery.threads.per.data.dir and MaxMappedSegments
	// log.mapped.segments.max (see partition.ManagerConfig for their defaults).
	RecoveryThreads   int
	MaxMappedSegments int
	// The log cleaner's settings (see partition.ManagerConfig): !log.cleaner.enable,
	// log.cleaner.threads,
	// log.cleaner.dedupe.buffer.size, log.cleaner.io.max.bytes.per.second,
	// log.cleaner.backoff.ms.
	CleanerDisabled            bool
	CleanerThreads             int
	CleanerDedupeBufferSize    int64
	CleanerIOMaxBytesPerSecond float64
	CleanerBackoff             time.Duration
	Logger                     *slog.Logger
	Registry                   prometheus.Registerer

	// Clock is the time every decision on time reads (follower lag, ISR and fetch
	// back-offs); nil is the wall clock.
	Clock Clock
	// Driven hands the manager's background work to its caller: NewManager starts no
	// goroutine, the replica fetchers send nothing on their own (DrivenFetches hands
	// their requests out), ISR changes are proposed through Spawn, and metadata is
	// applied only through ApplyImage. The deterministic simulation (tests/sim) drives a
	// Manager this way, so that every interleaving follows from its seed; a node never
	// sets it.
	Driven bool
	// DiskFaults, when set, injects disk faults into every replica's log: fsync
	// errors, and the simulation's power cuts (log.Faults). Nil in production.
	DiskFaults *shalelog.Faults
	// LogBackground runs every replica log's deferred work (syncing rolled segments,
	// deleting old ones; log.Background); nil gives each log its own goroutine. The
	// simulation runs it on its scheduler.
	LogBackground shalelog.Background
	// Dial reaches a leader for the replica fetchers; nil is a Kafka client over TCP
	// with FetcherOpts.
	Dial func(leader metadata.Broker) (BrokerConn, error)
	// DialLink reaches a cluster link's source cluster for the mirror copiers
	// (mirror.go); nil is a Kafka client with the link's configs.
	DialLink func(link *metadata.ClusterLink) (LinkConn, error)
	// DialSelf reaches this broker's own cluster for the consumer offset sync
	// (mirror_offsets.go); nil is a Kafka client of this broker's advertised listener
	// with FetcherOpts.
	DialSelf func() (LinkConn, error)
	// Spawn runs a background call (an ISR proposal); nil runs each on its own
	// goroutine.
	Spawn func(func())

	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate are
	// leader.replication.throttled.rate and follower.replication.throttled.rate: bytes
	// per second for the throttled replicas (throttle.go); 0 (unset) and MaxInt64 mean
	// no limit.
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64

	// RecordNamer names records for the schema ID validation's record name strategies
	// (schemaid.go); nil refuses every record those strategies check.
	RecordNamer RecordNamer

	// ReplicaSelector is replica.selector.class (read_replica.go): nil, Kafka's default,
	// never points consumers at followers (followers still serve those that come).
	ReplicaSelector ReplicaSelector

	// Tiered storage (tiered.go). RemoteStore is the object store the remote logs live
	// in; nil turns tiered storage off on this broker (remote.log.storage.system.enable
	// false). With it, RemoteLogs, the quorum's record of the remote logs, is required.
	RemoteStore objstore.Store
	RemoteLogs  metadata.RemoteLogStore
	// RemoteSource, when set, is what remote reads go through (a chunk cache); nil reads
	// RemoteStore directly.
	RemoteSource remotelog.Source
	// RemoteTaskInterval is remote.log.manager.task.interval.ms: how often a leader
	// uploads, applies retention to and cleans its remote logs (default 30 s).
	RemoteTaskInterval time.Duration
	// RemoteRequestTimeout bounds each call to the object store and each remote log
	// commit (default 30 s).
	RemoteRequestTimeout time.Duration
	// RemoteLogReaderThreads (remote.log.reader.threads, default 10) read the remote
	// log for consumers' fetches, off the request goroutines; at most
	// RemoteLogReaderMaxPendingTasks (remote.log.reader.max.pending.tasks, default 100)
	// reads wait for one. A fetch waits RemoteFetchMaxWait (remote.fetch.max.wait.ms,
	// default 500 ms) for its remote read, then answers the partition empty.
	RemoteLogReaderThreads         int
	RemoteLogReaderMaxPendingTasks int
	RemoteFetchMaxWait             time.Duration
}

func (c *Config) defaults() {
	if c.ReplicaLagTimeMax <= 0 {
		c.ReplicaLagTimeMax = 30 * time.Second
	}
	if c.NumReplicaFetchers <= 0 {
		c.NumReplicaFetchers = 1
	}
	if c.ReplicaFetchWaitMax <= 0 {
		c.ReplicaFetchWaitMax = 500 * time.Millisecond
	}
	if c.ReplicaFetchMaxBytes <= 0 {
		c.ReplicaFetchMaxBytes = 1 << 20
	}
	if c.ReplicaFetchResponseMaxBytes <= 0 {
		c.ReplicaFetchResponseMaxBytes = 10 << 20
	}
	if c.ReplicaFetchBackoff <= 0 {
		c.ReplicaFetchBackoff = time.Second
	}
	if c.ProducerIDExpiration <= 0 {
		c.ProducerIDExpiration = 24 * time.Hour
	}
	if c.ProducerIDExpirationCheckInterval <= 0 {
		c.ProducerIDExpirationCheckInterval = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LeaderReplicationThrottledRate == 0 {
		c.LeaderReplicationThrottledRate = math.MaxInt64
	}
	if c.FollowerReplicationThrottledRate == 0 {
		c.FollowerReplicationThrottledRate = math.MaxInt64
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Spawn == nil {
		c.Spawn = func(fn func()) { go fn() }
	}
	if c.RemoteTaskInterval <= 0 {
		c.RemoteTaskInterval = DefaultRemoteTaskInterval
	}
	if c.RemoteRequestTimeout <= 0 {
		c.RemoteRequestTimeout = DefaultRemoteRequestTimeout
	}
	if c.RemoteLogReaderThreads <= 0 {
		c.RemoteLogReaderThreads = DefaultRemoteLogReaderThreads
	}
	if c.RemoteLogReaderMaxPendingTasks <= 0 {
		c.RemoteLogReaderMaxPendingTasks = DefaultRemoteLogReaderMaxPendingTasks
	}
	if c.RemoteFetchMaxWait <= 0 {
		c.RemoteFetchMaxWait = DefaultRemoteFetchMaxWait
	}
}

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// AfterClock is a Clock that also wakes a waiter once a duration of its time has passed
// (time.After). A Config.Clock that implements it times the manager's waits (a
// DeleteRecords's rechecks); with one that does not, they wait on the wall clock.
type AfterClock interface {
	Clock
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// now is the manager's time (Config.Clock).
func (m *Manager) now() time.Time { return m.cfg.Clock.Now() }

// after is a channel that receives once d of the manager's time has passed.
func (m *Manager) after(d time.Duration) <-chan time.Time {
	if c, ok := m.cfg.Clock.(AfterClock); ok {
		return c.After(d)
	}
	return time.After(d)
}

// Manager owns this broker's replicas.
type Manager struct {
	cfg   Config
	store metadata.Store
	parts *partition.Manager
	lg    *slog.Logger
	m     *metrics
	// traffic counts produce and fetch by topic for the JMX-style series.
	traffic traffic

	// mu serializes applying metadata, and applying against Close.
	mu      sync.Mutex
	closed  bool
	configs map[string]map[string]string // topic -> configs last applied

	// applied is the newest image the replicas reflect; appliedCh is closed and
	// replaced each time it changes, for WaitApplied.
	applied   atomic.Pointer[metadata.Image]
	appliedMu sync.Mutex
	appliedCh chan struct{}

	fetchers *fetcherPool
	// mirrors copy the mirror partitions this broker leads from their sources (mirror.go).
	mirrors *mirrorPool
	// isrRetries are the ISR changes whose outcome is unknown, to send again (isr.go).
	isrRetries isrRetries
	autoCreate autoCreator
	// txnVerifier checks a producer's first transactional write to a partition (txn.go).
	txnVerifier atomic.Pointer[txnVerifierBox]
	// leaderQuota and followerQuota budget the throttled replicas' traffic.
	leaderQuota, followerQuota *quota
	// tier is tiered storage's uploader and reader; nil when it is off (tiered.go).
	tier *tiering

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewManager opens the log directory and applies the store's current metadata, so that
// the listener serves existing partitions from its first request. Run follows changes.
func NewManager(cfg Config, store metadata.Store) (*Manager, error) {
	cfg.defaults()
	if cfg.RemoteStore != nil && cfg.RemoteLogs == nil {
		return nil, errors.New("replication: a remote store needs the remote log store (Config.RemoteLogs)")
	}
	parts, err := partition.NewManager(partition.ManagerConfig{
		Dir: cfg.LogDir, NodeID: cfg.NodeID, RetentionCheckInterval: cfg.RetentionCheckInterval,
		HWCheckpointInterval: cfg.HWCheckpointInterval, Logger: cfg.Logger,
		RecoveryThreads: cfg.RecoveryThreads, MaxMappedSegments: cfg.MaxMappedSegments,
		CleanerDisabled: cfg.CleanerDisabled, CleanerThreads: cfg.CleanerThreads, CleanerDedupeBufferSize: cfg.CleanerDedupeBufferSize,
		CleanerIOMaxBytesPerSecond: cfg.CleanerIOMaxBytesPerSecond, CleanerBackoff: cfg.CleanerBackoff,
		Driven: cfg.Driven, DiskFaults: cfg.DiskFaults, LogBackground: cfg.LogBackground,
	})
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg: cfg, store: store, parts: parts, lg: cfg.Logger,
		configs: map[string]map[string]string{}, appliedCh: make(chan struct{}),
		leaderQuota: newQuota(cfg.LeaderReplicationThrottledRate), followerQuota: newQuota(cfg.FollowerReplicationThrottledRate),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.m = newMetrics(m)
	if cfg.RemoteStore != nil {
		m.tier = newTiering(m)
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(m.m, newExporterMetrics(m), newMirrorMetrics(m))
		if m.tier != nil {
			cfg.Registry.MustRegister(m.tier)
		}
	}
	m.fetchers = newFetcherPool(m)
	m.mirrors = newMirrorPool(m)
	m.apply(store.Current(), true)
	if cfg.Driven {
		return m, nil
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.isrLoop()
	}()
	go func() {
		defer m.wg.Done()
		m.producerExpiryLoop()
	}()
	if m.tier != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.tierLoop()
		}()
		m.startRemoteReaders()
	}
	return m, nil
}

// Partitions gives read access to the replicas (metrics, tests); handlers use the
// Manager's own methods.
func (m *Manager) Partitions() *partition.Manager { return m.parts }

// Image is the newest metadata the replicas reflect.
func (m *Manager) Image() *metadata.Image {
	if im := m.applied.Load(); im != nil {
		return im
	}
	return m.store.Current()
}

// WaitApplied blocks until ready holds for the applied image or ctx ends.
func (m *Manager) WaitApplied(ctx context.Context, ready func(*metadata.Image) bool) bool {
	for {
		m.appliedMu.Lock()
		ch := m.appliedCh
		m.appliedMu.Unlock()
		if ready(m.Image()) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (m *Manager) publishApplied(im *metadata.Image) {
	m.applied.Store(im)
	m.appliedMu.Lock()
	close(m.appliedCh)
	m.appliedCh = make(chan struct{})
	m.appliedMu.Unlock()
}

// Run follows metadata changes until ctx is done.
func (m *Manager) Run(ctx context.Context) {
	images := m.store.Watch(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case im, ok := <-images:
			if !ok {
				return
			}
			m.apply(im, false)
		case <-tick.C:
			// Retry replicas that failed to open or to take their role.
			m.apply(m.Image(), false)
		case <-ctx.Done():
			return
		}
	}
}

// ApplyImage brings the replicas in line with im, as Run does for each image it
// receives; a Driven manager's caller delivers images this way.
func (m *Manager) ApplyImage(im *metadata.Image) { m.apply(im, false) }

// Crash drops the manager as a killed process would: nothing more is written, no
// checkpoint, producer snapshot or clean-shutdown marker (the simulation's crash).
func (m *Manager) Crash() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.fetchers.close()
	m.mirrors.close()
	if !m.cfg.Driven {
		// (A Driven manager's background calls wait in its caller's queue, which
		// drops them.)
		m.wg.Wait()
	}
	m.parts.Crash()
}

// Close stops the fetchers and the ISR loop, then closes every replica cleanly.
func (m *Manager) Close() error {
	// No metadata is applied once closing starts: a replica removal racing the close
	// could rename a directory that is being closed.
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.fetchers.close()
	m.mirrors.close()
	m.wg.Wait()
	return m.parts.Close()
}

// ErrBrokerFenced answers leader operations while the controller says this broker is
// fenced: a retriable NOT_LEADER_OR_FOLLOWER, so that clients look for the leader again.
var ErrBrokerFenced = fmt.Errorf("%w: the controller has fenced this broker", kerr.NotLeaderForPartition)

// Leader is the one fencing check: it returns the replica when this broker leads the
// partition in the applied metadata, at currentLeaderEpoch when that is not -1 (KIP-320:
// an older epoch is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH), and the
// controller has not said that this broker is fenced. A fenced broker's leaderships
// have moved, though the metadata that says so may not have arrived (it was cut off
// from the controllers, or its metadata stream lags): leading on, it would serve stale
// reads, records that a DeleteRecords on the new leader purged among them. The
// controller unfences a broker only once its metadata has caught up with its fencing
// (controller.ReadyToUnfence), so that it then knows what it no longer leads. A broker
// that merely hears nothing from the controllers goes on leading, as Kafka's do.
func (m *Manager) Leader(topic string, index, currentLeaderEpoch int32) (*partition.Partition, error) {
	if m.Image().Partition(topic, index) == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	p := m.parts.Get(topic, index)
	if p == nil || p.Role() != partition.RoleLeader {
		return nil, kerr.NotLeaderForPartition
	}
	if m.store.Fenced() {
		return nil, ErrBrokerFenced
	}
	if err := CheckLeaderEpoch(currentLeaderEpoch, p.LeaderEpoch()); err != nil {
		return nil, err
	}
	return p, nil
}

// producerExpiryLoop forgets idle idempotent producers on every replica, leader or
// follower alike (a follower that becomes leader must agree with the old leader on
// which producers it still knows), as Kafka's producer-id expiration task does.
func (m *Manager) producerExpiryLoop() {
	t := time.NewTicker(m.cfg.ProducerIDExpirationCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.expireProducers(m.now())
	}
}

func (m *Manager) expireProducers(now time.Time) {
	n := 0
	for _, p := range m.parts.All() {
		n += p.ExpireProducers(now, m.cfg.ProducerIDExpiration)
	}
	if n > 0 {
		m.lg.Info("expired idle producer state", "producers", n, "producer_id_expiration", m.cfg.ProducerIDExpiration)
	}
}

// ReplicaGone turns the error of an operation on a replica whose log was closed under
// it (a concurrent topic deletion or reassignment, or shutdown) into what Kafka answers
// for a replica that is no longer there: UNKNOWN_TOPIC_OR_PARTITION once the applied
// metadata has no such partition, NOT_LEADER_OR_FOLLOWER otherwise, so that the client
// refreshes its metadata instead of treating the broker's disk as failed
// (KAFKA_STORAGE_ERROR). Other errors are returned unchanged.
func (m *Manager) ReplicaGone(topic string, index int32, err error) error {
	if !errors.Is(err, shalelog.ErrClosed) {
		return err
	}
	if m.Image().Partition(topic, index) == nil {
		return fmt.Errorf("%w: %w", kerr.UnknownTopicOrPartition, err)
	}
	return fmt.Errorf("%w: %w", kerr.NotLeaderForPartition, err)
}

// CheckLeaderEpoch is KIP-320's check of the leader epoch a request names (its
// current_leader_epoch) against the epoch of the replica, or coordinator, that serves
// it: -1 (any) and the same epoch pass; an older one is FENCED_LEADER_EPOCH (the
// client's metadata is stale, it refreshes) and a newer one UNKNOWN_LEADER_EPOCH (this
// broker's is, the client retries). Every handler that takes a current leader epoch
// decides through it.
func CheckLeaderEpoch(requested, current int32) error {
	switch {
	case requested < 0:
		return nil
	case requested < current:
		return fmt.Errorf("%w: request epoch %d, leader epoch %d", kerr.FencedLeaderEpoch, requested, current)
	case requested > current:
		return fmt.Errorf("%w: request epoch %d, leader epoch %d", kerr.UnknownLeaderEpoch, requested, current)
	}
	return nil
}

// apply brings the replicas in line with an image: it opens the partitions assigned here,
// applies leadership and configs, starts and stops follower fetches, and sets aside the
// replicas of deleted topics. Images older than the applied one are refused: a deposed
// controller's stale image must never remove data or move leadership back.
func (m *Manager) apply(im *metadata.Image, startup bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if cur := m.applied.Load(); cur != nil && im.Offset < cur.Offset {
		m.lg.Warn("refusing metadata older than what is applied", "image", im.Offset, "applied", cur.Offset)
		return
	}
	id := m.cfg.NodeID
	self, registered := im.Brokers[id]
	// A broker the quorum has fenced, or that the image shows under an older
	// registration, must not lead: it steps down as soon as it learns.
	fenced := !registered || self.Fenced || (m.store.BrokerEpoch() >= 0 && self.Epoch != m.store.BrokerEpoch())
	now := m.now()
	want := map[partition.TopicPartition]bool{}
	follow := map[partition.TopicPartition]followTarget{}
	copying := map[partition.TopicPartition]mirrorTarget{}
	m.removeRecreated(im)
	openErrs := m.openMissing(im, id)
	for _, t := range im.Topics {
		changedConfigs := !maps.Equal(m.configs[t.Name], t.Configs)
		settings := SettingsFor(t.Configs, m.cfg.TopicDefaults)
		for _, mp := range t.Partitions {
			if !metadata.Contains(mp.Replicas, id) {
				continue
			}
			tp := partition.TopicPartition{Topic: t.Name, Index: mp.Index}
			want[tp] = true
			p := m.parts.Get(t.Name, mp.Index)
			if p == nil {
				err := openErrs[tp]
				if err == nil {
					err = errors.New("replica not open")
				}
				m.lg.Error("cannot open partition", "partition", tp, "err", err)
				continue
			} else if changedConfigs {
				p.ApplySettings(settings)
			}
			if settings.Tiered {
				// Local segments go only once the remote log holds them, on every replica.
				end := int64(0)
				if rl := im.RemoteLog(t.Name, mp.Index); rl != nil && rl.TopicID == t.ID {
					end = rl.CoveredEnd()
				}
				p.SetRemoteEnd(end)
			}
			role := partition.RoleFollower
			switch {
			case fenced:
				role = partition.RoleNone
			case mp.Leader == id:
				role = partition.RoleLeader
			case mp.Leader < 0:
				role = partition.RoleNone
			}
			mirror := im.Mirror(t.Name)
			st := partition.State{Role: role, Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch, PartitionEpoch: mp.PartitionEpoch,
				Replicas: mp.Replicas, ISR: mp.ISR, Mirror: mirror.Active()}
			tr, err := p.ApplyState(st, now)
			if err != nil {
				m.lg.Error("cannot take the partition's new state", "partition", tp, "err", err)
			}
			if tr == partition.NewEpoch {
				m.lg.Info("partition state", "partition", tp, "role", role, "leader", mp.Leader, "leader_epoch", mp.LeaderEpoch, "isr", mp.ISR)
			}
			if tr == partition.NewEpoch && role == partition.RoleLeader && mirror != nil && !mirror.Active() {
				// A promoted mirror: end what the source left open (mirror.go).
				if n, err := p.AbortSourceTransactions(floorOf(mirror, mp.Index)); err != nil {
					m.lg.Error("cannot abort the transactions a mirror's source left open", "partition", tp, "aborted", n, "err", err)
				}
			}
			if mirror.Active() && p.Role() == partition.RoleLeader && p.LeaderEpoch() == mp.LeaderEpoch {
				copying[tp] = mirrorTarget{p: p, leaderEpoch: mp.LeaderEpoch, mirror: mirror, topicID: t.ID}
			}
			if p.Role() == partition.RoleFollower && p.LeaderEpoch() == mp.LeaderEpoch {
				if b, ok := im.Brokers[mp.Leader]; ok {
					follow[tp] = followTarget{p: p, leader: b, leaderEpoch: mp.LeaderEpoch, topicID: t.ID,
						throttled: m.followerThrottled(t, &mp)}
				}
			}
		}
		m.configs[t.Name] = t.Configs
	}
	for name := range m.configs {
		if im.Topic(name) == nil {
			delete(m.configs, name)
		}
	}
	m.fetchers.update(follow)
	m.mirrors.update(im, copying)
	for _, p := range m.parts.All() {
		tp := partition.TopicPartition{Topic: p.Topic(), Index: p.Index()}
		if !want[tp] {
			m.lg.Info("removing replica", "partition", tp)
			if err := m.parts.Remove(tp.Topic, tp.Index); err != nil {
				m.lg.Error("cannot remove replica", "partition", tp, "err", err)
			}
		}
	}
	m.publishApplied(im)
	if startup {
		// Replicas of topics deleted, or moved away, while this broker was down.
		onDisk, err := m.parts.OnDisk()
		if err != nil {
			m.lg.Error("cannot list log dir", "err", err)
			return
		}
		for _, tp := range onDisk {
			if !want[tp] {
				m.lg.Info("setting aside a replica no longer assigned here", "partition", tp)
				if err := m.parts.RemoveDir(tp); err != nil {
					m.lg.Error("cannot remove replica", "partition", tp, "err", err)
				}
			}
		}
	}
}

// removeRecreated removes each open replica whose topic the image holds under another
// topic id: that topic was deleted and a new one created under the same name. Images
// arrive coalesced (and a broker that reconnects gets one full image), so the deletion
// itself may never be seen here; without this the new topic would be served from the old
// one's log, since its epochs, restarting at 0, are refused as stale, or, when equal, taken
// for the same state. The replica goes as a deleted topic's does (its directory set
// aside, its waiters answered), and openMissing then opens an empty one for the new id
// in the same apply.
func (m *Manager) removeRecreated(im *metadata.Image) {
	for _, p := range m.parts.All() {
		t := im.Topic(p.Topic())
		if t == nil || !topicIDChanged(p.TopicID(), t.ID) {
			continue // deleted topics go with the replicas no longer assigned here
		}
		tp, oldID := partition.TopicPartition{Topic: p.Topic(), Index: p.Index()}, p.TopicID()
		m.lg.Warn("topic recreated under the same name; setting the old topic's replica aside", "partition", tp,
			"old_topic_id", hex.EncodeToString(oldID[:]), "topic_id", hex.EncodeToString(t.ID[:]))
		if err := m.parts.Remove(tp.Topic, tp.Index); err != nil {
			// The replica is closed and forgotten all the same; opening the new topic's
			// finds the old directory by its partition.metadata and sets it aside then.
			m.lg.Error("cannot remove the old topic's replica", "partition", tp, "err", err)
		}
	}
}

// topicIDChanged reports whether a replica of topic id have belongs to another topic than
// id want. A zero id is metadata from before topic ids, which names no other topic.
func topicIDChanged(have, want [16]byte) bool {
	return have != want && have != ([16]byte{}) && want != ([16]byte{})
}

// openMissing opens the replicas assigned to this broker that are not open yet, in
// parallel (num.recovery.threads.per.data.dir at once, as at startup), and returns the
// errors of those that failed.
func (m *Manager) openMissing(im *metadata.Image, id int32) map[partition.TopicPartition]error {
	var reqs []partition.OpenRequest
	for _, t := range im.Topics {
		var settings *partition.Settings
		for _, mp := range t.Partitions {
			if !metadata.Contains(mp.Replicas, id) || m.parts.Get(t.Name, mp.Index) != nil {
				continue
			}
			if settings == nil {
				s := SettingsFor(t.Configs, m.cfg.TopicDefaults)
				settings = &s
			}
			reqs = append(reqs, partition.OpenRequest{Topic: t.Name, TopicID: t.ID, Index: mp.Index, Settings: *settings})
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	errs := map[partition.TopicPartition]error{}
	for i, r := range m.parts.OpenAll(reqs) {
		if r.Err != nil {
			errs[partition.TopicPartition{Topic: reqs[i].Topic, Index: reqs[i].Index}] = r.Err
		}
	}
	return errs
}

// SettingsFor resolves a topic's configs into what its partitions act on.
func SettingsFor(configs map[string]string, defaults topicconfig.BrokerDefaults) partition.Settings {
	r := topicconfig.Resolve(configs, defaults)
	s := partition.Settings{
		MinInsyncReplicas:  int(r.Int32(topicconfig.MinInsyncReplicas)),
		LogAppendTime:      r.String(topicconfig.MessageTimestampType) == "LogAppendTime",
		Codec:              -1,
		MaxTimestampDiffMs: r.Int64(topicconfig.MessageTimestampDiffMaxMs),
		AcksAllFsync:       r.Bool(topicconfig.AcksAllFsync),
		SchemaIDs: records.SchemaIDPolicy{
			Key:           r.Bool(topicconfig.KeySchemaValidation),
			Value:         r.Bool(topicconfig.ValueSchemaValidation),
			KeyStrategy:   records.ParseSubjectNameStrategy(r.String(topicconfig.KeySubjectNameStrategy)),
			ValueStrategy: records.ParseSubjectNameStrategy(r.String(topicconfig.ValueSubjectNameStrategy)),
		},
	}
	switch ct := r.String(topicconfig.CompressionType); ct {
	case "producer":
	case "uncompressed", "none":
		s.Codec = 0
	default:
		if c, ok := records.CodecByName(ct); ok {
			s.Codec = c
		}
	}
	s.Log = logConfig(r)
	deleteOld, compact := r.Policy()
	s.Compaction = partition.Compaction{
		Compact:           compact,
		MinCleanableRatio: r.Float64(topicconfig.MinCleanableDirtyRatio),
		MinLagMs:          r.Int64(topicconfig.MinCompactionLagMs),
		MaxLagMs:          r.Int64(topicconfig.MaxCompactionLagMs),
		DeleteRetentionMs: r.Int64(topicconfig.DeleteRetentionMs),
	}
	if !deleteOld {
		// cleanup.policy=compact alone: segments are never deleted for their age or the
		// log's size, only compacted.
		s.Log.RetentionMs, s.Log.RetentionBytes = -1, -1
	}
	if r.RemoteStorage() && !compact {
		// The local log keeps local.retention.*; retention.* bounds local plus remote
		// and is applied by the uploader (tiered.go).
		s.Tiered = true
		s.Log.RetentionMs = oneIfZero(r.LocalRetentionMs())
		s.Log.RetentionBytes = oneIfZero(r.LocalRetentionBytes())
	}
	return s
}

// logConfig is the storage configuration of a topic's partitions. The log takes a zero
// as "default", so Kafka's meaningful zeros (retention.ms=0: delete at once) become 1,
// which behaves the same.
func logConfig(r topicconfig.Resolved) shalelog.Config {
	nonZero := func(v int64) int64 {
		if v == 0 {
			return 1
		}
		return v
	}
	cfg := shalelog.DefaultConfig()
	cfg.SegmentBytes = r.Int64(topicconfig.SegmentBytes)
	cfg.SegmentMs = nonZero(r.Int64(topicconfig.SegmentMs))
	cfg.RetentionBytes = nonZero(r.Int64(topicconfig.RetentionBytes))
	cfg.RetentionMs = nonZero(r.Int64(topicconfig.RetentionMs))
	cfg.MaxMessageBytes = r.Int32(topicconfig.MaxMessageBytes)
	cfg.IndexIntervalBytes = int32(nonZero(int64(r.Int32(topicconfig.IndexIntervalBytes))))
	cfg.SegmentIndexBytes = r.Int32(topicconfig.SegmentIndexBytes)
	cfg.FlushMessages = r.Int64(topicconfig.FlushMessages)
	cfg.FlushMs = nonZero(r.Int64(topicconfig.FlushMs))
	cfg.WritebackBytes = r.Int64(topicconfig.WritebackBytes)
	if cfg.WritebackBytes == 0 {
		cfg.WritebackBytes = -1 // off; the log's zero is its default
	}
	return cfg
}

func oneIfZero(v int64) int64 {
	if v == 0 {
		return 1
	}
	return v
}

// isStorageError reports a failed or full log directory.
func isStorageError(err error) bool { return errors.Is(err, shalelog.ErrStorage) }
