package records

import (
	"encoding/binary"
	"fmt"

	shalelog "github.com/shalelog/shale/log"
)

// Marker is a transaction marker: the single control record of a control batch, which
// ends a producer's transaction on a partition (KIP-98's EndTransactionMarker).
type Marker struct {
	Commit bool
	// CoordinatorEpoch is the epoch of the coordinator that wrote the marker; a partition
	// refuses markers from an older coordinator than the last one it saw.
	CoordinatorEpoch int32
}

// Control record types in the key.
const (
	controlAbort  = 0
	controlCommit = 1
)

// BuildMarker encodes a control batch holding m for producer id and epoch, stamped ts.
// Kafka writes markers uncompressed, transactional, without a sequence.
func BuildMarker(producerID int64, producerEpoch int16, m Marker, ts int64) ([]byte, error) {
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[0:], 0) // version
	typ := uint16(controlAbort)
	if m.Commit {
		typ = controlCommit
	}
	binary.BigEndian.PutUint16(key[2:], typ)
	value := make([]byte, 6)
	binary.BigEndian.PutUint16(value[0:], 0) // version
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	h := shalelog.Header{
		Magic:          2,
		Attributes:     shalelog.AttrTransactional | shalelog.AttrControl,
		FirstTimestamp: ts,
		MaxTimestamp:   ts,
		ProducerID:     producerID,
		ProducerEpoch:  producerEpoch,
		BaseSequence:   -1,
	}
	return Build(h, shalelog.CodecNone, []Record{{Key: key, Value: value}})
}

// ParseMarker decodes the marker of a control batch. Control records of other types
// (Kafka reserves the key's type for more) are reported as an error.
func ParseMarker(batch []byte) (Marker, error) {
	h, recs, err := Records(batch)
	if err != nil {
		return Marker{}, err
	}
	if !h.IsControl() {
		return Marker{}, fmt.Errorf("%w: not a control batch", shalelog.ErrInvalidRecord)
	}
	if len(recs) != 1 {
		return Marker{}, fmt.Errorf("%w: control batch with %d records", shalelog.ErrInvalidRecord, len(recs))
	}
	key, value := recs[0].Key, recs[0].Value
	if len(key) < 4 || binary.BigEndian.Uint16(key) != 0 {
		return Marker{}, fmt.Errorf("%w: control record key %x", shalelog.ErrInvalidRecord, key)
	}
	var m Marker
	switch binary.BigEndian.Uint16(key[2:]) {
	case controlAbort:
	case controlCommit:
		m.Commit = true
	default:
		return Marker{}, fmt.Errorf("%w: control record type %d is not a transaction marker", shalelog.ErrInvalidRecord, binary.BigEndian.Uint16(key[2:]))
	}
	// The value's version may grow (Kafka reads the fields it knows).
	if len(value) < 6 {
		return Marker{}, fmt.Errorf("%w: transaction marker value of %d bytes", shalelog.ErrInvalidRecord, len(value))
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	return m, nil
}
