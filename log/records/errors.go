package records

import (
	"errors"
	"fmt"
	"strings"

	shalelog "github.com/shalelog/shale/log"
)

// Errors of this package beyond the ones package log defines. Each maps to one Kafka
// error code (see ErrorCode).
var (
	// ErrInvalidTimestamp (Kafka INVALID_TIMESTAMP, 32): a record's timestamp is outside
	// the topic's allowed range, or the producer stamped the batch LogAppendTime.
	ErrInvalidTimestamp = errors.New("invalid record timestamp")

	// ErrUnsupportedCompression (Kafka UNSUPPORTED_COMPRESSION_TYPE, 76): the codec bits
	// name no codec Kafka knows (5, 6 or 7).
	ErrUnsupportedCompression = errors.New("unsupported compression codec")

	// ErrDecompressedTooLarge (wraps log.ErrMessageTooLarge, Kafka MESSAGE_TOO_LARGE, 10):
	// the records payload decompresses to more than Config.MaxDecompressedBytes. Kafka has
	// no such limit; it exists so a compression bomb cannot exhaust memory, and
	// MESSAGE_TOO_LARGE lets a Java producer split the batch and retry.
	ErrDecompressedTooLarge = fmt.Errorf("%w: records payload decompresses beyond the limit", shalelog.ErrMessageTooLarge)
)

// Kafka error codes the errors above and package log's map to.
const (
	codeCorruptMessage         int16 = 2
	codeMessageTooLarge        int16 = 10
	codeInvalidTimestamp       int16 = 32
	codeUnsupportedCompression int16 = 76
	codeInvalidRecord          int16 = 87
)

// ErrorCode returns the Kafka error code for an error from this package (or from
// package log's batch checks), and false for any other error.
func ErrorCode(err error) (int16, bool) {
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, ErrInvalidTimestamp):
		return codeInvalidTimestamp, true
	case errors.Is(err, ErrUnsupportedCompression):
		return codeUnsupportedCompression, true
	case errors.Is(err, shalelog.ErrMessageTooLarge):
		return codeMessageTooLarge, true
	case errors.Is(err, shalelog.ErrInvalidRecord):
		return codeInvalidRecord, true
	case errors.Is(err, shalelog.ErrCorruptMessage):
		return codeCorruptMessage, true
	}
	return 0, false
}

// RecordError describes why one record of a batch was rejected; it is what Kafka puts
// in ProduceResponse v8+'s RecordErrors (batch_index, batch_index_error_message).
type RecordError struct {
	Index   int    // position of the record in its batch, from 0
	Message string // human-readable reason
}

// ValidationError is returned by Validate when individual records break a topic rule
// (key required on compacted topics, timestamp range). Like Kafka it reports every
// offending record, and is INVALID_TIMESTAMP if any record's timestamp is at fault,
// INVALID_RECORD otherwise. Structural damage is reported as a plain wrapped error
// instead, because decoding stops at the first broken record.
type ValidationError struct {
	Err     error // ErrInvalidTimestamp or log.ErrInvalidRecord
	Records []RecordError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	fmt.Fprintf(&b, ": %d record(s) rejected", len(e.Records))
	for i, r := range e.Records {
		if i == 3 {
			b.WriteString("; ...")
			break
		}
		fmt.Fprintf(&b, "; record %d: %s", r.Index, r.Message)
	}
	return b.String()
}

func (e *ValidationError) Unwrap() error { return e.Err }

// Message is the top-level error message Kafka sends with a record-level rejection.
func (e *ValidationError) Message() string {
	if errors.Is(e.Err, ErrInvalidTimestamp) {
		return "One or more records have been rejected due to invalid timestamp"
	}
	return fmt.Sprintf("One or more records have been rejected due to %d record errors in total", len(e.Records))
}
