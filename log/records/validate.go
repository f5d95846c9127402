package records

import (
	"fmt"
	"time"

	shalelog "github.com/shalelog/shale/log"
)

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: a record without a timestamp.
const noTimestamp = -1

// ValidateOptions carries the topic settings Validate enforces. The zero value checks
// structure only, as for a client produce to a non-compacted CreateTime topic with
// unlimited timestamp range (Kafka's defaults).
type ValidateOptions struct {
	// Compacted is cleanup.policy containing "compact": every record needs a key.
	Compacted bool

	// MaxTimestampDiffMs is message.timestamp.difference.max.ms: record timestamps may
	// be at most this far from NowMs either way. <= 0 disables the check.
	MaxTimestampDiffMs int64
	// MaxTimestampBeforeMs and MaxTimestampAfterMs are KIP-937's
	// message.timestamp.before.max.ms / after.max.ms: how far in the past / future of
	// NowMs a timestamp may be. <= 0 disables each; combined with MaxTimestampDiffMs the
	// tighter bound wins.
	MaxTimestampBeforeMs int64
	MaxTimestampAfterMs  int64
	// NowMs is the broker's clock for the timestamp checks; 0 means time.Now().
	NowMs int64

	// LogAppendTime is message.timestamp.type=LogAppendTime: the broker will overwrite
	// timestamps, so they are not range-checked.
	LogAppendTime bool

	// Internal marks a batch written by the broker itself (transaction markers,
	// coordinator state) rather than by a client: Kafka's client-only checks (base
	// offset 0, no control batches, a sequence with every producer id) are skipped.
	Internal bool

	// SchemaIDs is the topic's broker-side schema ID validation
	// (confluent.key.schema.validation and confluent.value.schema.validation); the zero
	// value checks nothing. It runs on the records as this pass decodes them, so a
	// compressed batch is decompressed once for every check.
	SchemaIDs SchemaIDs
}

// Summary is what validation learns about a batch beyond its header.
type Summary struct {
	Header shalelog.Header
	// MaxTimestamp is the largest record timestamp (Kafka's maxTimestamp for CreateTime
	// topics, which Kafka writes back into the header), or -1 if no record has one.
	MaxTimestamp int64
	// MaxTimestampIndex is the index of the first record carrying MaxTimestamp, or -1.
	MaxTimestampIndex int
	// UncompressedBytes is the size of the records payload after decompression.
	UncompressedBytes int
	// SchemaRefused counts the records refused by schema ID validation.
	SchemaRefused int
}

// Validate checks one produced batch the way Kafka's LogValidator does for magic v2,
// using the Default Codecs. See Codecs.Validate.
func Validate(batch []byte, opt ValidateOptions) (shalelog.Header, error) {
	return Default().Validate(batch, opt)
}

// ValidateSummary is Validate that also reports the records' maximum timestamp and
// decompressed size, using the Default Codecs.
func ValidateSummary(batch []byte, opt ValidateOptions) (Summary, error) {
	return Default().ValidateSummary(batch, opt)
}

// Validate checks that batch is exactly one well-formed RecordBatch v2 a client may
// append, and returns its header. Checks, in order:
//
//   - header: magic, length, CRC32C, record count > 0, lastOffsetDelta = count-1
//     (log.ValidateHeader): log.ErrCorruptMessage or log.ErrInvalidRecord;
//   - no bytes after the batch (Produce v3+ carries exactly one batch);
//   - unless opt.Internal: base offset 0, not a control batch, a non-negative base
//     sequence when a producer id is set: log.ErrInvalidRecord;
//   - a known codec (ErrUnsupportedCompression) whose payload decompresses
//     (log.ErrCorruptMessage, or ErrDecompressedTooLarge);
//   - every record decodes with consistent varint lengths, offset deltas are 0, 1, 2, ...
//     and exactly RecordCount records fill the payload: log.ErrInvalidRecord;
//   - per record, keys on compacted topics, timestamps in range and, when opt.SchemaIDs
//     asks, a registered schema id at the head of the key and value: a
//     *ValidationError listing every offending record (ErrInvalidTimestamp or
//     log.ErrInvalidRecord), one reason per record.
//
// Kafka itself accepts uncompressed batches with gapped offset deltas and rewrites
// compressed ones; Shale rejects both, so the log never holds a batch whose records
// disagree with its header.
func (c *Codecs) Validate(batch []byte, opt ValidateOptions) (shalelog.Header, error) {
	s, err := c.ValidateSummary(batch, opt)
	return s.Header, err
}

// ValidateSummary is Validate that also returns what it learnt about the records.
func (c *Codecs) ValidateSummary(batch []byte, opt ValidateOptions) (Summary, error) {
	s := Summary{MaxTimestamp: noTimestamp, MaxTimestampIndex: -1}
	h, err := shalelog.ValidateHeader(batch)
	s.Header = h
	if err != nil {
		return s, err
	}
	if rest := batch[h.Size():]; len(rest) > 0 {
		if _, err := shalelog.ParseHeader(rest); err == nil {
			return s, fmt.Errorf("%w: more than one record batch", shalelog.ErrInvalidRecord)
		}
		return s, fmt.Errorf("%w: %d bytes after the batch", shalelog.ErrCorruptMessage, len(rest))
	}
	if !opt.Internal {
		if err := checkClientBatch(h); err != nil {
			return s, err
		}
	}
	codec := h.Codec()
	if err := checkCodec(codec); err != nil {
		return s, err
	}

	payload := batch[shalelog.BatchHeaderSize:h.Size()]
	if codec != shalelog.CodecNone {
		sp := c.getScratch()
		buf, err := c.Decompress(codec, payload, (*sp)[:0])
		defer c.putScratch(sp, buf)
		if err != nil {
			return s, err
		}
		payload = buf
	}
	s.UncompressedBytes = len(payload)
	if err := checkRecords(&s, payload, opt); err != nil {
		return s, err
	}
	return s, nil
}

// checkClientBatch applies the checks Kafka reserves for batches from clients.
func checkClientBatch(h shalelog.Header) error {
	switch {
	case h.BaseOffset != 0:
		return fmt.Errorf("%w: base offset %d, a produced batch must start at 0", shalelog.ErrInvalidRecord, h.BaseOffset)
	case h.IsControl():
		return fmt.Errorf("%w: clients may not write control batches", shalelog.ErrInvalidRecord)
	case h.HasProducer() && h.BaseSequence < 0:
		return fmt.Errorf("%w: base sequence %d with producer id %d", shalelog.ErrInvalidRecord, h.BaseSequence, h.ProducerID)
	}
	return nil
}

// timestampBounds are the allowed distances of a record timestamp from now.
type timestampBounds struct {
	now           int64
	before, after uint64 // 0: unbounded
	check         bool
}

func boundsFor(opt ValidateOptions) timestampBounds {
	tighter := func(a, b int64) uint64 {
		switch {
		case a <= 0 && b <= 0:
			return 0
		case a <= 0:
			return uint64(b)
		case b <= 0:
			return uint64(a)
		}
		return uint64(min(a, b))
	}
	t := timestampBounds{
		before: tighter(opt.MaxTimestampDiffMs, opt.MaxTimestampBeforeMs),
		after:  tighter(opt.MaxTimestampDiffMs, opt.MaxTimestampAfterMs),
	}
	t.check = !opt.LogAppendTime && (t.before > 0 || t.after > 0)
	if t.check {
		t.now = opt.NowMs
		if t.now == 0 {
			t.now = time.Now().UnixMilli()
		}
	}
	return t
}

// outOfRange reports whether ts is further from now than allowed. The differences are
// taken in uint64 so extreme timestamps cannot overflow.
func (t timestampBounds) outOfRange(ts int64) bool {
	if ts < t.now {
		return t.before > 0 && uint64(t.now)-uint64(ts) > t.before
	}
	return t.after > 0 && uint64(ts)-uint64(t.now) > t.after
}

// checkRecords decodes every record of payload and applies the record-level rules.
func checkRecords(s *Summary, payload []byte, opt ValidateOptions) error {
	h := s.Header
	count := int(h.RecordCount)
	if count > len(payload)/minRecordSize {
		return fmt.Errorf("%w: %d records cannot fit in a %d-byte payload", shalelog.ErrInvalidRecord, count, len(payload))
	}
	bounds := boundsFor(opt)
	schemas := opt.SchemaIDs.on()
	var rejected []RecordError
	anyTimestamp := false
	d := recordDecoder{buf: payload}
	var r Record
	for i := 0; i < count; i++ {
		if _, err := d.next(&r, nil); err != nil {
			return err
		}
		if r.OffsetDelta != int32(i) {
			return fmt.Errorf("%w: record %d has offset delta %d; deltas must run 0, 1, 2, ...", shalelog.ErrInvalidRecord, i, r.OffsetDelta)
		}
		ts := h.FirstTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp // what Kafka's record.timestamp() reports for such a batch
		}
		if ts > s.MaxTimestamp {
			s.MaxTimestamp, s.MaxTimestampIndex = ts, i
		}
		if opt.Compacted && r.Key == nil {
			rejected = append(rejected, RecordError{Index: i, Message: "Compacted topic cannot accept message without key"})
			continue
		}
		// Kafka range-checks only CreateTime topics and records with a timestamp; a
		// producer-set LogAppendTime is refused where that check does not apply.
		switch {
		case !opt.LogAppendTime && ts != noTimestamp:
			if bounds.check && bounds.outOfRange(ts) {
				anyTimestamp = true
				rejected = append(rejected, RecordError{Index: i, Message: fmt.Sprintf(
					"Timestamp %d of message with offset %d is out of range (now %d, %s)", ts, i, bounds.now, bounds.describe())})
				continue
			}
		case h.LogAppendTime():
			anyTimestamp = true
			rejected = append(rejected, RecordError{Index: i, Message: "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."})
			continue
		}
		// Confluent Server checks schema ids after Kafka's own record checks, so a record
		// both checks refuse is reported for Kafka's reason.
		if schemas {
			if msg := opt.SchemaIDs.check(&r); msg != "" {
				s.SchemaRefused++
				rejected = append(rejected, RecordError{Index: i, Message: msg})
			}
		}
	}
	if d.pos != len(payload) {
		return fmt.Errorf("%w: %d bytes left after the %d records the header counts", shalelog.ErrInvalidRecord, len(payload)-d.pos, count)
	}
	if len(rejected) > 0 {
		e := &ValidationError{Err: shalelog.ErrInvalidRecord, Records: rejected}
		if anyTimestamp {
			e.Err = ErrInvalidTimestamp
		}
		return e
	}
	return nil
}

func (t timestampBounds) describe() string {
	f := func(v uint64) string {
		if v == 0 {
			return "unbounded"
		}
		return fmt.Sprintf("%d ms", v)
	}
	return fmt.Sprintf("allowed %s before, %s after", f(t.before), f(t.after))
}
