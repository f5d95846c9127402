package records

import (
	"encoding/binary"
	"fmt"
	"math"

	shalelog "github.com/shalelog/shale/log"
)

// Byte positions of the header fields this file writes after encoding (the rest are
// written in order by appendHeader); see log/batch.go for the full layout.
const (
	posLength     = 8
	posCRC        = 17
	posAttributes = 21
	lengthOffset  = 12 // bytes before and including the length field
)

// Decompress decompresses a records payload with the Default Codecs.
func Decompress(codec int, src, dst []byte) ([]byte, error) {
	return Default().Decompress(codec, src, dst)
}

// Compress compresses a records payload with the Default Codecs.
func Compress(codec int, src, dst []byte) ([]byte, error) {
	return Default().Compress(codec, src, dst)
}

// Records decodes one batch with the Default Codecs. See Codecs.Records.
func Records(batch []byte) (shalelog.Header, []Record, error) {
	return Default().Records(batch)
}

// Build encodes a batch with the Default Codecs. See Codecs.Build.
func Build(h shalelog.Header, codec int, recs []Record) ([]byte, error) {
	return Default().Build(h, codec, recs)
}

// Recompress rewrites a batch with the Default Codecs. See Codecs.Recompress.
func Recompress(batch []byte, codec int) ([]byte, error) {
	return Default().Recompress(batch, codec)
}

// parseWhole parses the header of a batch that must be exactly b, and checks its CRC.
// Unlike log.ValidateHeader it accepts the empty and gapped batches compaction leaves.
func parseWhole(b []byte) (shalelog.Header, error) {
	h, err := shalelog.ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: %d bytes after the batch", shalelog.ErrCorruptMessage, len(b)-h.Size())
	}
	if crc := shalelog.ComputeCRC(b); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", shalelog.ErrCorruptMessage, h.CRC, crc)
	}
	if h.RecordCount < 0 {
		return h, fmt.Errorf("%w: record count %d", shalelog.ErrInvalidRecord, h.RecordCount)
	}
	return h, checkCodec(h.Codec())
}

// Records decodes every record of batch, which must be exactly one whole batch with a
// valid CRC. Records (their keys, values and headers) alias batch when it is
// uncompressed, and a fresh decompressed buffer otherwise. Unlike Validate it accepts
// what compaction leaves behind: no records, or offset deltas with gaps.
func (c *Codecs) Records(batch []byte) (shalelog.Header, []Record, error) {
	h, err := parseWhole(batch)
	if err != nil {
		return h, nil, err
	}
	payload := batch[shalelog.BatchHeaderSize:]
	if codec := h.Codec(); codec != shalelog.CodecNone {
		if payload, err = c.Decompress(codec, payload, nil); err != nil {
			return h, nil, err
		}
	}
	recs, err := decodeRecords(payload, int(h.RecordCount))
	if err != nil {
		return h, nil, err
	}
	return h, recs, nil
}

// Build encodes a new RecordBatch v2 holding recs compressed with codec. From h it takes
// BaseOffset, PartitionLeaderEpoch, Attributes (whose codec bits are replaced by codec),
// FirstTimestamp, MaxTimestamp, ProducerID, ProducerEpoch and BaseSequence; it computes
// Length, RecordCount, LastOffsetDelta (the last record's OffsetDelta; h's own when recs
// is empty, as for a compacted-away batch) and the CRC. Records are encoded as given,
// offset and timestamp deltas included.
func (c *Codecs) Build(h shalelog.Header, codec int, recs []Record) ([]byte, error) {
	if err := checkCodec(codec); err != nil {
		return nil, err
	}
	if len(recs) > math.MaxInt32 {
		return nil, fmt.Errorf("records: %d records do not fit a batch", len(recs))
	}
	h.RecordCount = int32(len(recs))
	if len(recs) > 0 {
		h.LastOffsetDelta = recs[len(recs)-1].OffsetDelta
	}
	h.Attributes = h.Attributes&^shalelog.AttrCompressionMask | int16(codec)

	size := shalelog.BatchHeaderSize
	for i := range recs {
		n, err := recordBodySize(&recs[i])
		if err != nil {
			return nil, err
		}
		size += varintLen(int64(n)) + n
	}
	var err error
	if codec == shalelog.CodecNone {
		out := appendHeader(make([]byte, 0, size), h)
		if out, err = appendRecords(out, recs); err != nil {
			return nil, err
		}
		return finishBatch(out)
	}
	sp := c.getScratch()
	raw, err := appendRecords((*sp)[:0], recs)
	defer c.putScratch(sp, raw)
	if err != nil {
		return nil, err
	}
	out := appendHeader(make([]byte, 0, shalelog.BatchHeaderSize+len(raw)/2+64), h)
	if out, err = c.Compress(codec, raw, out); err != nil {
		return nil, err
	}
	return finishBatch(out)
}

func appendRecords(dst []byte, recs []Record) ([]byte, error) {
	var err error
	for i := range recs {
		if dst, err = appendRecord(dst, &recs[i]); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendHeader appends h's fields in RecordBatch v2 order, magic 2, with Length and CRC
// left for finishBatch.
func appendHeader(dst []byte, h shalelog.Header) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseOffset))
	dst = binary.BigEndian.AppendUint32(dst, 0) // length
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, 2)                        // magic
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.LastOffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.FirstTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.RecordCount))
	return dst
}

// finishBatch fills in the length and CRC of a batch whose bytes are all in place.
func finishBatch(b []byte) ([]byte, error) {
	if len(b)-lengthOffset > math.MaxInt32 {
		return nil, fmt.Errorf("records: batch of %d bytes is too large", len(b))
	}
	binary.BigEndian.PutUint32(b[posLength:], uint32(len(b)-lengthOffset))
	binary.BigEndian.PutUint32(b[posCRC:], shalelog.ComputeCRC(b))
	return b, nil
}

// Recompress returns batch rewritten with codec, for a topic whose compression.type
// differs from the producer's. Offsets, timestamps, producer fields and the records
// themselves stay byte-for-byte identical; only the codec bits, payload, Length and CRC
// change. batch must be exactly one batch with a valid CRC. If it already uses codec it
// is returned as is (not copied).
//
// Kafka does not compress an uncompressed control batch; that policy is the caller's
// (see TargetCodec).
func (c *Codecs) Recompress(batch []byte, codec int) ([]byte, error) {
	if err := checkCodec(codec); err != nil {
		return nil, err
	}
	h, err := parseWhole(batch)
	if err != nil {
		return nil, err
	}
	if h.Codec() == codec {
		return batch, nil
	}
	payload := batch[shalelog.BatchHeaderSize:]
	if from := h.Codec(); from != shalelog.CodecNone {
		sp := c.getScratch()
		raw, err := c.Decompress(from, payload, (*sp)[:0])
		defer c.putScratch(sp, raw)
		if err != nil {
			return nil, err
		}
		payload = raw
	}
	room := len(payload)/2 + 64
	if codec == shalelog.CodecNone {
		room = len(payload)
	}
	out := make([]byte, shalelog.BatchHeaderSize, shalelog.BatchHeaderSize+room)
	copy(out, batch[:shalelog.BatchHeaderSize])
	attrs := binary.BigEndian.Uint16(out[posAttributes:])&^shalelog.AttrCompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(out[posAttributes:], attrs)
	if out, err = c.Compress(codec, payload, out); err != nil {
		return nil, err
	}
	return finishBatch(out)
}

// TargetCodec is the codec a produced batch is stored with under a topic's
// compression.type, as Kafka decides it: "producer" keeps the producer's codec, and an
// uncompressed control batch stays uncompressed. ok is false for an unknown
// compression.type.
func TargetCodec(compressionType string, h shalelog.Header) (codec int, ok bool) {
	if compressionType == "producer" {
		return h.Codec(), true
	}
	codec, ok = CodecByName(compressionType)
	if ok && h.IsControl() && h.Codec() == shalelog.CodecNone {
		return shalelog.CodecNone, true
	}
	return codec, ok
}
