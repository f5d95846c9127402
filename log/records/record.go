package records

import (
	"encoding/binary"
	"fmt"
	"math"

	shalelog "github.com/shalelog/shale/log"
)

// Header is one record header. A nil Value is Kafka's null.
type Header struct {
	Key, Value []byte
}

// Record is one record of a RecordBatch v2. Nil Key or Value is Kafka's null; an empty
// non-nil slice is a present, zero-length key or value.
type Record struct {
	Attributes     int8 // unused by Kafka so far; kept as sent
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []Header
}

// minRecordSize is the smallest encoding of a record: one byte each for the length,
// attributes, timestamp delta, offset delta, key length, value length and header count.
// It bounds how many records a payload can hold before anything is allocated.
const minRecordSize = 7

// Record layout (all varints zig-zag encoded, as Kafka's ByteUtils writes them):
//
//	length varint (bytes that follow), attributes int8, timestampDelta varlong,
//	offsetDelta varint, keyLength varint (-1 null), key, valueLength varint, value,
//	headerCount varint, then per header keyLength varint, key, valueLength varint, value.

// recordDecoder walks the records of a decompressed payload.
type recordDecoder struct {
	buf   []byte
	pos   int
	index int // index of the record being decoded, for error messages
}

func (d *recordDecoder) fail(format string, args ...any) error {
	return fmt.Errorf("%w: record %d: %s", shalelog.ErrInvalidRecord, d.index, fmt.Sprintf(format, args...))
}

// varint reads a zig-zag varint that must fit an int32 (at most 5 bytes, as Kafka's
// ByteUtils.readVarint allows) from b at *p.
func varint32(b []byte, p *int) (int32, bool) {
	v, n := binary.Varint(b[*p:])
	if n <= 0 || n > binary.MaxVarintLen32 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	*p += n
	return int32(v), true
}

func varint64(b []byte, p *int) (int64, bool) {
	v, n := binary.Varint(b[*p:])
	if n <= 0 {
		return 0, false
	}
	*p += n
	return v, true
}

// bytesField reads a varint length and that many bytes; a negative length is null, as
// Kafka reads it.
func bytesField(b []byte, p *int) ([]byte, bool) {
	n, ok := varint32(b, p)
	if !ok {
		return nil, false
	}
	if n < 0 {
		return nil, true
	}
	if int(n) > len(b)-*p {
		return nil, false
	}
	f := b[*p : *p+int(n) : *p+int(n)]
	*p += int(n)
	return f, true
}

// next decodes the record at the cursor into r. With headers nil, header bytes are
// checked but not kept (the validation path); otherwise they are appended to *headers
// and r.Headers is left for the caller to slice out of it.
func (d *recordDecoder) next(r *Record, headers *[]Header) (headerCount int, err error) {
	b := d.buf
	p := d.pos
	if p >= len(b) {
		return 0, d.fail("missing: the payload ends after %d records", d.index)
	}
	length, ok := varint32(b, &p)
	if !ok {
		return 0, d.fail("malformed length varint at byte %d", d.pos)
	}
	if length < minRecordSize-1 || int(length) > len(b)-p {
		return 0, d.fail("length %d does not fit the %d bytes left", length, len(b)-p)
	}
	// Decode within the record's own bytes so no field can run into the next record.
	body := b[:p+int(length)]
	r.Attributes = int8(body[p])
	p++
	if r.TimestampDelta, ok = varint64(body, &p); !ok {
		return 0, d.fail("malformed timestamp delta")
	}
	if r.OffsetDelta, ok = varint32(body, &p); !ok {
		return 0, d.fail("malformed offset delta")
	}
	if r.Key, ok = bytesField(body, &p); !ok {
		return 0, d.fail("malformed key")
	}
	if r.Value, ok = bytesField(body, &p); !ok {
		return 0, d.fail("malformed value")
	}
	count, ok := varint32(body, &p)
	if !ok {
		return 0, d.fail("malformed header count")
	}
	// A header takes at least two bytes (two lengths).
	if count < 0 || int(count) > (len(body)-p)/2 {
		return 0, d.fail("header count %d does not fit the %d bytes left", count, len(body)-p)
	}
	for i := 0; i < int(count); i++ {
		keyLen, ok := varint32(body, &p)
		if !ok || keyLen < 0 || int(keyLen) > len(body)-p {
			return 0, d.fail("header %d: malformed or negative key length", i)
		}
		key := body[p : p+int(keyLen) : p+int(keyLen)]
		p += int(keyLen)
		value, ok := bytesField(body, &p)
		if !ok {
			return 0, d.fail("header %d: malformed value", i)
		}
		if headers != nil {
			*headers = append(*headers, Header{Key: key, Value: value})
		}
	}
	if p != len(body) {
		return 0, d.fail("length %d leaves %d bytes after the last field", length, len(body)-p)
	}
	d.pos = p
	d.index++
	return int(count), nil
}

func varintLen(v int64) int {
	ux := uint64(v) << 1
	if v < 0 {
		ux = ^ux
	}
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}

// decodeRecords decodes exactly count records from payload. Records alias payload.
func decodeRecords(payload []byte, count int) ([]Record, error) {
	if count < 0 || count > len(payload)/minRecordSize {
		return nil, fmt.Errorf("%w: %d records cannot fit in a %d-byte payload", shalelog.ErrInvalidRecord, count, len(payload))
	}
	recs := make([]Record, count)
	var headers []Header
	ends := make([]int, count) // end of each record's headers in the shared slice
	d := recordDecoder{buf: payload}
	for i := range recs {
		if _, err := d.next(&recs[i], &headers); err != nil {
			return nil, err
		}
		ends[i] = len(headers)
	}
	if d.pos != len(payload) {
		return nil, fmt.Errorf("%w: %d bytes left after the %d records the header counts", shalelog.ErrInvalidRecord, len(payload)-d.pos, count)
	}
	// Slice headers only now: appending may have moved the shared array.
	start := 0
	for i := range recs {
		if ends[i] > start {
			recs[i].Headers = headers[start:ends[i]:ends[i]]
		}
		start = ends[i]
	}
	return recs, nil
}

// recordBodySize is the encoded size of r without its leading length varint.
func recordBodySize(r *Record) (int, error) {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta))
	n += bytesFieldSize(r.Key) + bytesFieldSize(r.Value)
	n += varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += bytesFieldSize(h.Key) + bytesFieldSize(h.Value)
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("records: record of %d bytes is too large", n)
	}
	return n, nil
}

func bytesFieldSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytesField(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// appendRecord appends the wire form of r to dst.
func appendRecord(dst []byte, r *Record) ([]byte, error) {
	size, err := recordBodySize(r)
	if err != nil {
		return dst, err
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytesField(dst, r.Key)
	dst = appendBytesField(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		// A header key cannot be null in Kafka; write nil as empty.
		if h.Key == nil {
			dst = binary.AppendVarint(dst, 0)
		} else {
			dst = appendBytesField(dst, h.Key)
		}
		dst = appendBytesField(dst, h.Value)
	}
	return dst, nil
}
