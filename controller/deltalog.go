package controller

import (
	"slices"

	pb "github.com/shalelog/shale/controller/proto"
)

// deltaLog keeps the latest deltas so that a broker that reconnects slightly behind gets
// only what it missed, and wakes the watch streams when a delta arrives. It is guarded by
// the FSM's lock.
type deltaLog struct {
	capacity int
	// base is the metadata offset the oldest kept delta follows.
	base    uint64
	deltas  []*pb.MetadataDelta
	changed chan struct{} // closed and replaced on every append or reset
}

func newDeltaLog(capacity int, base uint64) deltaLog {
	return deltaLog{capacity: capacity, base: base, changed: make(chan struct{})}
}

func (l *deltaLog) append(d *pb.MetadataDelta) {
	l.deltas = append(l.deltas, d)
	if len(l.deltas) > 2*l.capacity {
		drop := len(l.deltas) - l.capacity
		l.base = l.deltas[drop-1].Offset
		l.deltas = slices.Clone(l.deltas[drop:])
	}
	l.wake()
}

// reset forgets every delta: the state was replaced by a snapshot at offset base.
func (l *deltaLog) reset(base uint64) {
	l.base = base
	l.deltas = nil
	l.wake()
}

func (l *deltaLog) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// since returns the deltas that follow offset, and ok false when they are not all kept
// (or offset is not a state this log went through), in which case the caller needs the
// complete image.
func (l *deltaLog) since(offset, current uint64) (ds []*pb.MetadataDelta, ok bool) {
	if offset == current {
		return nil, true
	}
	if offset < l.base || offset > current {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(l.deltas, offset, func(d *pb.MetadataDelta, off uint64) int {
		switch {
		case d.Offset <= off:
			return -1
		default:
			return 1
		}
	})
	if i >= len(l.deltas) || l.deltas[i].PrevOffset != offset {
		return nil, false
	}
	return l.deltas[i:], true
}
