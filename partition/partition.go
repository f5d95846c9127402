package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
)

// Role is what this broker does for a partition.
type Role int32

const (
	// RoleNone: the replica exists on disk but this broker neither leads nor follows
	// (its broker is fenced, or the partition has no leader).
	RoleNone Role = iota
	RoleLeader
	RoleFollower
)

// State is the controller-committed state of a partition as this replica last applied it.
type State struct {
	Role           Role
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// Partition is one replica of one partition on this broker.
type Partition struct {
	topic string
	index int32
	dir   string
	log   *shalelog.Log
	lg    *slog.Logger

	// mu serializes appends, truncation and state changes; reads do not take it.
	mu        sync.Mutex
	producers *producerState
	epochs    epochCache
	state     State
	cfg       Settings

	hw          atomic.Int64
	leaderEpoch atomic.Int32
	role        atomic.Int32

	// waitMu guards waitCh, made when a fetch parks and closed (then dropped) when data or
	// the high watermark advances, so an append with nobody waiting allocates nothing.
	waitMu sync.Mutex
	waitCh chan struct{}
}

// Settings are the topic-level settings a partition acts on besides storage.
type Settings struct {
	Log                shalelog.Config
	MinInsyncReplicas  int
	LogAppendTime      bool
	Codec              int   // compression.type as a codec; -1 keeps the producer's
	MaxTimestampDiffMs int64 // message.timestamp.difference.max.ms; <= 0 disables
}

// open opens (or creates) the replica's log at dir and rebuilds its in-memory state.
func open(topic string, index int32, dir string, cfg Settings, lg *slog.Logger) (*Partition, error) {
	l, err := shalelog.Open(dir, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("open log of %s-%d: %w", topic, index, err)
	}
	p := &Partition{
		topic:     topic,
		index:     index,
		dir:       dir,
		log:       l,
		lg:        lg.With("topic", topic, "partition", index),
		producers: newProducerState(),
		cfg:       cfg,
	}
	p.leaderEpoch.Store(-1)
	if err := p.rebuild(); err != nil {
		l.Close()
		return nil, err
	}
	// A lone replica's high watermark is its log end; with replication the leader
	// recomputes it from the followers before serving consumers.
	p.hw.Store(l.EndOffset())
	return p, nil
}

// rebuild restores the epoch cache and producer state from the batch headers, starting
// the producer replay at the clean-shutdown snapshot when there is one.
func (p *Partition) rebuild() error {
	from := p.producers.load(p.dir)
	if from > p.log.EndOffset() || from < 0 {
		p.producers = newProducerState()
		from = 0
	}
	err := p.log.ScanHeaders(p.log.StartOffset(), func(h shalelog.Header) bool {
		p.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		if h.BaseOffset >= from {
			p.producers.record(h)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("rebuild state of %s-%d: %w", p.topic, p.index, err)
	}
	p.producers.removeBefore(p.log.StartOffset())
	return nil
}

// Topic and Index name the partition.
func (p *Partition) Topic() string { return p.topic }
func (p *Partition) Index() int32  { return p.index }

// HighWatermark is the offset below which records are committed and visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LogEndOffset is the offset the next appended record gets.
func (p *Partition) LogEndOffset() int64 { return p.log.EndOffset() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.StartOffset() }

// LeaderEpoch is the leader epoch this replica last learned.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// Role is this replica's current role.
func (p *Partition) Role() Role { return Role(p.role.Load()) }

// Size is the bytes this replica's log holds.
func (p *Partition) Size() int64 { return p.log.Size() }

// State returns the committed state this replica last applied.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state
	s.Replicas = append([]int32(nil), s.Replicas...)
	s.ISR = append([]int32(nil), s.ISR...)
	return s
}

// Settings returns the partition's topic settings.
func (p *Partition) Settings() Settings {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// ApplyState installs controller-committed state (leadership, epochs, ISR).
func (p *Partition) ApplyState(s State) {
	p.mu.Lock()
	p.state = s
	p.leaderEpoch.Store(s.LeaderEpoch)
	p.role.Store(int32(s.Role))
	if s.Role == RoleLeader && len(s.Replicas) <= 1 {
		p.hw.Store(p.log.EndOffset())
	}
	p.mu.Unlock()
	p.wake()
}

// ApplySettings installs changed topic configs.
func (p *Partition) ApplySettings(cfg Settings) {
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	p.log.SetConfig(cfg.Log)
}

// AppendResult says where a produced batch went.
type AppendResult struct {
	BaseOffset    int64
	LastOffset    int64
	LogAppendTime int64 // -1 unless the topic uses LogAppendTime
	// Duplicate is set when the batch was a retry of one already in the log; the offsets
	// are the original batch's.
	Duplicate bool
}

// ErrNotLeader means this replica cannot take writes (Kafka NOT_LEADER_OR_FOLLOWER).
var ErrNotLeader = fmt.Errorf("%w: this broker does not lead the partition", kerr.NotLeaderForPartition)

// AppendAsLeader appends one validated RecordBatch (offsets are assigned here). batch may
// be modified in place (base offset, leader epoch, append time); it is copied into the log.
func (p *Partition) AppendAsLeader(batch []byte, h shalelog.Header) (AppendResult, error) {
	p.mu.Lock()
	if p.Role() != RoleLeader {
		p.mu.Unlock()
		return AppendResult{}, ErrNotLeader
	}
	res, err := p.appendLocked(batch, h)
	if err == nil && len(p.state.ISR) <= 1 {
		p.hw.Store(p.log.EndOffset())
	}
	p.mu.Unlock()
	if err == nil {
		p.wake()
	}
	return res, err
}

func (p *Partition) appendLocked(batch []byte, h shalelog.Header) (AppendResult, error) {
	if err := p.producers.check(h); err != nil {
		var dup *errDuplicate
		if errors.As(err, &dup) {
			return AppendResult{BaseOffset: dup.meta.BaseOffset, LastOffset: dup.meta.LastOffset, LogAppendTime: -1, Duplicate: true}, nil
		}
		return AppendResult{}, err
	}
	res := AppendResult{LogAppendTime: -1}
	if p.cfg.LogAppendTime {
		res.LogAppendTime = time.Now().UnixMilli()
		shalelog.SetLogAppendTime(batch, res.LogAppendTime)
	}
	epoch := p.leaderEpoch.Load()
	info, err := p.log.Append(batch, epoch)
	if err != nil {
		return AppendResult{}, err
	}
	h.BaseOffset = info.BaseOffset
	h.PartitionLeaderEpoch = epoch
	p.epochs.assign(epoch, info.BaseOffset)
	p.producers.record(h)
	res.BaseOffset, res.LastOffset = info.BaseOffset, info.LastOffset
	return res, nil
}

// AppendAsFollower appends batches fetched from the leader, keeping their offsets.
func (p *Partition) AppendAsFollower(batches [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range batches {
		h, err := shalelog.ParseHeader(b)
		if err != nil {
			return err
		}
		if h.BaseOffset < p.log.EndOffset() {
			continue // already have it (a retried fetch)
		}
		if _, err := p.log.AppendReplica(b); err != nil {
			return err
		}
		p.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		p.producers.record(h)
	}
	return nil
}

// SetHighWatermark moves the high watermark (replication decides it). It never moves
// past the log end.
func (p *Partition) SetHighWatermark(hw int64) {
	hw = min(hw, p.log.EndOffset())
	for {
		cur := p.hw.Load()
		if hw == cur {
			return
		}
		if p.hw.CompareAndSwap(cur, hw) {
			break
		}
	}
	p.wake()
}

// Read returns batches from offset for a consumer (up to the high watermark) or a
// follower (up to the log end).
func (p *Partition) Read(offset int64, maxBytes int, toLogEnd, minOne bool) (*shalelog.View, error) {
	limit := p.hw.Load()
	if toLogEnd {
		limit = p.log.EndOffset()
	}
	if offset > limit && offset <= p.log.EndOffset() {
		// Between HW and LEO: nothing visible yet, not out of range.
		return &shalelog.View{FirstOffset: offset}, nil
	}
	return p.log.Read(offset, maxBytes, limit, minOne)
}

// Waiter returns a channel closed at the next append or high-watermark change.
func (p *Partition) Waiter() <-chan struct{} {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if p.waitCh == nil {
		p.waitCh = make(chan struct{})
	}
	return p.waitCh
}

func (p *Partition) wake() {
	p.waitMu.Lock()
	if p.waitCh != nil {
		close(p.waitCh)
		p.waitCh = nil
	}
	p.waitMu.Unlock()
}

// OffsetForTimestamp finds the first batch with a timestamp at or after ts; the caller
// refines it to a record.
func (p *Partition) OffsetForTimestamp(ts int64) (int64, bool, error) {
	return p.log.OffsetForTimestamp(ts)
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epochs.endOffsetFor(epoch, p.log.EndOffset())
}

// Truncate removes everything at and after offset (a follower diverged from its leader).
func (p *Partition) Truncate(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := removeSnapshot(p.dir); err != nil {
		return err
	}
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	end := p.log.EndOffset()
	p.epochs.truncateFrom(end)
	p.producers.truncateFrom(end)
	if p.hw.Load() > end {
		p.hw.Store(end)
	}
	return nil
}

// DeleteRecordsBefore advances the log start offset (Kafka's DeleteRecords). offset -1
// means the high watermark. It returns the new log start offset.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, fmt.Errorf("%w: offset %d is outside [%d, %d]", kerr.OffsetOutOfRange, offset, p.log.StartOffset(), hw)
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		return 0, err
	}
	start := p.log.StartOffset()
	p.epochs.truncateBefore(start)
	p.producers.removeBefore(start)
	return start, nil
}

// EnforceRetention deletes old segments by the topic's retention settings.
func (p *Partition) EnforceRetention() error {
	n, err := p.log.EnforceRetention()
	if err != nil {
		return err
	}
	if n > 0 {
		p.mu.Lock()
		start := p.log.StartOffset()
		p.epochs.truncateBefore(start)
		p.producers.removeBefore(start)
		p.mu.Unlock()
		p.lg.Debug("retention deleted segments", "segments", n, "log_start_offset", start)
	}
	return nil
}

// Flush forces the log to disk.
func (p *Partition) Flush() error { return p.log.Flush() }

// close shuts the replica down cleanly, leaving a producer snapshot for a fast reopen.
func (p *Partition) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	snapErr := p.producers.save(p.dir, p.log.EndOffset())
	if err := p.log.Close(); err != nil {
		return err
	}
	return snapErr
}

// delete closes the replica and removes its files (topic deletion).
func (p *Partition) delete() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Delete()
}

// ScanHeaders walks the batch headers from the batch holding offset onward.
func (p *Partition) ScanHeaders(from int64, fn func(h shalelog.Header) bool) error {
	return p.log.ScanHeaders(from, fn)
}
