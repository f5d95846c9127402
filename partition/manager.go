package partition

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	shalelog "github.com/shalelog/shale/log"
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
	// NodeID is this broker's id, to tell its own replica from its followers.
	NodeID int32
	// RetentionCheckInterval is log.retention.check.interval.ms (default 5 minutes).
	RetentionCheckInterval time.Duration
	// HWCheckpointInterval is replica.high.watermark.checkpoint.interval.ms (default 5 s).
	HWCheckpointInterval time.Duration
	// FileDeleteDelay is file.delete.delay.ms: how long a replica directory set aside
	// (deleted topic, stale topic id) stays before it is removed (default 60 s).
	FileDeleteDelay time.Duration
	// RecoveryThreads is num.recovery.threads.per.data.dir: how many replicas OpenAll
	// opens at once (default DefaultRecoveryThreads).
	RecoveryThreads int
	// MaxMappedSegments is log.mapped.segments.max: how many sealed segments of all the
	// replicas may be mapped at once (default shalelog.DefaultMaxMappedSegments).
	MaxMappedSegments int
	// CleanerThreads is log.cleaner.threads (default 1): goroutines compacting the
	// replicas of topics with cleanup.policy=compact, each with a key map of
	// CleanerDedupeBufferSize / CleanerThreads bytes (log.cleaner.dedupe.buffer.size,
	// default 128 MiB), all together reading and writing at most
	// CleanerIOMaxBytesPerSecond (log.cleaner.io.max.bytes.per.second, default no
	// limit). They look for work every CleanerBackoff (log.cleaner.backoff.ms, 15 s).
	// CleanerDisabled is !log.cleaner.enable: no cleaner thread runs.
	CleanerDisabled            bool
	CleanerThreads             int
	CleanerDedupeBufferSize    int64
	CleanerIOMaxBytesPerSecond float64
	CleanerBackoff             time.Duration
	Logger                     *slog.Logger
	// Driven starts no background loop and no cleaner: the caller enforces retention
	// and checkpoints high watermarks itself (the deterministic simulation).
	Driven bool
	// DiskFaults, when set, injects disk faults into every replica's log (tests and
	// the simulation's power cuts; see log.Faults). Nil in production.
	DiskFaults *shalelog.Faults
	// LogBackground runs every replica log's deferred work (log.Config.Background); nil
	// gives each log its own goroutine.
	LogBackground shalelog.Background
}

// DefaultRecoveryThreads is Shale's default for num.recovery.threads.per.data.dir. Kafka's
// is 1; opening a replica after a clean shutdown is a few blocking file-system calls
// (open, stat, ftruncate, mmap, reading checkpoints) with little CPU, so several in
// flight overlap their waits even on one core, and after an unclean shutdown the scans
// of the unflushed tails use every core there is.
const DefaultRecoveryThreads = 8

// Manager owns every partition replica on this broker's log directory.
type Manager struct {
	cfg ManagerConfig
	lg  *slog.Logger

	mu    sync.RWMutex
	parts map[TopicPartition]*Partition
	// opening holds the replicas being opened, outside mu, so that traffic to the open
	// ones never waits behind an open; a second Open of the same replica waits for the
	// first, and Remove and Close wait for it to finish.
	opening map[TopicPartition]*openCall
	wg      sync.WaitGroup // in-flight opens, for Close
	closing bool
	maps    *shalelog.MapCache
	// hwAtStart is the high-watermark checkpoint read at startup, for replicas opened later.
	hwAtStart map[TopicPartition]int64
	// cpMu serializes checkpoint writes.
	cpMu sync.Mutex

	cleaners *cleaners

	stop chan struct{}
	done chan struct{}
}

// deleteSuffix marks a replica directory set aside for deletion, as Kafka's "-delete".
const deleteSuffix = "-delete"

// NewManager creates the log directory if needed, reads the high-watermark checkpoint and
// starts the retention, checkpoint and cleanup loop.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = 5 * time.Minute
	}
	if cfg.HWCheckpointInterval <= 0 {
		cfg.HWCheckpointInterval = 5 * time.Second
	}
	if cfg.FileDeleteDelay <= 0 {
		cfg.FileDeleteDelay = time.Minute
	}
	if cfg.RecoveryThreads <= 0 {
		cfg.RecoveryThreads = DefaultRecoveryThreads
	}
	if cfg.MaxMappedSegments <= 0 {
		cfg.MaxMappedSegments = shalelog.DefaultMaxMappedSegments
	}
	if cfg.CleanerThreads <= 0 {
		cfg.CleanerThreads = 1
	}
	if cfg.CleanerDedupeBufferSize <= 0 {
		cfg.CleanerDedupeBufferSize = 128 << 20
	}
	if cfg.CleanerBackoff <= 0 {
		cfg.CleanerBackoff = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	hws := map[TopicPartition]int64{}
	if b, err := os.ReadFile(filepath.Join(cfg.Dir, hwCheckpointFile)); err == nil {
		if hws, err = decodeHighWatermarks(b); err != nil {
			// Safe to lose: every high watermark restarts at 0 and is raised again by
			// the leaders; nothing uncommitted becomes visible.
			cfg.Logger.Warn("ignoring an unreadable replication-offset-checkpoint", "err", err)
			hws = map[TopicPartition]int64{}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", hwCheckpointFile, err)
	}
	m := &Manager{
		cfg:       cfg,
		lg:        cfg.Logger,
		parts:     make(map[TopicPartition]*Partition),
		opening:   make(map[TopicPartition]*openCall),
		maps:      shalelog.NewMapCache(cfg.MaxMappedSegments),
		hwAtStart: hws,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if cfg.Driven {
		close(m.done)
		return m, nil
	}
	go m.loop()
	m.startCleaners()
	return m, nil
}

// Get returns a replica this broker holds, or nil.
func (m *Manager) Get(topic string, index int32) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[TopicPartition{topic, index}]
}

// All returns every replica, in topic and partition order, so that work done over them
// (ISR checks, retention) happens in the same order every time.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Partition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.index, b.index))
	})
	return out
}

// openCall is one replica being opened.
type openCall struct {
	done chan struct{}
	p    *Partition
	err  error
}

// errManagerClosed: an Open raced with Close.
var errManagerClosed = errors.New("replica manager is closed")

// Open returns the replica, opening or creating its log on first use. A directory that
// holds another topic id (a topic of the same name deleted while this broker was away)
// is set aside for deletion and the replica starts empty. The open runs outside the
// manager's lock: replicas already open keep serving meanwhile.
func (m *Manager) Open(topic string, topicID [16]byte, index int32, cfg Settings) (*Partition, error) {
	tp := TopicPartition{topic, index}
	for {
		m.mu.RLock()
		p := m.parts[tp]
		m.mu.RUnlock()
		if p != nil {
			if p.topicID != topicID && topicID != ([16]byte{}) {
				return nil, fmt.Errorf("%w: %s is open for topic id %x", ErrTopicIDMismatch, tp, p.topicID)
			}
			return p, nil
		}
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			return nil, errManagerClosed
		}
		if p := m.parts[tp]; p != nil {
			m.mu.Unlock()
			continue // check the topic id above
		}
		if c := m.opening[tp]; c != nil {
			m.mu.Unlock()
			<-c.done
			if c.err != nil {
				return nil, c.err
			}
			continue
		}
		c := &openCall{done: make(chan struct{})}
		m.opening[tp] = c
		hw, ok := m.hwAtStart[tp]
		if !ok {
			hw = -1
		}
		m.wg.Add(1)
		m.mu.Unlock()

		c.p, c.err = m.openReplica(tp, topicID, hw, cfg)
		m.mu.Lock()
		delete(m.opening, tp)
		if c.err == nil {
			m.parts[tp] = c.p
		}
		m.mu.Unlock()
		close(c.done)
		m.wg.Done()
		return c.p, c.err
	}
}

func (m *Manager) openReplica(tp TopicPartition, topicID [16]byte, hw int64, cfg Settings) (*Partition, error) {
	dir := filepath.Join(m.cfg.Dir, tp.String())
	cfg.Log.Maps = m.maps
	cfg.Log.Faults = m.cfg.DiskFaults
	cfg.Log.Background = m.cfg.LogBackground
	p, err := open(tp.Topic, topicID, tp.Index, m.cfg.NodeID, dir, hw, cfg, m.lg)
	if errors.Is(err, ErrTopicIDMismatch) {
		m.lg.Warn("replica directory belongs to an older topic of the same name; setting it aside", "partition", tp, "err", err)
		if err := m.setAside(tp); err != nil {
			return nil, err
		}
		m.mu.Lock()
		delete(m.hwAtStart, tp)
		m.mu.Unlock()
		p, err = open(tp.Topic, topicID, tp.Index, m.cfg.NodeID, dir, -1, cfg, m.lg)
	}
	return p, err
}

// OpenRequest names a replica for OpenAll.
type OpenRequest struct {
	Topic    string
	TopicID  [16]byte
	Index    int32
	Settings Settings
}

// OpenResult is what OpenAll did with one request.
type OpenResult struct {
	Partition *Partition
	Err       error
}

// OpenAll opens the replicas with num.recovery.threads.per.data.dir of them in flight at
// once, as a broker does at startup, and returns one result per request, in order.
func (m *Manager) OpenAll(reqs []OpenRequest) []OpenResult {
	out := make([]OpenResult, len(reqs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(m.cfg.RecoveryThreads, len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := reqs[i]
				p, err := m.Open(r.Topic, r.TopicID, r.Index, r.Settings)
				out[i] = OpenResult{Partition: p, Err: err}
			}
		}()
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// MappedSegments is how many sealed segments are mapped now, across every replica.
func (m *Manager) MappedSegments() int { return m.maps.Mapped() }

// setAside renames a replica directory to <name>.<random>-delete; the cleanup loop removes
// it after file.delete.delay.ms. Renaming is atomic, so a crash leaves the directory
// either in place or set aside, never half deleted under its live name.
func (m *Manager) setAside(tp TopicPartition) error {
	var r [8]byte
	_, _ = rand.Read(r[:])
	src := filepath.Join(m.cfg.Dir, tp.String())
	dst := filepath.Join(m.cfg.Dir, tp.String()+"."+hex.EncodeToString(r[:])+deleteSuffix)
	if err := os.Rename(src, dst); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("set aside %s: %w", src, err)
	}
	return syncDir(m.cfg.Dir)
}

// Remove closes a replica and sets its directory aside for deletion (its topic was deleted
// or the replica moved away).
func (m *Manager) Remove(topic string, index int32) error {
	tp := TopicPartition{topic, index}
	m.mu.Lock()
	for m.opening[tp] != nil {
		// Never rename a directory that is being opened.
		c := m.opening[tp]
		m.mu.Unlock()
		<-c.done
		m.mu.Lock()
	}
	p := m.parts[tp]
	delete(m.parts, tp)
	delete(m.hwAtStart, tp)
	m.mu.Unlock()
	if p != nil {
		if err := p.close(); err != nil {
			m.lg.Warn("closing a removed replica", "partition", tp, "err", err)
		}
	}
	return m.setAside(tp)
}

// OnDisk lists the replica directories in the log dir, held open or not, so that the
// broker can set aside those of topics deleted while it was down.
func (m *Manager) OnDisk() ([]TopicPartition, error) {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("list log dir: %w", err)
	}
	var out []TopicPartition
	for _, e := range entries {
		if tp, ok := parseReplicaDir(e); ok {
			out = append(out, tp)
		}
	}
	return out, nil
}

func parseReplicaDir(e os.DirEntry) (TopicPartition, bool) {
	name := e.Name()
	if !e.IsDir() || strings.HasSuffix(name, deleteSuffix) || strings.HasPrefix(name, "__cluster_metadata") {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{name[:i], int32(n)}, true
}

// RemoveDir sets aside a replica directory (closing the replica first when it is open).
func (m *Manager) RemoveDir(tp TopicPartition) error { return m.Remove(tp.Topic, tp.Index) }

func (m *Manager) loop() {
	defer close(m.done)
	retention := time.NewTicker(m.cfg.RetentionCheckInterval)
	defer retention.Stop()
	checkpoint := time.NewTicker(m.cfg.HWCheckpointInterval)
	defer checkpoint.Stop()
	cleanup := time.NewTicker(max(m.cfg.FileDeleteDelay/4, time.Second))
	defer cleanup.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-retention.C:
			m.EnforceRetention(context.Background())
		case <-checkpoint.C:
			if err := m.CheckpointHighWatermarks(); err != nil {
				m.lg.Warn("high watermark checkpoint failed", "err", err)
			}
		case <-cleanup.C:
			m.removeSetAside(time.Now())
		}
	}
}

// removeSetAside deletes directories set aside longer ago than file.delete.delay.ms.
func (m *Manager) removeSetAside(now time.Time) {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), deleteSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < m.cfg.FileDeleteDelay {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.cfg.Dir, e.Name())); err != nil {
			m.lg.Warn("cannot remove a replica directory set aside", "dir", e.Name(), "err", err)
		}
	}
}

// CheckpointHighWatermarks writes every open replica's high watermark to the log
// directory's replication-offset-checkpoint. Replicas opened at startup but not yet
// reopened keep their checkpointed value.
func (m *Manager) CheckpointHighWatermarks() error {
	m.cpMu.Lock()
	defer m.cpMu.Unlock()
	m.mu.RLock()
	hws := make(map[TopicPartition]int64, len(m.parts)+len(m.hwAtStart))
	for tp, hw := range m.hwAtStart {
		hws[tp] = hw
	}
	for tp, p := range m.parts {
		hws[tp] = p.HighWatermark()
	}
	m.mu.RUnlock()
	return writeFileAtomic(filepath.Join(m.cfg.Dir, hwCheckpointFile), encodeHighWatermarks(hws))
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

// Crash releases every replica as a killed process would: no high-watermark checkpoint,
// no producer snapshot, no clean-shutdown marker, nothing synced. What was written stays
// as the page cache holds it (the simulation's crash of a process; a power cut after it
// is log.Faults.PowerLoss).
func (m *Manager) Crash() {
	close(m.stop)
	<-m.done
	if m.cleaners != nil {
		m.cleaners.wg.Wait()
	}
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	m.wg.Wait()
	m.mu.Lock()
	parts := m.parts
	m.parts = map[TopicPartition]*Partition{}
	m.mu.Unlock()
	for _, p := range parts {
		p.role.Store(int32(RoleNone))
		p.log.Abandon()
		p.wakeChanged()
	}
}

// Close stops the background loop, checkpoints the high watermarks and closes every
// replica cleanly.
func (m *Manager) Close() error {
	close(m.stop)
	<-m.done
	if m.cleaners != nil {
		m.cleaners.wg.Wait()
	}
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	m.wg.Wait() // opens in flight finish and are closed with the rest
	var errs []error
	if err := m.CheckpointHighWatermarks(); err != nil {
		errs = append(errs, err)
	}
	m.mu.Lock()
	parts := m.parts
	m.parts = map[TopicPartition]*Partition{}
	m.mu.Unlock()
	for tp, p := range parts {
		if err := p.close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", tp, err))
		}
	}
	return errors.Join(errs...)
}
