package share

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata/topicconfig"
	"github.com/shalelog/shale/replication"
)

// Dead letters go beyond KIP-932, which only archives a record that reached the delivery
// limit. When the source topic's share.dead.letter.topic config names a topic, a record
// archived by REJECT or by reaching group.share.delivery.count.limit is first appended
// there (acks=all, through the replica manager, to a partition of the dead-letter topic
// this broker leads), with headers naming its origin; only then is its archival
// committed. A failover between the two redelivers the record (it is persisted as
// available until then), so a dead letter is written at least once, possibly twice.

// Headers on a dead letter.
const (
	HeaderTopic         = "__dlq.errors.topic"
	HeaderPartition     = "__dlq.errors.partition"
	HeaderOffset        = "__dlq.errors.offset"
	HeaderDeliveryCount = "__dlq.errors.delivery.count"
	HeaderGroup         = "__dlq.errors.group.id"
)

// deadLetterTimeout bounds one dead-letter append's replication.
const deadLetterTimeout = 30 * time.Second

var errNoLocalDeadLetterPartition = errors.New("this broker leads no partition of the dead-letter topic")

// deadLetter writes e's pending dead letters and marks them written; on failure they stay
// pending (and unpersisted as archived) for the next flush.
func (m *Manager) deadLetter(ctx context.Context, e *entry, pending []DeadLetter) {
	im := m.reps.Image()
	var dlq string
	if t := im.Topic(e.key.Topic); t != nil {
		dlq = t.Configs[topicconfig.ShareDeadLetterTopic]
	}
	offsets := make([]int64, len(pending))
	for i, d := range pending {
		offsets[i] = d.Offset
	}
	if dlq == "" || dlq == e.key.Topic {
		e.mu.Lock()
		e.sp.DeadLettered(offsets)
		e.version++
		e.mu.Unlock()
		return
	}
	err := m.appendDeadLetters(ctx, e.key, dlq, pending)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		if time.Since(e.lastWarn) > time.Minute {
			e.lastWarn = time.Now()
			m.lg.Warn("dead letters not written; the records stay in flight until they are", "share_partition", e.key.String(),
				"dead_letter_topic", dlq, "records", len(pending), "err", err)
		}
		return
	}
	e.sp.DeadLettered(offsets)
	e.version++
}

func (m *Manager) appendDeadLetters(ctx context.Context, key Key, dlq string, pending []DeadLetter) error {
	t := m.reps.Image().Topic(dlq)
	if t == nil || len(t.Partitions) == 0 {
		return fmt.Errorf("dead-letter topic %q does not exist", dlq)
	}
	var recs []records.Record
	var firstTS, maxTS int64
	for _, d := range pending {
		r, ts, ok, err := m.readRecord(key, d.Offset)
		if err != nil {
			return err
		}
		if !ok {
			continue // compacted away meanwhile: nothing to forward
		}
		r.Headers = append(r.Headers,
			records.Header{Key: []byte(HeaderTopic), Value: []byte(key.Topic)},
			records.Header{Key: []byte(HeaderPartition), Value: []byte(strconv.Itoa(int(key.Partition)))},
			records.Header{Key: []byte(HeaderOffset), Value: []byte(strconv.FormatInt(d.Offset, 10))},
			records.Header{Key: []byte(HeaderDeliveryCount), Value: []byte(strconv.Itoa(int(d.Count)))},
			records.Header{Key: []byte(HeaderGroup), Value: []byte(key.Group)})
		if len(recs) == 0 {
			firstTS = ts
		}
		maxTS = max(maxTS, ts)
		r.OffsetDelta = int32(len(recs))
		r.TimestampDelta = ts - firstTS
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	batch, err := records.Build(shalelog.Header{Magic: 2, FirstTimestamp: firstTS, MaxTimestamp: max(maxTS, firstTS),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, shalelog.CodecNone, recs)
	if err != nil {
		return fmt.Errorf("build dead-letter batch: %w", err)
	}
	n := int32(len(t.Partitions))
	for i := range n {
		idx := (key.Partition + i) % n
		if _, err := m.reps.Leader(dlq, idx, -1); err != nil {
			continue
		}
		pp := &replication.ProducePartition{Topic: dlq, Index: idx, Records: batch}
		parts := []*replication.ProducePartition{pp}
		m.reps.Append(ctx, -1, parts)
		if pp.Err == nil {
			m.reps.AwaitReplication(ctx, parts, deadLetterTimeout)
		}
		if pp.Err != nil {
			return fmt.Errorf("append to %s-%d: %w", dlq, idx, pp.Err)
		}
		return nil
	}
	return fmt.Errorf("%w (%q)", errNoLocalDeadLetterPartition, dlq)
}

// readRecord reads one committed record of the source partition.
func (m *Manager) readRecord(key Key, offset int64) (records.Record, int64, bool, error) {
	res := m.reps.Fetch(replication.Reader{ReplicaID: -1}, replication.FetchPartition{Topic: key.Topic, Index: key.Partition,
		CurrentLeaderEpoch: -1, FetchOffset: offset, LastFetchedEpoch: -1, MaxBytes: 1, MinOne: true})
	if res.Err != nil {
		return records.Record{}, 0, false, fmt.Errorf("read %s-%d at %d: %w", key.Topic, key.Partition, offset, res.Err)
	}
	raw := make([]byte, 0, res.View.Size)
	for _, c := range res.View.Chunks {
		raw = append(raw, c...)
	}
	res.View.Release()
	for pos := 0; pos+shalelog.BatchHeaderSize <= len(raw); {
		h, err := shalelog.ParseHeader(raw[pos:])
		if err != nil || pos+h.Size() > len(raw) {
			break
		}
		if offset >= h.BaseOffset && offset <= h.LastOffset() {
			_, recs, err := records.Records(raw[pos : pos+h.Size()])
			if err != nil {
				return records.Record{}, 0, false, fmt.Errorf("decode %s-%d at %d: %w", key.Topic, key.Partition, offset, err)
			}
			for _, r := range recs {
				if h.BaseOffset+int64(r.OffsetDelta) == offset {
					ts := h.FirstTimestamp + r.TimestampDelta
					if h.Attributes&shalelog.AttrTimestampType != 0 {
						ts = h.MaxTimestamp // LogAppendTime
					}
					r.Headers = append([]records.Header(nil), r.Headers...)
					return r, ts, true, nil
				}
			}
			return records.Record{}, 0, false, nil
		}
		pos += h.Size()
	}
	return records.Record{}, 0, false, nil
}
