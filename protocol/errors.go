package protocol

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// Kafka error codes used directly.
const (
	codeNone               int16 = 0
	codeUnknownServerError int16 = -1
	codeUnsupportedVersion int16 = 35
)

// errorCode maps an error from any layer to the code Kafka would send. Errors that wrap
// a *kerr.Error carry their own code; storage errors map to KAFKA_STORAGE_ERROR so that
// clients retry elsewhere instead of hanging (a full disk is not BROKER_NOT_AVAILABLE).
func errorCode(err error) int16 {
	if err == nil {
		return codeNone
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if code, ok := records.ErrorCode(err); ok {
		return code
	}
	switch {
	case errors.Is(err, shalelog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, shalelog.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, shalelog.ErrClosed):
		// The replica was removed (topic deleted, reassigned) or the broker is stopping:
		// the client should look for the partition elsewhere, not mark a disk failed.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return codeUnknownServerError
}

// errorMessage is the text sent beside a code where the response has a message field:
// only what is specific to this failure. Clients print the code's own name and
// description beside it (kadm's ErrMessage, Kafka's ApiException), so an error that
// wraps a *kerr.Error (kafkaErrorf in the controller, fmt.Errorf("%w: ...") here) has that
// text cut out, wherever in the chain it sits; nil when nothing else is left.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		k := ke.Error()
		s = strings.ReplaceAll(s, k+": ", "")
		s = strings.ReplaceAll(s, ": "+k, "")
		if s == k || s == "" {
			return nil
		}
	}
	return &s
}
