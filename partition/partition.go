package partition

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
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

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// State is the controller-committed state of a partition as this replica last applied it.
type State struct {
	Role           Role
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// Mirror: the partition belongs to an active mirror topic (mirror.go). Its leader
	// takes batches only through AppendMirrored, keeping the source's offsets and leader
	// epochs, and records no epoch of its own when it becomes leader.
	Mirror bool
}

// Partition is one replica of one partition on this broker.
type Partition struct {
	topic   string
	topicID [16]byte
	index   int32
	nodeID  int32
	dir     string
	log     *shalelog.Log
	lg      *slog.Logger

	// mu serializes appends, truncation, role and ISR changes, and the leader's view of
	// its followers; reads of the log do not take it.
	mu        sync.Mutex
	producers *producerState
	// rollSnaps are the base offsets of the local segments with a roll snapshot file,
	// ascending: for a Tiered partition, the producer state as of the segment's base,
	// uploaded with the segment before (tiered.go).
	rollSnaps []int64
	epochs    epochCache
	// savedEpochs is what the leader-epoch-checkpoint holds, so that close rewrites it
	// only when a save failed since.
	savedEpochs []epochEntry
	state       State
	cfg         Settings
	// Leader only: what each follower has fetched, and the ISR proposed to the controller
	// and not yet seen committed (nil when none is in flight).
	followers  map[int32]*followerState
	pendingISR []int32
	// isrRetryAt holds back the next ISR proposal after the controller refused one (a
	// follower in controlled shutdown, say), so a refused change is not resent on every
	// fetch.
	isrRetryAt time.Time
	// epochStart is the log end offset when this replica became leader of its current
	// epoch: a follower is caught up only once it has reached it.
	epochStart int64

	hw          atomic.Int64
	leaderEpoch atomic.Int32
	// partitionEpoch mirrors state.PartitionEpoch for the follower's fetch, which sends
	// it on every request without taking mu.
	partitionEpoch atomic.Int32
	// txnActive is set while a transaction is open or its marker uncommitted, so that
	// the last stable offset of a partition without transactions needs no lock.
	txnActive atomic.Bool
	role      atomic.Int32
	// offline holds the error that took the replica offline (see failLocked); nil while
	// it serves. Stored once, under mu; loaded without it.
	offline atomic.Pointer[error]

	// waitMu guards waitCh, made when a fetch parks and closed (then dropped) when data or
	// the high watermark advances, so an append with nobody waiting allocates nothing.
	waitMu sync.Mutex
	waitCh chan struct{}
	// Beside the waiter, so that a woken long poll can tell whether reading again could
	// answer it (visible.go): batch bytes that passed the log end and the high
	// watermark, and a generation for every other change a fetch must read again for.
	// pending, pendingHead and pendingFrom (under mu) are the leader's batches the high
	// watermark has not passed, and the offset from which it appended them itself.
	visGen         atomic.Uint64
	appendedBytes  atomic.Int64
	committedBytes atomic.Int64
	pending        []pendingBatch
	pendingHead    int
	pendingFrom    int64

	cleanerInfo cleanerInfo
	// remoteEnd is where the remote log's coverage ends, for a Tiered partition: no
	// local segment reaching it is deleted by retention (tiered.go).
	remoteEnd atomic.Int64

	// durable mirrors cfg.durableAcks() for readers without mu (the follower's fetcher).
	durable atomic.Bool
	// flushMu guards flushCh, closed (then dropped) when the log's flushed offset moves
	// or its group commit fails: a follower waits on it before it fetches again.
	flushMu sync.Mutex
	flushCh chan struct{}

	// beforeHWLoad, when set (by tests only), runs in ReplicationDone just before it
	// loads the high watermark: it stands in for the role changes, truncation and
	// follower high-watermark updates that may land there.
	beforeHWLoad func()
}

// Settings are the topic-level settings a partition acts on besides storage.
type Settings struct {
	Log                shalelog.Config
	MinInsyncReplicas  int
	LogAppendTime      bool
	Codec              int   // compression.type as a codec; -1 keeps the producer's
	MaxTimestampDiffMs int64 // message.timestamp.difference.max.ms; <= 0 disables
	Compaction         Compaction
	// SchemaIDs is Confluent Server's broker-side schema ID validation
	// (confluent.{key,value}.schema.validation and their subject name strategies).
	SchemaIDs records.SchemaIDPolicy
	// Tiered is remote.storage.enable (tiered storage): Log's retention is then
	// local.retention.*, and a segment is deleted locally only once the remote log holds
	// it (SetRemoteEnd).
	Tiered bool
	// AcksAllFsync is Shale's acks.all.fsync: the high watermark, and so every acks=all
	// answer and every consumer read, stays below what each ISR member has fsynced.
	AcksAllFsync bool
}

// durableAcks reports whether the high watermark waits for fsyncs: under acks.all.fsync,
// and under flush.messages=1, whose promise (every acknowledged record is on disk) the
// group commit keeps without an fsync in each append.
func (s Settings) durableAcks() bool { return s.AcksAllFsync || s.Log.FlushMessages == 1 }

// open opens (or creates) the replica's log at dir and rebuilds its in-memory state. hw
// is the checkpointed high watermark, -1 when none was checkpointed.
func open(topic string, topicID [16]byte, index, nodeID int32, dir string, hw int64, cfg Settings, lg *slog.Logger) (*Partition, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// A new replica's directory entry is made durable before anything in it is
		// acknowledged: otherwise a power cut could take the whole replica, fsynced
		// segments and all.
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	if err := checkTopicID(dir, topicID); err != nil {
		return nil, err
	}
	l, err := shalelog.Open(dir, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("open log of %s-%d: %w", topic, index, err)
	}
	p := &Partition{
		topic:     topic,
		topicID:   topicID,
		index:     index,
		nodeID:    nodeID,
		dir:       dir,
		log:       l,
		lg:        lg.With("topic", topic, "partition", index),
		producers: newProducerState(),
		cfg:       cfg,
	}
	p.leaderEpoch.Store(-1)
	p.partitionEpoch.Store(-1)
	p.durable.Store(cfg.durableAcks())
	p.state.LeaderEpoch, p.state.PartitionEpoch, p.state.Leader = -1, -1, -1
	if err := p.rebuild(); err != nil {
		l.Close()
		return nil, err
	}
	// Only what was known replicated before the restart is visible; the leader raises it
	// again as its followers report their positions. Never below the log start, as
	// Kafka's UnifiedLog.updateHighWatermark clamps it: the log start only ever passed
	// committed offsets, and a checkpoint older than the deletion that moved it (a power
	// cut can take the checkpoint back to its last fsync while the deletion stays) must not
	// make the replica's high watermark trail what it no longer holds.
	p.hw.Store(min(max(hw, l.StartOffset()), l.EndOffset()))
	l.SetSyncListener(p.onSynced)
	return p, nil
}

// rebuild restores the epoch cache and producer state from what was saved beside the log
// and the batch headers the saved state may not cover. After a clean shutdown that is
// nothing: the leader-epoch-checkpoint is written before any batch of a new epoch is
// (by the leader when elected, by a follower before it appends) and the producer
// snapshot at close, so both are trusted and no segment is read. After an unclean one,
// the epochs are replayed from where the log's recovery started and the producers from
// their last snapshot (the whole log without one).
func (p *Partition) rebuild() error {
	start, end := p.log.StartOffset(), p.log.EndOffset()
	from := p.producers.load(p.dir)
	if from > end || from < 0 {
		p.producers = newProducerState()
		from = 0
	}
	epochFrom := p.log.RecoveredFrom()
	var saved []epochEntry
	b, err := os.ReadFile(filepath.Join(p.dir, epochCheckpointFile))
	switch {
	case err == nil:
		if saved, err = decodeEpochs(b); err != nil {
			p.lg.Warn("ignoring an unreadable leader-epoch-checkpoint; rebuilding it from the log", "err", err)
			saved, epochFrom = nil, start
		}
	case errors.Is(err, os.ErrNotExist):
		epochFrom = start // a replica from before the checkpoint existed, or a new one
	default:
		return fmt.Errorf("%w: read leader-epoch-checkpoint of %s-%d: %w", shalelog.ErrStorage, p.topic, p.index, err)
	}
	// Roll snapshots a crash lost (they are not synced) are written again as the replay
	// passes their segments' bases, with the state as of there.
	var missingSnaps map[int64]bool
	if p.cfg.Tiered {
		if err := p.loadRollSnaps(); err != nil {
			return err
		}
		missingSnaps = map[int64]bool{p.log.ActiveBaseOffset(): true}
		for _, s := range p.log.SealedSegments() {
			missingSnaps[s.BaseOffset] = true
		}
		for _, off := range p.rollSnaps {
			delete(missingSnaps, off)
		}
		// Without a producer snapshot as of the local log start or later, the replay
		// starts from the one of the first local segment: the state as of the log
		// start, with the producers whose batches are all remote.
		if from < start {
			if s, ok := p.rollSnapState(start); ok {
				p.producers, from = s, start
			}
		}
	}
	var scanned epochCache
	if from < end {
		// The aborts from there are indexed again as the replay meets their markers.
		if err := p.log.DropAbortedTxnsFrom(from); err != nil {
			return fmt.Errorf("rebuild state of %s-%d: %w", p.topic, p.index, err)
		}
	}
	if scanFrom := max(min(epochFrom, from), start); scanFrom < end {
		var replayErr error
		err := p.log.ScanHeaders(scanFrom, func(h shalelog.Header) bool {
			scanned.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			if h.BaseOffset >= from {
				if missingSnaps[h.BaseOffset] && h.BaseOffset > start {
					if err := p.writeRollSnapLocked(h.BaseOffset); err != nil {
						p.lg.Warn("writing a segment's producer snapshot again failed; the segment before is uploaded without it", "offset", h.BaseOffset, "err", err)
					}
				}
				replayErr = p.replayBatch(h, true)
			}
			return replayErr == nil
		})
		if err = cmp.Or(err, replayErr); err != nil {
			return fmt.Errorf("rebuild state of %s-%d: %w", p.topic, p.index, err)
		}
	}
	p.forgetProducersBeforeLocked(start, true)
	p.noteTxnsLocked()
	// The checkpoint knows epochs that began without a batch; the log knows epochs whose
	// checkpoint write a crash may have lost. Entries past the log end are gone with the
	// records they described.
	p.epochs.entries = slices.Clone(saved)
	p.epochs.truncateFrom(end + 1)
	for _, e := range scanned.entries {
		p.epochs.assign(e.Epoch, e.StartOffset)
	}
	p.epochs.truncateBefore(start)
	if slices.Equal(p.epochs.entries, saved) && saved != nil {
		p.savedEpochs = saved
		return nil // unchanged: a restart of thousands of replicas writes nothing here
	}
	return p.saveEpochsLocked()
}

func (p *Partition) saveEpochsLocked() error {
	if err := writeFileAtomic(filepath.Join(p.dir, epochCheckpointFile), encodeEpochs(p.epochs.entries)); err != nil {
		return fmt.Errorf("%w: leader-epoch-checkpoint of %s-%d: %w", shalelog.ErrStorage, p.topic, p.index, err)
	}
	p.savedEpochs = slices.Clone(p.epochs.entries)
	return nil
}

// assignEpochLocked records that epoch began at offset, persisting a new entry.
func (p *Partition) assignEpochLocked(epoch int32, offset int64) error {
	if epoch <= p.epochs.latest() {
		return nil
	}
	p.epochs.assign(epoch, offset)
	return p.saveEpochsLocked()
}

// Topic and Index name the partition.
func (p *Partition) Topic() string { return p.topic }
func (p *Partition) Index() int32  { return p.index }

// TopicID is the id of the topic this replica belongs to (zero when unknown).
func (p *Partition) TopicID() [16]byte { return p.topicID }

// HighWatermark is the offset below which records are committed and visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LogEndOffset is the offset the next appended record gets.
func (p *Partition) LogEndOffset() int64 { return p.log.EndOffset() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.StartOffset() }

// LeaderEpoch is the leader epoch this replica last learned.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// PartitionEpoch is the partition epoch of the state this replica last applied (-1
// before any). A follower sends it with its fetches: see FollowerFetched.
func (p *Partition) PartitionEpoch() int32 { return p.partitionEpoch.Load() }

// Role is this replica's current role.
func (p *Partition) Role() Role { return Role(p.role.Load()) }

// Size is the bytes this replica's log holds.
func (p *Partition) Size() int64 { return p.log.Size() }

// State returns the committed state this replica last applied.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state
	s.Replicas = slices.Clone(s.Replicas)
	s.ISR = slices.Clone(s.ISR)
	return s
}

// Settings returns the partition's topic settings.
func (p *Partition) Settings() Settings {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// ApplySettings installs changed topic configs.
func (p *Partition) ApplySettings(cfg Settings) {
	p.mu.Lock()
	p.cfg = cfg
	p.durable.Store(cfg.durableAcks())
	p.log.SetConfig(cfg.Log)
	// Turned off, the bound is lifted now; turned on, it applies from the next advance.
	moved := p.maybeAdvanceHWLocked()
	p.mu.Unlock()
	if moved {
		p.wake()
	}
}

// Transition says what ApplyState did.
type Transition int

const (
	// Stale: the state is older than what the replica has applied; nothing changed.
	Stale Transition = iota
	// Unchanged: same epochs and role; nothing to do.
	Unchanged
	// Updated: same leader epoch and role, new ISR or replicas (a newer partition epoch).
	Updated
	// NewEpoch: a new leader epoch or role.
	NewEpoch
)

// ApplyState installs controller-committed state. States are applied in epoch order and
// never backwards: one with an older leader epoch, or the same leader epoch and an older
// partition epoch, is refused as Stale. Becoming leader of a new epoch records the epoch
// at the log end and starts tracking the followers afresh.
func (p *Partition) ApplyState(s State, now time.Time) (Transition, error) {
	p.mu.Lock()
	defer p.wake()
	defer p.mu.Unlock()
	cur := p.state
	switch {
	case s.LeaderEpoch < cur.LeaderEpoch:
		return Stale, nil
	case s.LeaderEpoch == cur.LeaderEpoch && s.PartitionEpoch < cur.PartitionEpoch:
		return Stale, nil
	case s.LeaderEpoch == cur.LeaderEpoch && s.Role == cur.Role:
		if s.PartitionEpoch == cur.PartitionEpoch {
			return Unchanged, nil
		}
		// Role, epochs and ISR decide what a fetch answers: parked fetches read again
		// at their next wake-up whatever the bytes (deferred: once the change is made,
		// before the wake-up).
		defer p.bumpGen()
		p.state = s
		p.partitionEpoch.Store(s.PartitionEpoch)
		p.pendingISR = nil
		if s.Role == RoleLeader {
			p.resetFollowersLocked(now, false)
			p.maybeAdvanceHWLocked()
		}
		return Updated, nil
	}
	defer p.bumpGen() // as above
	p.state = s
	p.partitionEpoch.Store(s.PartitionEpoch)
	p.pendingISR = nil
	p.followers = nil
	if s.Role == RoleLeader && !s.Mirror {
		if err := p.assignEpochLocked(s.LeaderEpoch, p.log.EndOffset()); err != nil {
			// Not leading without the epoch on disk: a restart could not fence our writes.
			p.role.Store(int32(RoleNone))
			p.leaderEpoch.Store(s.LeaderEpoch)
			return NewEpoch, err
		}
	}
	if s.Role == RoleLeader {
		p.epochStart = p.log.EndOffset()
		p.resetPendingLocked()
		p.resetFollowersLocked(now, true)
	}
	p.leaderEpoch.Store(s.LeaderEpoch)
	p.role.Store(int32(s.Role))
	if s.Role == RoleLeader {
		p.maybeAdvanceHWLocked()
	}
	return NewEpoch, nil
}

// AppendResult says where a produced batch went.
type AppendResult struct {
	BaseOffset    int64
	LastOffset    int64
	LogAppendTime int64 // -1 unless the topic uses LogAppendTime
	// LeaderEpoch is the epoch the batch was appended in: an acks=all wait completes
	// only while the replica still leads in it.
	LeaderEpoch int32
	// Duplicate is set when the batch was a retry of one already in the log; the offsets
	// are the original batch's.
	Duplicate bool
}

// ErrNotLeader means this replica cannot take writes (Kafka NOT_LEADER_OR_FOLLOWER).
var ErrNotLeader = fmt.Errorf("%w: this broker does not lead the partition", kerr.NotLeaderForPartition)

// AppendAsLeader appends one validated RecordBatch (offsets are assigned here). batch may
// be modified in place (leader epoch, append time); it is copied into the log. With
// acks=-1 the ISR is checked against min.insync.replicas under the same lock as the
// append, so no ISR shrink can slip in between.
func (p *Partition) AppendAsLeader(batch []byte, h shalelog.Header, acks int16) (AppendResult, error) {
	p.mu.Lock()
	if err := p.offlineErr(); err != nil {
		p.mu.Unlock()
		return AppendResult{}, err
	}
	if p.Role() != RoleLeader {
		p.mu.Unlock()
		return AppendResult{}, ErrNotLeader
	}
	if p.state.Mirror {
		p.mu.Unlock()
		return AppendResult{}, ErrMirror
	}
	if acks == -1 && len(p.state.ISR) < p.cfg.MinInsyncReplicas {
		isr, want := len(p.state.ISR), p.cfg.MinInsyncReplicas
		p.mu.Unlock()
		return AppendResult{}, fmt.Errorf("%w: %d in-sync replicas, min.insync.replicas is %d", kerr.NotEnoughReplicas, isr, want)
	}
	res, err := p.appendLocked(batch, h)
	if err == nil {
		p.maybeAdvanceHWLocked()
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
			return AppendResult{BaseOffset: dup.meta.BaseOffset, LastOffset: dup.meta.LastOffset, LogAppendTime: -1, LeaderEpoch: p.state.LeaderEpoch, Duplicate: true}, nil
		}
		return AppendResult{}, err
	}
	res := AppendResult{LogAppendTime: -1}
	if p.cfg.LogAppendTime {
		res.LogAppendTime = time.Now().UnixMilli()
		shalelog.SetLogAppendTime(batch, res.LogAppendTime)
	}
	epoch := p.state.LeaderEpoch
	end := p.log.EndOffset()
	// The caller validated the batch (AppendAsLeader's contract), CRC included.
	info, err := p.log.AppendValidated(batch, epoch)
	if err != nil && p.log.EndOffset() == end {
		return AppendResult{}, err // nothing of the batch is in the log
	}
	// In the log, even if its flush failed: the producer state must know it, or the
	// producer's retry would be appended a second time.
	h.BaseOffset = info.BaseOffset
	h.PartitionLeaderEpoch = epoch
	p.noteAppendedLocked(info.BaseOffset, len(batch))
	p.snapshotAtRollLocked(info.BaseOffset)
	p.producers.record(h)
	if h.IsTransactional() {
		p.noteTxnsLocked()
	}
	if err != nil {
		return AppendResult{}, p.failLocked(err)
	}
	res.BaseOffset, res.LastOffset, res.LeaderEpoch = info.BaseOffset, info.LastOffset, epoch
	return res, nil
}

// failLocked takes the replica offline after its log took a batch and failed to make it
// durable (its group commit failed: see onSynced), and returns the error to
// answer with. The caller has already recorded the batch as appended (producer state,
// pending bytes), as the log holds it.
//
// This is Kafka's answer to a failed flush: a KafkaStorageException takes the log
// directory offline and its replicas stop serving. Retrying the fsync cannot be trusted
// (after a failed fsync the kernel may have dropped the dirty pages and report the next
// one as a success), so neither can this replica's log: from now on every append, read
// and acks=all wait on it fails with that error (KAFKA_STORAGE_ERROR), the producer's
// retry included, so the retry is never appended a second time here. The replica serves
// again once it is opened anew (a broker restart): recovery then decides from the disk
// what the log holds, and the producer state is rebuilt from that, so a retry of a batch
// that survived is a duplicate and one of a batch that was lost is appended once.
//
// Until then the controller is not told: the replica stays leader or follower in the
// metadata and its partition is unavailable for writes while it leads (Kafka's broker
// reports the offline directory and the controller moves leadership; Shale has no such
// report yet).
func (p *Partition) failLocked(err error) error {
	if p.offline.Load() == nil {
		off := fmt.Errorf("replica %s-%d is offline after a failed write to its log: %w", p.topic, p.index, err)
		p.offline.Store(&off)
		p.lg.Error("the log took a batch but could not flush it; the replica is offline until it is opened again", "err", err)
		p.wakeChanged() // parked fetches and acks=all waits get the error now
	}
	return p.offlineErr()
}

// offlineErr is the error that took the replica offline, nil while it serves. It wraps
// shalelog.ErrStorage (KAFKA_STORAGE_ERROR).
func (p *Partition) offlineErr() error {
	if e := p.offline.Load(); e != nil {
		return *e
	}
	return nil
}

// Offline reports whether a failed write took the replica offline (see failLocked).
func (p *Partition) Offline() bool { return p.offline.Load() != nil }

// ReplicationDone reports whether an acks=all batch ending at lastOffset, appended in
// leader epoch epoch, is committed. It fails with NOT_LEADER_OR_FOLLOWER once the replica
// no longer leads in that epoch (the batch may be truncated by the new leader), and with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the batch is committed but the ISR has shrunk
// below min.insync.replicas, as Kafka answers.
func (p *Partition) ReplicationDone(lastOffset int64, epoch int32) (bool, error) {
	// The high watermark is loaded first and the role and epoch checked after it, never
	// the other way round: checked first, the replica could lose the epoch in between,
	// truncate the batch as a new leader's follower and take that leader's high
	// watermark past lastOffset for other records, and the load would pass.
	//
	// In this order a high watermark that passes lastOffset is one this leadership
	// computed. While the replica leads in epoch, the high watermark is stored only by
	// its own maybeAdvanceHWLocked: the follower-side writers (SetFollowerHighWatermark,
	// TruncateTo, RestartAt) act only in RoleFollower, checked under mu, and ApplyState
	// changes the role under mu too. The atomics are sequentially consistent, so role and
	// epoch loaded after the high watermark and still saying "leader in epoch" mean the
	// replica led in epoch when the high watermark was loaded: an epoch once left is
	// never applied again (older epochs are Stale), and a fence in between (RoleNone at
	// the same epoch) writes no high watermark and truncates nothing. A value stored
	// before this leadership began is at most the log end then (epochStart), so it
	// cannot pass a batch appended in it.
	if p.beforeHWLoad != nil {
		p.beforeHWLoad()
	}
	hw := p.hw.Load()
	if p.Role() != RoleLeader || p.LeaderEpoch() != epoch {
		return false, fmt.Errorf("%w: leadership changed before the batch was replicated", kerr.NotLeaderForPartition)
	}
	if hw <= lastOffset {
		// An offline replica serves no follower fetch, so nothing more gets committed.
		return false, p.offlineErr()
	}
	p.mu.Lock()
	isr, want := len(p.state.ISR), p.cfg.MinInsyncReplicas
	p.mu.Unlock()
	if isr < want {
		return true, fmt.Errorf("%w: %d in-sync replicas, min.insync.replicas is %d", kerr.NotEnoughReplicasAfterAppend, isr, want)
	}
	return true, nil
}

// Read returns batches from offset for a consumer (up to the high watermark) or a
// follower (up to the log end).
func (p *Partition) Read(offset int64, maxBytes int, toLogEnd, minOne bool) (*shalelog.View, error) {
	if err := p.offlineErr(); err != nil {
		return nil, err
	}
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

// ReadCommitted returns batches from offset for a read_committed consumer: up to the
// last stable offset, with the aborted transactions the read spans, so that the consumer
// can drop their records. lso is the last stable offset the read stopped at.
func (p *Partition) ReadCommitted(offset int64, maxBytes int, minOne bool) (v *shalelog.View, lso int64, aborted []AbortedTxn, err error) {
	if err := p.offlineErr(); err != nil {
		return nil, -1, nil, err
	}
	lso = p.LastStableOffset()
	if offset > lso && offset <= p.log.EndOffset() {
		return &shalelog.View{FirstOffset: offset, NextOffset: offset}, lso, nil, nil
	}
	v, err = p.log.Read(offset, maxBytes, lso, minOne)
	if err != nil || v.Size == 0 {
		return v, lso, nil, err
	}
	aborted, err = p.AbortedTxns(v.FirstOffset, v.NextOffset)
	if err != nil {
		v.Release()
		return nil, lso, nil, err
	}
	return v, lso, aborted, nil
}

// Waiter returns a channel closed at the next append, high-watermark or role change.
func (p *Partition) Waiter() <-chan struct{} {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if p.waitCh == nil {
		p.waitCh = make(chan struct{})
	}
	return p.waitCh
}

// wakeChanged wakes the waiters for a change other than data: their next read must
// not be skipped.
func (p *Partition) wakeChanged() {
	p.bumpGen()
	p.wake()
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

// LatestEpoch is the newest leader epoch in the epoch cache, -1 when empty; a follower
// sends it as its last fetched epoch.
func (p *Partition) LatestEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epochs.latest()
}

// DeleteRecordsBefore advances the log start offset (Kafka's DeleteRecords). offset -1
// means the high watermark. It returns the new log start offset.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Role() != RoleLeader {
		return 0, ErrNotLeader
	}
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, fmt.Errorf("%w: offset %d is outside [%d, %d]", kerr.OffsetOutOfRange, offset, p.log.StartOffset(), hw)
	}
	return p.deleteBeforeLocked(offset, false)
}

// deleteBeforeLocked moves the log start to offset; localOnly says that only the local
// log's start moved (a follower following its leader's, which is the leader's local log
// start for a Tiered partition).
func (p *Partition) deleteBeforeLocked(offset int64, localOnly bool) (int64, error) {
	if offset <= p.log.StartOffset() {
		return p.log.StartOffset(), nil
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		return 0, err
	}
	start := p.log.StartOffset()
	// A fetch parked below the new start must get OFFSET_OUT_OF_RANGE at its next
	// wake-up, as before, not wait for enough bytes. (No wake: there was none before.)
	p.bumpGen()
	p.epochs.truncateBefore(start)
	p.forgetProducersBeforeLocked(start, localOnly)
	p.dropRollSnapsBelowStartLocked()
	return start, p.saveEpochsLocked()
}

// EnforceRetention deletes old segments by the topic's retention settings.
func (p *Partition) EnforceRetention() error {
	// A segment goes only when the next one starts at or below the high watermark, as in
	// Kafka: a record above it may be all a lagging in-sync follower still needs, and
	// deleting it would send that follower to the new log start, past records that it
	// never got and that acks=all producers are waiting on. Nor does anything at or after
	// the first unstable offset go: an open transaction's records stay with its marker.
	n, err := p.log.EnforceRetentionBelow(min(p.firstUnstableOffset(), p.hw.Load(), p.retentionBoundTiered()))
	if err != nil {
		return err
	}
	if n > 0 {
		p.bumpGen() // as in deleteBeforeLocked
		p.mu.Lock()
		start := p.log.StartOffset()
		p.epochs.truncateBefore(start)
		p.forgetProducersBeforeLocked(start, true)
		p.dropRollSnapsBelowStartLocked()
		err := p.saveEpochsLocked()
		p.mu.Unlock()
		p.lg.Debug("retention deleted segments", "segments", n, "log_start_offset", start)
		return err
	}
	return nil
}

// Flush forces the log to disk.
func (p *Partition) Flush() error { return p.log.Flush() }

// close shuts the replica down cleanly, leaving the epoch checkpoint and a producer
// snapshot that the next open trusts. If the epochs cannot be saved, the log is closed
// without its clean-shutdown marker, so that the next open replays them from the log.
func (p *Partition) close() error {
	// Wake whoever waits on this replica (an acks=all produce waiting for its ISR, a
	// long-poll fetch): a replica removed under them, by a reassignment or a topic
	// deletion, must answer them now, not at their timeout.
	defer p.wakeChanged()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.role.Store(int32(RoleNone))
	// A snapshot that fails leaves the previous one, which still replays correctly from
	// its own offset.
	snapErr := p.producers.save(p.dir, p.log.EndOffset())
	if !slices.Equal(p.epochs.entries, p.savedEpochs) || p.savedEpochs == nil {
		if err := p.saveEpochsLocked(); err != nil {
			return errors.Join(err, snapErr, p.log.CloseUnclean())
		}
	}
	if err := p.log.Close(); err != nil {
		return err
	}
	return snapErr
}

// ScanHeaders walks the batch headers from the batch holding offset onward.
func (p *Partition) ScanHeaders(from int64, fn func(h shalelog.Header) bool) error {
	return p.log.ScanHeaders(from, fn)
}
