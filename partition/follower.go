package partition

import (
	"fmt"

	shalelog "github.com/shalelog/shale/log"
)

// AppendAsFollower appends the record batches of a fetch response from the leader of
// leaderEpoch, keeping their offsets and leader epochs. A partial batch at the end (a
// fetch may cut one) and batches this replica already holds are skipped. Data fetched
// from a leader this replica no longer follows is refused, under the same lock as the
// role change. It returns the bytes appended.
func (p *Partition) AppendAsFollower(records []byte, leaderEpoch int32) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.offlineErr(); err != nil {
		return 0, err
	}
	if p.Role() != RoleFollower || p.state.LeaderEpoch != leaderEpoch {
		return 0, fmt.Errorf("%w: no longer following the leader of epoch %d", ErrNotLeader, leaderEpoch)
	}
	n, err := p.appendReplicatedLocked(records, "the leader")
	if n > 0 {
		defer p.wake()
	}
	return n, err
}

// appendReplicatedLocked appends whole batches copied from another log (from, for
// errors: "the leader", "the source"), keeping their offsets and leader epochs; a partial
// batch at the end and batches already held are skipped. It returns the bytes appended.
func (p *Partition) appendReplicatedLocked(records []byte, from string) (int, error) {
	n := 0
	for len(records) >= shalelog.BatchHeaderSize {
		h, err := shalelog.ParseHeader(records)
		if err != nil {
			return n, fmt.Errorf("batch from %s at offset %d: %w", from, p.log.EndOffset(), err)
		}
		size := h.Size()
		if size > len(records) {
			break // truncated by the fetch size
		}
		b := records[:size]
		records = records[size:]
		if h.LastOffset() < p.log.EndOffset() {
			continue
		}
		// The epoch goes to its checkpoint before its first batch reaches the log, so
		// that the checkpoint covers every batch on disk and a restart need not scan the
		// log for epochs. If the append then fails, the entry at the log end is what a
		// leader elected there would have written: harmless.
		if err := p.assignEpochLocked(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
			return n, err
		}
		end := p.log.EndOffset()
		_, appendErr := p.log.AppendReplica(b)
		if appendErr != nil && p.log.EndOffset() == end {
			return n, appendErr // nothing of the batch is in the log
		}
		// In the log even if its flush failed: the producer state must know it, as the
		// leader's does, or this replica would append a producer's retry again once it
		// leads (and the leader would not refetch it anyway).
		p.noteAppendedLocked(h.BaseOffset, size)
		if appendErr == nil {
			p.snapshotAtRollLocked(h.BaseOffset)
		}
		// The same producer state as the leader's, so that a new leader knows which
		// transactions are open.
		if h.IsControl() {
			if m, err := parseMarker(b); err != nil {
				p.lg.Warn("skipping an unreadable control batch", "from", from, "offset", h.BaseOffset, "err", err)
			} else if err := p.recordMarkerLocked(h, m, true); err != nil && appendErr == nil {
				return n, err
			}
		} else {
			p.producers.record(h)
			if h.IsTransactional() {
				p.noteTxnsLocked()
			}
		}
		n += size
		if appendErr != nil {
			return n, p.failLocked(appendErr)
		}
	}
	if n > 0 && p.durable.Load() {
		// A follower's fetcher (a mirror leader's copier) sends its next fetch offset once
		// this is synced.
		p.log.RequestSync()
	}
	return n, nil
}

// SetFollowerHighWatermark takes the leader's high watermark from a fetch response. It
// never exceeds this replica's log end and never moves backwards. A response that raced
// a role change is dropped: a leader's high watermark is its own to compute (see
// ReplicationDone), and the role is checked under mu, as ApplyState changes it.
func (p *Partition) SetFollowerHighWatermark(hw int64) {
	p.mu.Lock()
	if p.Role() != RoleFollower {
		p.mu.Unlock()
		return
	}
	hw = min(hw, p.log.EndOffset())
	if hw <= p.hw.Load() {
		p.mu.Unlock()
		return
	}
	p.hw.Store(hw)
	p.mu.Unlock()
	p.wake()
}

// errNotFollowing refuses a truncation from a fetch response that raced a role change.
var errNotFollowing = fmt.Errorf("%w: this replica no longer follows", ErrNotLeader)

// TruncateTo removes everything at and after offset: this follower's log diverged from
// its leader's (the leader's epoch ended there). The high watermark, epochs and producer
// state follow the log back.
func (p *Partition) TruncateTo(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Role() != RoleFollower {
		// A leader's log is the one others truncate to, and a fenced leader may lead
		// again in the same epoch: cutting it would let ReplicationDone pass batches
		// that are gone.
		return errNotFollowing
	}
	if offset >= p.log.EndOffset() {
		// Nothing to cut from the log, but an epoch this replica began at its log end
		// without writing in it (it led briefly) is unknown to the leader: keeping it
		// would make every fetch report the same divergence again.
		if n := len(p.epochs.entries); n > 0 && p.epochs.entries[n-1].StartOffset >= offset {
			p.epochs.truncateFrom(offset)
			return p.saveEpochsLocked()
		}
		return nil
	}
	if offset < p.hw.Load() {
		p.lg.Warn("truncating below the high watermark (an unclean election or a lost disk)", "offset", offset, "high_watermark", p.hw.Load())
	}
	if err := removeSnapshot(p.dir); err != nil {
		return err
	}
	err := p.log.Truncate(offset)
	// Even after a failure, which may have cut part of the log.
	p.dropRollSnapsAboveEndLocked()
	if err != nil {
		return err
	}
	end := p.log.EndOffset()
	p.epochs.truncateFrom(end)
	if !p.producers.truncateFrom(end) {
		if err := p.replayProducersLocked(); err != nil {
			return err
		}
	}
	if p.hw.Load() > end {
		p.hw.Store(end)
	}
	p.bumpGen()
	p.lg.Info("truncated to the leader's log", "offset", end)
	return p.saveEpochsLocked()
}

// RestartAt empties the log and restarts it at offset: the leader's log starts after
// this follower's end, so nothing it holds is still wanted.
func (p *Partition) RestartAt(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restartAtLocked(offset, newProducerState())
}

// RestartAtWithProducers is RestartAt for a follower of a Tiered partition that starts
// from the tiered offset (KIP-1023): the log restarts at offset, the end of a remote
// segment, and the producer state is the one uploaded with that segment (snapshot, from
// remotelog.Reader.ProducerSnapshot), as Kafka builds a follower's auxiliary state, so
// that the producers whose batches are all remote are known here too. A snapshot that
// does not decode, or that is not as of offset, changes nothing and fails with
// ErrProducerSnapshot.
func (p *Partition) RestartAtWithProducers(offset int64, snapshot []byte) error {
	snap, err := decodeSnapshot(snapshot)
	if err != nil {
		return err
	}
	if snap.Offset != offset {
		return fmt.Errorf("%w: it is as of offset %d, not %d", ErrProducerSnapshot, snap.Offset, offset)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.restartAtLocked(offset, snap.state()); err != nil {
		return err
	}
	// The state is not in the log here: it is saved as the producer snapshot that a
	// restart replays the log from, or a crash would lose it.
	if err := p.producers.save(p.dir, offset); err != nil {
		p.lg.Warn("saving the producer state taken from the remote log failed; a restart forgets the producers whose batches are all remote", "offset", offset, "err", err)
	}
	return nil
}

func (p *Partition) restartAtLocked(offset int64, producers *producerState) error {
	if p.Role() != RoleFollower {
		return errNotFollowing // as in TruncateTo
	}
	if err := removeSnapshot(p.dir); err != nil {
		return err
	}
	err := p.log.TruncateFully(offset)
	p.dropRollSnapsLocked(func(int64) bool { return true }) // as in TruncateTo
	if err != nil {
		return err
	}
	p.epochs.entries = nil
	p.producers = producers
	p.noteTxnsLocked()
	p.hw.Store(offset)
	p.bumpGen()
	p.lg.Info("restarted the log at the leader's log start", "offset", offset, "producers", len(producers.producers))
	return p.saveEpochsLocked()
}

// FollowLogStart advances the log start offset to the leader's (DeleteRecords and
// retention on the leader), never past this replica's high watermark.
func (p *Partition) FollowLogStart(leaderStart int64) error {
	if leaderStart <= p.log.StartOffset() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.deleteBeforeLocked(min(leaderStart, p.hw.Load()), true)
	return err
}

// DurableAcks reports whether this replica's acknowledgements wait for fsyncs
// (acks.all.fsync, or flush.messages=1): as a follower it then fetches from its flushed
// offset, and waits for its group commit before it fetches again (see FlushWaiter).
func (p *Partition) DurableAcks() bool { return p.durable.Load() }

// FlushedOffset is the offset below which this replica's log is on disk.
func (p *Partition) FlushedOffset() int64 { return p.log.FlushedOffset() }

// SyncErr is the failure of this replica's group commit, nil while none failed. The
// replica is offline after one (see failLocked).
func (p *Partition) SyncErr() error { return p.log.SyncErr() }

// RequestSync asks the log's group commit to sync everything appended so far; it does
// not wait (see FlushWaiter).
func (p *Partition) RequestSync() { p.log.RequestSync() }

// FlushWaiter returns a channel closed once the flushed offset moves or the group commit
// fails after this call; check FlushedOffset after taking it.
func (p *Partition) FlushWaiter() <-chan struct{} {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	if p.flushCh == nil {
		p.flushCh = make(chan struct{})
	}
	return p.flushCh
}

// onSynced hears the log's group commit: a moved flushed offset may move the high
// watermark (answering acks=all produces and parked fetches) and lets a waiting follower
// fetch again; a failed fsync takes the replica offline, so that every acks=all wait on
// it is answered KAFKA_STORAGE_ERROR. It runs on the group commit's goroutine, never
// with the log's locks held.
func (p *Partition) onSynced() {
	p.mu.Lock()
	var moved bool
	if err := p.log.SyncErr(); err != nil {
		p.failLocked(err)
	} else {
		moved = p.maybeAdvanceHWLocked()
	}
	p.mu.Unlock()
	if moved {
		p.wake()
	}
	p.flushMu.Lock()
	if p.flushCh != nil {
		close(p.flushCh)
		p.flushCh = nil
	}
	p.flushMu.Unlock()
}
