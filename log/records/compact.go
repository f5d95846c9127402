package records

import (
	"encoding/binary"

	shalelog "github.com/shalelog/shale/log"
)

// Byte position of lastOffsetDelta in a RecordBatch v2 header.
const posLastOffsetDelta = 23

// CompactionFilter gives the log cleaner (log.Log.Clean) the record-level view of
// batches it needs: keys, null values, and rebuilding a batch with fewer records. It
// lives here because log/ must not know the record encoding or the codecs.
type CompactionFilter struct {
	// Codecs decompresses and recompresses; nil means Default().
	Codecs *Codecs
}

func (f CompactionFilter) codecs() *Codecs {
	if f.Codecs != nil {
		return f.Codecs
	}
	return Default()
}

// Records calls fn with each record's offset, key (nil for a null key) and whether its
// value is null (a tombstone).
func (f CompactionFilter) Records(batch []byte, fn func(offset int64, key []byte, tombstone bool)) error {
	h, recs, err := f.codecs().Records(batch)
	if err != nil {
		return err
	}
	for i := range recs {
		fn(h.BaseOffset+int64(recs[i].OffsetDelta), recs[i].Key, recs[i].Value == nil)
	}
	return nil
}

// Filter returns batch with only the records keep accepts, and how many it kept. An
// unchanged batch is returned as it is. A rebuilt one keeps everything Kafka's cleaner
// keeps: base offset, last offset delta (so the producer's last sequence stays
// computable and no offset is reused), timestamps, attributes and codec, producer id,
// epoch and base sequence, and the partition leader epoch; with no record kept it is a
// header-only batch.
func (f CompactionFilter) Filter(batch []byte, keep func(offset int64, key []byte, tombstone bool) bool) ([]byte, int, error) {
	c := f.codecs()
	h, recs, err := c.Records(batch)
	if err != nil {
		return nil, 0, err
	}
	kept := recs[:0:0]
	for i := range recs {
		if keep(h.BaseOffset+int64(recs[i].OffsetDelta), recs[i].Key, recs[i].Value == nil) {
			kept = append(kept, recs[i])
		}
	}
	if len(kept) == len(recs) {
		return batch, len(kept), nil
	}
	out, err := c.Build(h, h.Codec(), kept)
	if err != nil {
		return nil, 0, err
	}
	binary.BigEndian.PutUint32(out[posLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint32(out[posCRC:], shalelog.ComputeCRC(out))
	shalelog.SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
	return out, len(kept), nil
}
