package log

import "path/filepath"

// SealedSegment describes a closed segment for tiered storage, which uploads its files:
// its offsets, size and newest timestamp, and the paths of its files.
type SealedSegment struct {
	// BaseOffset is the segment's base offset; NextOffset the next segment's, one past
	// the segment's last offset.
	BaseOffset, NextOffset int64
	// Size is the bytes of batches in the log file (which may be preallocated past it).
	Size int64
	// MaxTimestamp is the largest batch timestamp, -1 when none.
	MaxTimestamp int64
	// Log, OffsetIndex, TimeIndex and TxnIndex are the files' paths; TxnIndex may not
	// exist (a segment without aborted transactions has none).
	Log, OffsetIndex, TimeIndex, TxnIndex string
}

// ActiveBaseOffset is the base offset of the active segment: a batch appended at it is
// the first of its segment.
func (l *Log) ActiveBaseOffset() int64 { return l.active().base }

// SealedSegments lists the closed segments (every one but the active segment), oldest
// first. A segment listed may be deleted (by retention or DeleteRecords) while its files
// are being read: a reader then fails and tries again later. A closed or deleted log
// (its segment list emptied, as the uploader may find it) has none.
func (l *Log) SealedSegments() []SealedSegment {
	segs := l.segments()
	if len(segs) < 2 {
		return nil
	}
	out := make([]SealedSegment, 0, len(segs)-1)
	for i, s := range segs[:len(segs)-1] {
		logName, index, timeIndex := SegmentFileNames(s.base)
		out = append(out, SealedSegment{
			BaseOffset: s.base, NextOffset: segs[i+1].base, Size: s.size.Load(), MaxTimestamp: s.maxTimestamp.Load(),
			Log: filepath.Join(l.dir, logName), OffsetIndex: filepath.Join(l.dir, index), TimeIndex: filepath.Join(l.dir, timeIndex),
			TxnIndex: l.txnPath(s.base),
		})
	}
	return out
}
