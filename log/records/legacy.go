package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

// Legacy message sets (magic 0 and 1) come only in Produce v0-v2. Shale stores RecordBatch
// v2 alone, so it up-converts them on the way in, as Kafka does when its log format is
// v2. Supporting these versions matters for more than museum clients: librdkafka before
// 2.10 compresses with gzip, snappy or lz4 only when the broker's Produce range includes
// v0 (confluentinc/librdkafka#4956).

// maxLegacyDepth bounds compressed wrappers inside wrappers (Kafka allows one level).
const maxLegacyDepth = 1

// UpconvertMessageSet converts a v0/v1 message set into one RecordBatch v2 holding the
// same records, compressed with the wrapper's codec (uncompressed when there is none).
// Messages without a timestamp (v0) get nowMs, as Kafka assigns them on conversion.
func UpconvertMessageSet(set []byte, nowMs int64) ([]byte, error) {
	var recs []Record
	codec := 0
	var firstTS, maxTS int64 = -1, -1
	err := walkMessageSet(set, 0, func(magic, attrs int8, ts int64, key, value []byte, outerCodec int) {
		if outerCodec != 0 {
			codec = outerCodec
		}
		if magic == 0 || ts < 0 {
			ts = nowMs
		}
		if firstTS < 0 {
			firstTS = ts
		}
		maxTS = max(maxTS, ts)
		recs = append(recs, Record{Key: key, Value: value, TimestampDelta: ts, OffsetDelta: int32(len(recs))})
	})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: empty message set", shalelog.ErrInvalidRecord)
	}
	for i := range recs {
		recs[i].TimestampDelta -= firstTS
	}
	h := shalelog.Header{PartitionLeaderEpoch: -1, FirstTimestamp: firstTS, MaxTimestamp: maxTS, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	return Build(h, codec, recs)
}

// walkMessageSet calls fn for every message, descending into compressed wrappers.
func walkMessageSet(set []byte, depth int, fn func(magic, attrs int8, ts int64, key, value []byte, codec int)) error {
	for len(set) > 0 {
		if len(set) < 12 {
			return fmt.Errorf("%w: %d trailing bytes in a message set", shalelog.ErrCorruptMessage, len(set))
		}
		size := int32(binary.BigEndian.Uint32(set[8:]))
		if size < 14 || int(size) > len(set)-12 {
			return fmt.Errorf("%w: message size %d with %d bytes left", shalelog.ErrCorruptMessage, size, len(set)-12)
		}
		entry := set[:12+size]
		set = set[12+size:]
		if crc := crc32.ChecksumIEEE(entry[16:]); crc != binary.BigEndian.Uint32(entry[12:]) {
			return fmt.Errorf("%w: message crc %08x, computed %08x", shalelog.ErrCorruptMessage, binary.BigEndian.Uint32(entry[12:]), crc)
		}
		var (
			magic, attrs int8
			ts           int64 = -1
			key, value   []byte
		)
		switch entry[16] {
		case 0:
			var m kmsg.MessageV0
			if err := m.ReadFrom(entry); err != nil {
				return fmt.Errorf("%w: %w", shalelog.ErrCorruptMessage, err)
			}
			magic, attrs, key, value = 0, m.Attributes, m.Key, m.Value
		case 1:
			var m kmsg.MessageV1
			if err := m.ReadFrom(entry); err != nil {
				return fmt.Errorf("%w: %w", shalelog.ErrCorruptMessage, err)
			}
			magic, attrs, ts, key, value = 1, m.Attributes, m.Timestamp, m.Key, m.Value
		default:
			return fmt.Errorf("%w: magic %d in a legacy message set", shalelog.ErrInvalidRecord, entry[16])
		}
		codec := int(attrs & 0x07)
		if codec == 0 {
			fn(magic, attrs, ts, key, value, 0)
			continue
		}
		if depth >= maxLegacyDepth {
			return fmt.Errorf("%w: compressed message nested in a compressed message", shalelog.ErrInvalidRecord)
		}
		inner, err := Decompress(codec, value, nil)
		if err != nil {
			return err
		}
		err = walkMessageSet(inner, depth+1, func(im, ia int8, its int64, ik, iv []byte, _ int) {
			if magic == 1 && attrs&0x08 != 0 {
				its = ts // LogAppendTime on the wrapper applies to every inner message
			}
			fn(im, ia, its, ik, iv, codec)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
