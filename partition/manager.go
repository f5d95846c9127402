package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic string
	Index int32
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Index)) }

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Dir is the log directory (log.dirs); each replica lives in Dir/<topic>-<partition>.
	Dir string
	// RetentionCheckInterval is log.retention.check.interval.ms (default 5 minutes).
	RetentionCheckInterval time.Duration
	Logger                 *slog.Logger
}

// Manager owns every partition replica on this broker.
type Manager struct {
	cfg ManagerConfig
	lg  *slog.Logger

	mu    sync.RWMutex
	parts map[TopicPartition]*Partition

	stop chan struct{}
	done chan struct{}
}

// NewManager creates the log directory if needed and starts the retention loop.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	m := &Manager{
		cfg:   cfg,
		lg:    cfg.Logger,
		parts: make(map[TopicPartition]*Partition),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go m.retentionLoop()
	return m, nil
}

// Get returns a replica this broker holds, or nil.
func (m *Manager) Get(topic string, index int32) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[TopicPartition{topic, index}]
}

// All returns every replica, in no particular order.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}

// Open returns the replica, opening or creating its log on first use.
func (m *Manager) Open(topic string, index int32, cfg Settings) (*Partition, error) {
	tp := TopicPartition{topic, index}
	m.mu.RLock()
	p := m.parts[tp]
	m.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parts[tp]; p != nil {
		return p, nil
	}
	p, err := open(topic, index, filepath.Join(m.cfg.Dir, tp.String()), cfg, m.lg)
	if err != nil {
		return nil, err
	}
	m.parts[tp] = p
	return p, nil
}

// Remove deletes a replica and its files (the topic was deleted or the replica moved).
func (m *Manager) Remove(topic string, index int32) error {
	tp := TopicPartition{topic, index}
	m.mu.Lock()
	p := m.parts[tp]
	delete(m.parts, tp)
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.delete()
}

// OnDisk lists the replica directories in the log dir, held open or not, so that the
// broker can remove those of topics deleted while it was down.
func (m *Manager) OnDisk() ([]TopicPartition, error) {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("list log dir: %w", err)
	}
	var out []TopicPartition
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		n, err := strconv.ParseInt(name[i+1:], 10, 32)
		if err != nil || n < 0 {
			continue
		}
		out = append(out, TopicPartition{name[:i], int32(n)})
	}
	return out, nil
}

// RemoveDir removes a replica directory that is not open.
func (m *Manager) RemoveDir(tp TopicPartition) error {
	if m.Get(tp.Topic, tp.Index) != nil {
		return m.Remove(tp.Topic, tp.Index)
	}
	return os.RemoveAll(filepath.Join(m.cfg.Dir, tp.String()))
}

func (m *Manager) retentionLoop() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.EnforceRetention(context.Background())
		}
	}
}

// EnforceRetention applies every replica's retention settings now.
func (m *Manager) EnforceRetention(ctx context.Context) {
	for _, p := range m.All() {
		if ctx.Err() != nil {
			return
		}
		if err := p.EnforceRetention(); err != nil {
			m.lg.Warn("retention failed", "partition", TopicPartition{p.topic, p.index}, "err", err)
		}
	}
}

// Close stops the retention loop and closes every replica cleanly.
func (m *Manager) Close() error {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	parts := m.parts
	m.parts = map[TopicPartition]*Partition{}
	m.mu.Unlock()
	var errs []error
	for tp, p := range parts {
		if err := p.close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", tp, err))
		}
	}
	return errors.Join(errs...)
}
