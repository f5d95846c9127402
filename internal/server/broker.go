package server

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/records"
	"github.com/shalelog/shale/internal/topicconfig"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/partition"
)

// BrokerConfig configures a Broker.
type BrokerConfig struct {
	NodeID                 int32
	LogDir                 string
	TopicDefaults          topicconfig.BrokerDefaults
	RetentionCheckInterval time.Duration
	Logger                 *slog.Logger
	Registry               prometheus.Registerer
}

// Broker keeps this broker's replicas in line with the committed metadata: it opens the
// partitions assigned here, applies leadership and configs as they change, and removes
// the replicas of deleted topics.
type Broker struct {
	cfg   BrokerConfig
	store metadata.Store
	parts *partition.Manager
	lg    *slog.Logger

	mu      sync.Mutex
	configs map[string]map[string]string // topic -> configs last applied
	done    chan struct{}

	// applied is the newest image the replicas reflect; appliedCh is closed and
	// replaced each time it changes, for WaitApplied.
	applied   atomic.Pointer[metadata.Image]
	appliedMu sync.Mutex
	appliedCh chan struct{}
}

// Image implements protocol.AppliedMetadata.
func (b *Broker) Image() *metadata.Image { return b.applied.Load() }

// WaitApplied implements protocol.AppliedMetadata.
func (b *Broker) WaitApplied(ctx context.Context, ready func(*metadata.Image) bool) bool {
	for {
		b.appliedMu.Lock()
		ch := b.appliedCh
		b.appliedMu.Unlock()
		if ready(b.applied.Load()) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (b *Broker) publishApplied(im *metadata.Image) {
	b.applied.Store(im)
	b.appliedMu.Lock()
	close(b.appliedCh)
	b.appliedCh = make(chan struct{})
	b.appliedMu.Unlock()
}

// NewBroker opens the partition manager.
func NewBroker(cfg BrokerConfig, store metadata.Store) (*Broker, error) {
	parts, err := partition.NewManager(partition.ManagerConfig{Dir: cfg.LogDir, RetentionCheckInterval: cfg.RetentionCheckInterval, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, store: store, parts: parts, lg: cfg.Logger, configs: map[string]map[string]string{}, done: make(chan struct{}), appliedCh: make(chan struct{})}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(newPartitionCollector(parts))
	}
	// Apply what is committed now, so that the listener serves existing partitions
	// from its first request.
	b.reconcile(store.Current(), true)
	return b, nil
}

// Partitions is the replica manager.
func (b *Broker) Partitions() *partition.Manager { return b.parts }

// Run follows metadata changes until ctx is done.
func (b *Broker) Run(ctx context.Context) {
	defer close(b.done)
	lease := time.NewTicker(time.Second)
	defer lease.Stop()
	images := b.store.Watch(ctx)
	for {
		select {
		case im, ok := <-images:
			if !ok {
				return
			}
			b.reconcile(im, false)
		case <-lease.C:
			// A lapsed lease demotes every leader even when no new image arrives
			// (the controller may be unreachable); the next image restores them.
			b.reconcile(b.store.Current(), false)
		case <-ctx.Done():
			return
		}
	}
}

func (b *Broker) reconcile(im *metadata.Image, startup bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.cfg.NodeID
	leaseOK := b.store.LeaseValid()
	want := map[partition.TopicPartition]bool{}
	for _, t := range im.Topics {
		changedConfigs := !maps.Equal(b.configs[t.Name], t.Configs)
		settings := SettingsFor(t.Configs, b.cfg.TopicDefaults)
		for _, mp := range t.Partitions {
			if !metadata.Contains(mp.Replicas, id) {
				continue
			}
			tp := partition.TopicPartition{Topic: t.Name, Index: mp.Index}
			want[tp] = true
			p := b.parts.Get(t.Name, mp.Index)
			if p == nil {
				var err error
				if p, err = b.parts.Open(t.Name, mp.Index, settings); err != nil {
					b.lg.Error("cannot open partition", "partition", tp, "err", err)
					continue
				}
			} else if changedConfigs {
				p.ApplySettings(settings)
			}
			role := partition.RoleFollower
			switch {
			case !leaseOK:
				role = partition.RoleNone
			case mp.Leader == id:
				role = partition.RoleLeader
			case mp.Leader < 0:
				role = partition.RoleNone
			}
			p.ApplyState(partition.State{
				Role: role, Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch, PartitionEpoch: mp.PartitionEpoch,
				Replicas: mp.Replicas, ISR: mp.ISR,
			})
		}
		b.configs[t.Name] = t.Configs
	}
	for name := range b.configs {
		if im.Topic(name) == nil {
			delete(b.configs, name)
		}
	}
	for _, p := range b.parts.All() {
		tp := partition.TopicPartition{Topic: p.Topic(), Index: p.Index()}
		if !want[tp] {
			b.lg.Info("removing replica", "partition", tp)
			if err := b.parts.Remove(tp.Topic, tp.Index); err != nil {
				b.lg.Error("cannot remove replica", "partition", tp, "err", err)
			}
		}
	}
	b.publishApplied(im)
	if startup {
		// Replicas of topics deleted while this broker was down.
		onDisk, err := b.parts.OnDisk()
		if err != nil {
			b.lg.Error("cannot list log dir", "err", err)
			return
		}
		for _, tp := range onDisk {
			if !want[tp] && im.Topic(tp.Topic) == nil {
				b.lg.Info("removing replica of a deleted topic", "partition", tp)
				if err := b.parts.RemoveDir(tp); err != nil {
					b.lg.Error("cannot remove replica", "partition", tp, "err", err)
				}
			}
		}
	}
}

// Close stops following metadata and closes every replica cleanly.
func (b *Broker) Close() error {
	return b.parts.Close()
}

// SettingsFor resolves a topic's configs into what its partitions act on.
func SettingsFor(configs map[string]string, defaults topicconfig.BrokerDefaults) partition.Settings {
	r := topicconfig.Resolve(configs, defaults)
	s := partition.Settings{
		MinInsyncReplicas:  int(r.Int32(topicconfig.MinInsyncReplicas)),
		LogAppendTime:      r.String(topicconfig.MessageTimestampType) == "LogAppendTime",
		Codec:              -1,
		MaxTimestampDiffMs: r.Int64(topicconfig.MessageTimestampDiffMaxMs),
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
	return cfg
}
