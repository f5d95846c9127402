package protocol

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
)

// A closed log that reaches a handler unmapped is a replica that went away, not a
// failed disk; a storage failure stays KAFKA_STORAGE_ERROR.
func TestErrorCodeClosedLog(t *testing.T) {
	if got := errorCode(fmt.Errorf("read: %w", shalelog.ErrClosed)); got != kerr.NotLeaderForPartition.Code {
		t.Errorf("closed log: %v", kerr.ErrorForCode(got))
	}
	if got := errorCode(fmt.Errorf("write: %w", shalelog.ErrStorage)); got != kerr.KafkaStorageError.Code {
		t.Errorf("storage: %v", kerr.ErrorForCode(got))
	}
}
