package controller

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// The __consumer_offsets view. Kafka's tools (Burrow, lag exporters) read committed
// offsets by consuming __consumer_offsets; Shale keeps them in the FSM, so it serves them
// as the compacted log Kafka's topic would be: every commit gets the next offset of one
// log shared by all partitions (each partition sees gaps, as a compacted partition
// does), and a partition holds the latest commit of each of its groups' offsets plus the
// tombstones of recent deletions. A reader that starts at offset 0 sees every group's
// current offsets; one that follows the end sees each commit and deletion as it happens.

// maxOffsetsTombstones bounds the deletions the view remembers. Kafka keeps tombstones
// for delete.retention.ms (a day) after compaction; the FSM keeps the latest ones, in
// memory only: after a restart a reader from the start sees the current offsets, which is
// what a compacted log shows once its tombstones are cleaned.
const maxOffsetsTombstones = 100_000

type offsetsTombstone struct {
	logOffset int64
	group     string
	tp        topicPartition
}

type offsetsLog struct {
	end        int64 // the offset the next record gets
	tombstones []offsetsTombstone
	// changed is closed, and replaced, whenever a record is added: long polls wait on it.
	changed chan struct{}
}

// nextLogOffset hands out the next offset of the view; callers hold f.mu.
func (f *fsm) nextLogOffset() int64 {
	o := f.offsetsLog.end
	f.offsetsLog.end++
	return o
}

// forget deletes one committed offset and leaves its tombstone; callers hold f.mu.
func (f *fsm) forget(group string, g map[topicPartition]offsetValue, tp topicPartition) {
	if _, ok := g[tp]; !ok {
		return
	}
	delete(g, tp)
	l := &f.offsetsLog
	if len(l.tombstones) >= maxOffsetsTombstones {
		l.tombstones = slices.Delete(l.tombstones, 0, len(l.tombstones)-maxOffsetsTombstones+1)
	}
	l.tombstones = append(l.tombstones, offsetsTombstone{logOffset: f.nextLogOffset(), group: group, tp: tp})
}

// offsetsChanged wakes the long polls; callers hold f.mu.
func (f *fsm) offsetsChanged() {
	close(f.offsetsLog.changed)
	f.offsetsLog.changed = make(chan struct{})
}

// restore resets the view after a snapshot restore; callers hold f.mu.
func (l *offsetsLog) restore(end int64) {
	l.end, l.tombstones = end, nil
	close(l.changed)
	l.changed = make(chan struct{})
}

// offsetsLogRecordSize estimates a record's share of a fetch: key and value as Kafka
// encodes them plus the record framing.
func offsetsLogRecordSize(r *metadata.OffsetsLogRecord) int {
	return 40 + len(r.Group) + len(r.Offset.Topic) + len(r.Offset.Metadata)
}

// readOffsetsLog returns the records of one partition of the view from offset from on,
// in offset order, up to about maxBytes (at least one), the view's end, and a channel
// closed at the next change.
func (f *fsm) readOffsetsLog(partition int32, from int64, maxBytes int) ([]metadata.OffsetsLogRecord, int64, <-chan struct{}, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := len(f.img.Coordinators)
	if partition < 0 || int(partition) >= n {
		return nil, 0, nil, kafkaErrorf(kerr.UnknownTopicOrPartition, "%s has %d partitions, not partition %d", metadata.OffsetsTopic, n, partition)
	}
	var out []metadata.OffsetsLogRecord
	for name, g := range f.groups {
		if metadata.OffsetsPartition(name, n) != partition {
			continue
		}
		for tp, v := range g {
			if v.logOffset >= from {
				out = append(out, metadata.OffsetsLogRecord{LogOffset: v.logOffset, Group: name, Offset: offsetFromValue(tp, v)})
			}
		}
	}
	ts := f.offsetsLog.tombstones
	start, _ := slices.BinarySearchFunc(ts, from, func(t offsetsTombstone, off int64) int { return cmp.Compare(t.logOffset, off) })
	for _, t := range ts[start:] {
		if metadata.OffsetsPartition(t.group, n) == partition {
			out = append(out, metadata.OffsetsLogRecord{LogOffset: t.logOffset, Group: t.group, Tombstone: true,
				Offset: metadata.CommittedOffset{Topic: t.tp.topic, Partition: t.tp.partition}})
		}
	}
	slices.SortFunc(out, func(a, b metadata.OffsetsLogRecord) int { return cmp.Compare(a.LogOffset, b.LogOffset) })
	size := 0
	for i := range out {
		size += offsetsLogRecordSize(&out[i])
		if i > 0 && size > maxBytes {
			out = out[:i]
			break
		}
	}
	return out, f.offsetsLog.end, f.offsetsLog.changed, nil
}
