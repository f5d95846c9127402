package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// RecordBatch v2 header layout (KIP-98). Offsets are byte positions in the batch.
const (
	offBaseOffset           = 0  // int64
	offLength               = 8  // int32: bytes after this field
	offPartitionLeaderEpoch = 12 // int32
	offMagic                = 16 // int8
	offCRC                  = 17 // uint32, CRC32C of bytes [21:]
	offAttributes           = 21 // int16
	offLastOffsetDelta      = 23 // int32
	offFirstTimestamp       = 27 // int64
	offMaxTimestamp         = 35 // int64
	offProducerID           = 43 // int64
	offProducerEpoch        = 51 // int16
	offBaseSequence         = 53 // int32
	offRecordCount          = 57 // int32

	// BatchHeaderSize is the size of a RecordBatch v2 header; records follow it.
	BatchHeaderSize = 61
	// logOverhead is the part of the header not counted by the length field.
	logOverhead = 12
)

// Attribute bits of a RecordBatch v2.
const (
	AttrCompressionMask = 0x07
	AttrTimestampType   = 0x08 // set: LogAppendTime
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	AttrDeleteHorizon   = 0x40
)

// Compression codecs as numbered in the attributes.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a RecordBatch v2.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field; the batch is Length+12 bytes
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch's size in bytes.
func (h Header) Size() int { return int(h.Length) + logOverhead }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec from the attributes.
func (h Header) Codec() int { return int(h.Attributes & AttrCompressionMask) }

// IsTransactional reports whether the batch belongs to a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// IsControl reports whether the batch holds control records (transaction markers).
func (h Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// LogAppendTime reports whether the timestamps are the broker's append time.
func (h Header) LogAppendTime() bool { return h.Attributes&AttrTimestampType != 0 }

// HasProducer reports whether the batch carries an idempotent producer id.
func (h Header) HasProducer() bool { return h.ProducerID >= 0 }

// Errors from batch validation. Each maps to one Kafka error code.
var (
	// ErrCorruptMessage (Kafka CORRUPT_MESSAGE, 2): bad CRC, bad length, or wrong magic.
	ErrCorruptMessage = errors.New("corrupt record batch")
	// ErrMessageTooLarge (Kafka MESSAGE_TOO_LARGE, 10): larger than max.message.bytes.
	ErrMessageTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrInvalidRecord (Kafka INVALID_RECORD, 87): structurally valid but semantically wrong.
	ErrInvalidRecord = errors.New("invalid record batch")
)

// ParseHeader decodes the header of the batch at the start of b. It checks that b holds
// the whole batch and that the header fields are self-consistent, but not the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < BatchHeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptMessage, len(b))
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:               int32(binary.BigEndian.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d, only RecordBatch v2 is supported", ErrCorruptMessage, h.Magic)
	}
	if h.Length < BatchHeaderSize-logOverhead {
		return h, fmt.Errorf("%w: batch length %d is shorter than its header", ErrCorruptMessage, h.Length)
	}
	if int64(h.Length)+logOverhead > int64(len(b)) {
		return h, fmt.Errorf("%w: batch length %d exceeds the %d bytes available", ErrCorruptMessage, h.Length, len(b)-logOverhead)
	}
	return h, nil
}

// ComputeCRC returns the CRC32C over the part of the batch the CRC field covers
// (attributes to the end). batch must be exactly one whole batch.
func ComputeCRC(batch []byte) uint32 {
	return crc32.Checksum(batch[offAttributes:], castagnoli)
}

// ValidateHeader parses the batch at the start of b and checks its CRC and the header
// invariants Kafka enforces before records are looked at: a positive record count and a
// lastOffsetDelta equal to count-1. It returns the header of the first batch.
func ValidateHeader(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	batch := b[:h.Size()]
	if crc := ComputeCRC(batch); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptMessage, h.CRC, crc)
	}
	if h.RecordCount <= 0 {
		return h, fmt.Errorf("%w: record count %d", ErrInvalidRecord, h.RecordCount)
	}
	if h.LastOffsetDelta != h.RecordCount-1 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrInvalidRecord, h.LastOffsetDelta, h.RecordCount)
	}
	return h, nil
}

// validateStoredHeader checks a batch as it may sit in a log: its CRC and header, but
// not the record count or lastOffsetDelta invariants of a freshly produced batch,
// because compaction leaves batches with fewer records (or none) that keep their
// original last offset, as Kafka's cleaner does. Recovery and followers accept them.
func validateStoredHeader(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if crc := ComputeCRC(b[:h.Size()]); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptMessage, h.CRC, crc)
	}
	if h.RecordCount < 0 || h.LastOffsetDelta < 0 || h.LastOffsetDelta < h.RecordCount-1 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrInvalidRecord, h.LastOffsetDelta, h.RecordCount)
	}
	return h, nil
}

// SetBaseOffset rewrites the batch's base offset in place. The CRC does not cover it.
func SetBaseOffset(batch []byte, base int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(base))
}

// SetPartitionLeaderEpoch rewrites the batch's leader epoch in place. The CRC does not cover it.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offPartitionLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime stamps the batch with the broker's append time, as Kafka does for
// topics with message.timestamp.type=LogAppendTime, and recomputes the CRC it covers.
func SetLogAppendTime(batch []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:]) | AttrTimestampType
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[offCRC:], ComputeCRC(batch))
}

// SplitBatches cuts a concatenation of whole batches (a produce request's records field)
// into its batches, parsing only the headers. A trailing partial batch is an error.
func SplitBatches(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil {
			return nil, err
		}
		out = append(out, b[:h.Size()])
		b = b[h.Size():]
	}
	return out, nil
}
