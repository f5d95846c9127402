package partition

import (
	"encoding/json"
	"fmt"
	"math"

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

// snapshotAtRollLocked keeps the producer state as of base, before the batch at base
// is recorded, when that batch is the first of its segment: Kafka's producer snapshot
// at each roll, which is the state as of the end of the segment before. Only for a
// Tiered partition (the uploader sends it with the segment), and only while the log
// holds the segment it follows.
func (p *Partition) snapshotAtRollLocked(base int64) {
	if !p.cfg.Tiered || p.log.ActiveBaseOffset() != base {
		return
	}
	b, err := json.Marshal(producerSnapshot{Offset: base, Producers: p.producers.producers, Txns: &p.producers.txns})
	if err != nil {
		p.lg.Warn("encoding the producer state at a segment roll failed; the segment is uploaded without it", "offset", base, "err", err)
		return
	}
	if p.rollSnaps == nil {
		p.rollSnaps = map[int64][]byte{}
	}
	start := p.log.StartOffset()
	for off := range p.rollSnaps {
		if off <= start {
			delete(p.rollSnaps, off)
		}
	}
	p.rollSnaps[base] = b
}

// ProducerSnapshotAt returns the producer state as of offset, a local segment's base
// offset, in the snapshot format DecodeProducerSnapshot reads: what the segment before
// it is uploaded with. nil when this replica did not append the segment's first batch
// (it was reopened since, or its log was cut since).
func (p *Partition) ProducerSnapshotAt(offset int64) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rollSnaps[offset]
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
	var snap producerSnapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return ProducerSnapshotInfo{}, fmt.Errorf("decode producer snapshot: %w", err)
	}
	s := newProducerState()
	s.producers = snap.Producers
	if snap.Txns != nil {
		s.txns = *snap.Txns
		s.txns.fill()
	}
	return ProducerSnapshotInfo{Offset: snap.Offset, Producers: s.describe()}, nil
}

// EpochStart is a leader epoch and the first offset written in it.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}
