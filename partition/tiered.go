package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	shalelog "github.com/shalelog/shale/log"
)

// Tiered storage (KIP-405): the replica manager uploads a leader's closed segments and
// commits them through the controller; every replica, leader or follower, then deletes
// a local segment only once the remote log holds it, by local.retention.*.

// SetRemoteEnd tells the replica, from the metadata image, the offset below which the
// remote log holds (or has deleted) everything: metadata.RemoteLog.CoveredEnd, 0 when
// it has nothing.
func (p *Partition) SetRemoteEnd(end int64) { p.remoteEnd.Store(end) }

// retentionBoundTiered is the offset below which retention may delete local segments
// for tiered storage's sake: the remote end of a Tiered partition, no bound otherwise.
func (p *Partition) retentionBoundTiered() int64 {
	p.mu.Lock()
	tiered := p.cfg.Tiered
	p.mu.Unlock()
	if !tiered {
		return math.MaxInt64
	}
	return p.remoteEnd.Load()
}

// SealedSegments lists the replica's closed local segments, oldest first.
func (p *Partition) SealedSegments() []shalelog.SealedSegment { return p.log.SealedSegments() }

// LocalLogStartOffset is the first offset of the local log. With tiered storage the
// partition's log start may be lower, in the remote log.
func (p *Partition) LocalLogStartOffset() int64 { return p.log.StartOffset() }

// EpochEntries returns the leader epochs of the local log and the offsets where each
// starts, oldest first, for the segments an upload describes.
func (p *Partition) EpochEntries() []EpochStart {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]EpochStart, len(p.epochs.entries))
	for i, e := range p.epochs.entries {
		out[i] = EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// forgetProducersBeforeLocked forgets the producers whose every batch is below start,
// the new log start; localOnly says that only the local log's start moved (retention or
// a leader's log start followed). A Tiered partition then forgets nobody: its log goes
// on below the local log start, in the remote log, and as in Kafka (whose producer state
// follows the log start, not the local one) the state of a producer whose batches are
// all remote is kept, so that this replica, leader now or later, still recognizes its
// retries and fences its older epochs. producer.id.expiration.ms bounds it.
func (p *Partition) forgetProducersBeforeLocked(start int64, localOnly bool) {
	if localOnly && p.cfg.Tiered {
		return
	}
	p.producers.removeBefore(start)
}

// Roll snapshots: for a Tiered partition, the producer state as of each local segment's
// base offset, which is the state as of the end of the segment before, uploaded with
// that segment (Kafka's producer snapshot at each roll). Each is a file beside its
// segment, BASE.snapshot (named as Kafka's, in the producer snapshot format
// DecodeProducerSnapshot reads), so that a segment rolled before a restart is uploaded
// with its snapshot too. The log package knows nothing of them: the partition deletes
// them as their segments leave the local log (retention, DeleteRecords, local deletion
// after upload) or as truncation cuts the log below them, and sweeps the leftovers of a
// crash at open, so that only segments still local have one. The first local segment's
// is the state as of the local log start: a replay of the local log without a clean
// snapshot (an unclean open, a truncation into transactions) starts from it, so that
// the producers whose batches are all remote are not forgotten then either.
//
// They are written without an fsync (a roll is on the append path, and no snapshot is
// worth a disk flush there): a power cut may lose one or leave it empty, which costs
// only that segment's upload its snapshot (or a replay its head start). Removals that must not come back (those of a
// truncation, after which the same offsets are written anew) are made durable by the
// directory sync of the epoch checkpoint that every truncation writes before it
// returns.

const rollSnapSuffix = ".snapshot"

func rollSnapPath(dir string, base int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, rollSnapSuffix))
}

// parseRollSnapName returns the base offset of a roll snapshot's file name.
func parseRollSnapName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, rollSnapSuffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	return base, err == nil && base >= 0
}

// snapshotAtRollLocked writes the producer state as of base, before the batch at base
// is recorded, when that batch is the first of its segment. Only for a Tiered partition
// (the uploader sends it with the segment before), and only while the log holds the
// segment it follows.
func (p *Partition) snapshotAtRollLocked(base int64) {
	if !p.cfg.Tiered || p.log.ActiveBaseOffset() != base {
		return
	}
	p.dropRollSnapsBelowStartLocked()
	if err := p.writeRollSnapLocked(base); err != nil {
		p.lg.Warn("writing the producer state at a segment roll failed; the segment before is uploaded without it", "offset", base, "err", err)
	}
}

func (p *Partition) writeRollSnapLocked(base int64) error {
	b, err := json.Marshal(producerSnapshot{Offset: base, Producers: p.producers.producers, Txns: &p.producers.txns})
	if err != nil {
		return fmt.Errorf("encode producer state: %w", err)
	}
	path := rollSnapPath(p.dir, base)
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	if i, found := slices.BinarySearch(p.rollSnaps, base); !found {
		p.rollSnaps = slices.Insert(p.rollSnaps, i, base)
	}
	return nil
}

// dropRollSnapsLocked deletes the roll snapshots at the offsets drop selects.
func (p *Partition) dropRollSnapsLocked(drop func(off int64) bool) {
	p.rollSnaps = slices.DeleteFunc(p.rollSnaps, func(off int64) bool {
		if !drop(off) {
			return false
		}
		if err := os.Remove(rollSnapPath(p.dir, off)); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Left behind, it is swept at the next open.
			p.lg.Warn("removing a segment's producer snapshot failed", "offset", off, "err", err)
		}
		return true
	})
}

// dropRollSnapsBelowStartLocked deletes the snapshots of the segments that have left the
// local log: those below the log start.
func (p *Partition) dropRollSnapsBelowStartLocked() {
	start := p.log.StartOffset()
	p.dropRollSnapsLocked(func(off int64) bool { return off < start })
}

// rollSnapState returns the producer state of the roll snapshot at offset, false when
// there is none or it is unreadable (a power cut may leave it empty: it is not synced).
func (p *Partition) rollSnapState(offset int64) (*producerState, bool) {
	if _, found := slices.BinarySearch(p.rollSnaps, offset); !found {
		return nil, false
	}
	b, err := os.ReadFile(rollSnapPath(p.dir, offset))
	if err != nil {
		return nil, false
	}
	snap, err := decodeSnapshot(b)
	if err != nil || snap.Offset != offset {
		p.lg.Warn("ignoring an unreadable producer snapshot", "offset", offset, "err", err)
		return nil, false
	}
	return snap.state(), true
}

// dropRollSnapsAboveEndLocked deletes the snapshots past the log end, after a
// truncation: the offsets they describe are written anew. One at the end stays: the
// state as of an offset depends only on the batches below it, which the truncation kept.
func (p *Partition) dropRollSnapsAboveEndLocked() {
	end := p.log.EndOffset()
	p.dropRollSnapsLocked(func(off int64) bool { return off > end })
}

// loadRollSnaps finds the roll snapshots at open, keeping those of local segments, and
// deletes the rest: those a crash left past a torn tail that recovery cut, or below a
// log start that moved before they were removed, and half-written ones.
func (p *Partition) loadRollSnaps() error {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("%w: list %s: %w", shalelog.ErrStorage, p.dir, err)
	}
	bases := map[int64]bool{p.log.ActiveBaseOffset(): true}
	for _, s := range p.log.SealedSegments() {
		bases[s.BaseOffset] = true
	}
	start, end := p.log.StartOffset(), p.log.EndOffset()
	p.rollSnaps = nil
	for _, e := range entries {
		name := e.Name()
		base, ok := parseRollSnapName(name)
		if !ok {
			if strings.HasSuffix(name, rollSnapSuffix+".tmp") {
				_ = os.Remove(filepath.Join(p.dir, name)) // a write a crash interrupted
			}
			continue
		}
		if bases[base] && base >= start && base <= end {
			p.rollSnaps = append(p.rollSnaps, base)
			continue
		}
		if err := os.Remove(filepath.Join(p.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.lg.Warn("removing a stale producer snapshot failed", "file", name, "err", err)
		}
	}
	slices.Sort(p.rollSnaps)
	return nil
}

// ProducerSnapshotAt returns the producer state as of offset, a local segment's base
// offset, in the snapshot format DecodeProducerSnapshot reads: what the segment before
// it is uploaded with. nil, with a warning, when there is none (the segment was rolled
// before the partition was tiered, or a crash lost the file) or it is unreadable.
func (p *Partition) ProducerSnapshotAt(offset int64) []byte {
	// Without the lock: the file is replaced by a rename, never rewritten in place.
	b, err := os.ReadFile(rollSnapPath(p.dir, offset))
	if err != nil {
		p.lg.Warn("no producer snapshot for a segment; it is uploaded without one", "offset", offset, "err", err)
		return nil
	}
	if snap, err := decodeSnapshot(b); err != nil || snap.Offset != offset {
		p.lg.Warn("unreadable producer snapshot for a segment; it is uploaded without one", "offset", offset, "snapshot_offset", snap.Offset, "err", err)
		return nil
	}
	return b
}

// ProducerSnapshotInfo is a decoded producer snapshot: the offset it is as of and the
// producers, as Producers describes them.
type ProducerSnapshotInfo struct {
	Offset    int64
	Producers []ProducerInfo
}

// DecodeProducerSnapshot decodes a snapshot from ProducerSnapshotAt, as a replica
// rebuilding its producer state from the remote log would.
func DecodeProducerSnapshot(b []byte) (ProducerSnapshotInfo, error) {
	snap, err := decodeSnapshot(b)
	if err != nil {
		return ProducerSnapshotInfo{}, err
	}
	return ProducerSnapshotInfo{Offset: snap.Offset, Producers: snap.state().describe()}, nil
}

// ErrProducerSnapshot means a producer snapshot is unreadable or not the one asked for.
var ErrProducerSnapshot = errors.New("unusable producer snapshot")

func decodeSnapshot(b []byte) (producerSnapshot, error) {
	var snap producerSnapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return snap, fmt.Errorf("%w: %w", ErrProducerSnapshot, err)
	}
	// It may come from the object store: nothing in it may crash the replica later.
	for id, e := range snap.Producers {
		if e == nil {
			return snap, fmt.Errorf("%w: producer %d without state", ErrProducerSnapshot, id)
		}
	}
	return snap, nil
}

// state is the producer state a snapshot holds.
func (snap producerSnapshot) state() *producerState {
	s := newProducerState()
	if snap.Producers != nil {
		s.producers = snap.Producers
	}
	if snap.Txns != nil {
		s.txns = *snap.Txns
		s.txns.fill()
	}
	return s
}

// EpochStart is a leader epoch and the first offset written in it.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}
