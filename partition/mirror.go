package partition

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// A mirror partition (issue 29) is the leader of a destination partition of an active
// mirror topic: it copies its source partition's batches at their offsets, keeping their
// producer ids, transaction markers and source leader epochs, and takes no produce. Its
// epoch cache is the source's (the batches' epochs), so that the destination's followers,
// consumers that validate positions with OffsetForLeaderEpoch, and a later reverse
// mirror all see the source's lineage; becoming leader records no epoch of its own
// (State.Mirror). The replica manager copies (replication/mirror.go).

// ErrMirror refuses produce and markers on a mirror partition.
var ErrMirror = fmt.Errorf("%w: the partition belongs to a mirror topic and takes no writes until it is promoted", kerr.InvalidRequest)

// ErrNotMirroring refuses a mirror operation on a replica that is not a mirror's leader
// in the epoch the caller names.
var ErrNotMirroring = fmt.Errorf("%w: this replica does not lead the mirror partition in that epoch", ErrNotLeader)

// ErrEpochAboveFloor stops AppendMirrored at a batch whose source epoch is above the
// floor the caller has committed (see replication/mirror.go).
var ErrEpochAboveFloor = errors.New("source leader epoch above the committed floor")

func (p *Partition) mirrorLeaderLocked(leaderEpoch int32) error {
	if err := p.offlineErr(); err != nil {
		return err
	}
	if p.Role() != RoleLeader || !p.state.Mirror || p.state.LeaderEpoch != leaderEpoch {
		return ErrNotMirroring
	}
	return nil
}

// AppendMirrored appends batches fetched from the source partition, as a follower
// appends its leader's: at their offsets, with their epochs. leaderEpoch is the
// destination leader epoch the copier started under (a copier that outlived its
// leadership is refused); batches whose epoch is above floor are not appended
// (ErrEpochAboveFloor, after those before them). The high watermark then moves as for
// any leader append, when the ISR has the batches.
func (p *Partition) AppendMirrored(records []byte, leaderEpoch, floor int32) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.mirrorLeaderLocked(leaderEpoch); err != nil {
		return 0, err
	}
	// Cut the input before the first batch of an epoch above the floor.
	var stop error
	for off := 0; off+shalelog.BatchHeaderSize <= len(records); {
		h, err := shalelog.ParseHeader(records[off:])
		if err != nil {
			break // appendReplicatedLocked reports it
		}
		if h.PartitionLeaderEpoch > floor {
			records = records[:off]
			stop = fmt.Errorf("%w: epoch %d, floor %d", ErrEpochAboveFloor, h.PartitionLeaderEpoch, floor)
			break
		}
		off += h.Size()
	}
	n, err := p.appendReplicatedLocked(records, "the source")
	if n > 0 {
		p.maybeAdvanceHWLocked()
		defer p.wake()
	}
	if err != nil {
		return n, err
	}
	return n, stop
}

// TruncateMirror cuts a mirror leader's log at offset: its source's log diverged there
// (an unclean election on the source). The followers' positions are forgotten, so that
// the high watermark waits until each has fetched again, and so truncated as well
// (their next fetch finds the divergence, Fetch's LastFetchedEpoch check).
func (p *Partition) TruncateMirror(offset int64, leaderEpoch int32, now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.mirrorLeaderLocked(leaderEpoch); err != nil {
		return err
	}
	if offset >= p.log.EndOffset() {
		return nil
	}
	if offset < p.hw.Load() {
		p.lg.Warn("mirror truncating below the high watermark: the source lost records it had committed (an unclean election)",
			"offset", offset, "high_watermark", p.hw.Load())
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
	p.resetFollowersLocked(now, true)
	p.bumpGen()
	p.lg.Info("mirror truncated to its source's log", "offset", end)
	return p.saveEpochsLocked()
}

// RestartMirrorAt empties a mirror leader's log and restarts it at offset: the source's
// log starts after everything this one holds (a new mirror of a topic whose head was
// deleted by retention, or one that fell behind it). Followers restart in turn when they
// find the leader's log start past their end.
func (p *Partition) RestartMirrorAt(offset int64, leaderEpoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.mirrorLeaderLocked(leaderEpoch); err != nil {
		return err
	}
	if offset <= p.log.EndOffset() {
		return nil
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
	p.producers = newProducerState()
	p.noteTxnsLocked()
	p.hw.Store(offset)
	p.bumpGen()
	p.lg.Info("mirror restarted its log at the source's log start", "offset", offset)
	return p.saveEpochsLocked()
}

// epochAtLocked is the leader epoch in force at offset by the epoch cache, -1 when the
// cache knows none.
func (p *Partition) epochAtLocked(offset int64) int32 {
	e := int32(-1)
	for _, en := range p.epochs.entries {
		if en.StartOffset > offset {
			break
		}
		e = en.Epoch
	}
	return e
}

// AbortSourceTransactions ends, with an abort marker, every transaction still open on a
// promoted mirror's leader that began in a source epoch (at most floor, the mirror's
// source epoch floor): no coordinator of this cluster knows it, so none would ever end
// it, and it would hold the last stable offset back for good. Transactions begun after
// the promotion are in destination epochs, above the floor, and are left alone; so the
// call is safe on every leadership of a promoted mirror. It returns the aborts written.
func (p *Partition) AbortSourceTransactions(floor int32) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Role() != RoleLeader || p.state.Mirror || floor < 0 {
		return 0, nil
	}
	if err := p.offlineErr(); err != nil {
		return 0, err
	}
	pids := make([]int64, 0, len(p.producers.txns.Ongoing))
	for pid, first := range p.producers.txns.Ongoing {
		if p.epochAtLocked(first) <= floor {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	n := 0
	for _, pid := range pids {
		epoch, coord := int16(0), int32(0)
		if e := p.producers.producers[pid]; e != nil {
			epoch, coord = e.Epoch, e.CoordinatorEpoch
		}
		if _, err := p.appendMarkerLocked(pid, epoch, records.Marker{Commit: false, CoordinatorEpoch: coord}); err != nil {
			return n, fmt.Errorf("aborting producer %d's transaction from the source: %w", pid, err)
		}
		n++
	}
	if n > 0 {
		p.maybeAdvanceHWLocked()
		defer p.wake()
		p.lg.Info("aborted transactions the mirror's source left open", "count", n)
	}
	return n, nil
}
