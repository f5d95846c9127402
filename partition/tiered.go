package partition

import (
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

// EpochStart is a leader epoch and the first offset written in it.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}
