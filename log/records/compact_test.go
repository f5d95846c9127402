package records

import (
	"bytes"
	"fmt"
	"testing"

	shalelog "github.com/shalelog/shale/log"
)

// TestCompactionFilterKeepsHeader filters every other record out of a batch in every
// codec and checks, with franz-go's decoder, that what Kafka's cleaner preserves is
// preserved: base offset, last offset delta, timestamps, producer fields, leader epoch,
// codec, and the kept records with their offset deltas, keys, values and headers.
func TestCompactionFilterKeepsHeader(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(CodecName(codec), func(t *testing.T) {
			h := testHeader()
			h.BaseOffset = 500
			var recs []Record
			for i := range 10 {
				r := Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{'v'}, 50)}
				if i == 4 {
					r.Value = nil
				}
				r.Headers = []Header{{Key: []byte("h"), Value: []byte{byte(i)}}}
				recs = append(recs, r)
			}
			batch, err := Build(h, codec, recs)
			if err != nil {
				t.Fatal(err)
			}
			f := CompactionFilter{}
			var seen []int64
			var tombs int
			if err := f.Records(batch, func(off int64, key []byte, tomb bool) {
				seen = append(seen, off)
				if tomb {
					tombs++
				}
			}); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 10 || seen[0] != 500 || seen[9] != 509 || tombs != 1 {
				t.Fatalf("Records saw %v with %d tombstones", seen, tombs)
			}

			same, n, err := f.Filter(batch, func(int64, []byte, bool) bool { return true })
			if err != nil || n != 10 || &same[0] != &batch[0] {
				t.Fatalf("keeping everything: %d kept, err %v, copied %v", n, err, &same[0] != &batch[0])
			}

			// Keep the even offsets except the last record (509 is odd anyway).
			out, n, err := f.Filter(batch, func(off int64, _ []byte, _ bool) bool { return off%2 == 0 })
			if err != nil || n != 5 {
				t.Fatalf("filter: %d kept, %v", n, err)
			}
			got, err := shalelog.ParseHeader(out)
			if err != nil {
				t.Fatal(err)
			}
			if got.BaseOffset != 500 || got.LastOffsetDelta != 9 || got.RecordCount != 5 ||
				got.FirstTimestamp != h.FirstTimestamp || got.MaxTimestamp != h.MaxTimestamp ||
				got.ProducerID != 77 || got.ProducerEpoch != 3 || got.BaseSequence != 1000 ||
				got.PartitionLeaderEpoch != 4 || got.Codec() != codec || !got.IsTransactional() {
				t.Fatalf("header after filtering: %+v", got)
			}
			if crc := shalelog.ComputeCRC(out); crc != got.CRC {
				t.Fatalf("crc %08x, computed %08x", got.CRC, crc)
			}
			kb, krecs := kmsgDecode(t, out)
			if kb.NumRecords != 5 || len(krecs) != 5 {
				t.Fatalf("franz-go reads %d records", len(krecs))
			}
			for i, r := range krecs {
				if r.OffsetDelta != int32(2*i) || string(r.Key) != fmt.Sprintf("k%d", 2*i) || len(r.Headers) != 1 || r.Headers[0].Value[0] != byte(2*i) {
					t.Fatalf("record %d: %+v", i, r)
				}
				if (2*i == 4) != (r.Value == nil) {
					t.Fatalf("record %d: tombstone lost or made", i)
				}
			}

			// Nothing kept: a header-only batch with the same offsets and producer.
			empty, n, err := f.Filter(batch, func(int64, []byte, bool) bool { return false })
			if err != nil || n != 0 {
				t.Fatalf("dropping everything: %d kept, %v", n, err)
			}
			eh, err := shalelog.ParseHeader(empty)
			if err != nil || eh.RecordCount != 0 || eh.LastOffsetDelta != 9 || eh.BaseSequence != 1000 || eh.ProducerID != 77 {
				t.Fatalf("empty batch %+v, %v", eh, err)
			}
			if _, recs, err := Records(empty); err != nil || len(recs) != 0 {
				t.Fatalf("empty batch reads %d records, %v", len(recs), err)
			}
		})
	}
}
