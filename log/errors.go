package log

import (
	"errors"
	"fmt"
)

// Errors returned by the Log. Each maps to one Kafka error code in the protocol layer;
// check them with errors.Is, as they are usually wrapped with detail.
var (
	// ErrOffsetOutOfRange (Kafka OFFSET_OUT_OF_RANGE, 1): the offset is below the log
	// start offset or above the log end offset.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrStorage (Kafka KAFKA_STORAGE_ERROR, 56): a file operation failed (ENOSPC, EIO,
	// ...). The underlying syscall error is wrapped too. Nothing of a failed append is
	// visible; the log stays usable and a later append may succeed once space is freed.
	ErrStorage = errors.New("log storage error")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("log closed")
	// ErrUnexpectedOffset: AppendReplica got a batch whose base offset is below the log
	// end offset (Kafka's UnexpectedAppendOffsetException); the follower must truncate or
	// re-fetch. It also wraps ErrInvalidRecord.
	ErrUnexpectedOffset = fmt.Errorf("%w: unexpected base offset", ErrInvalidRecord)
)

// storageError wraps a failed file operation so that callers can match both ErrStorage
// and the syscall error (errors.Is(err, syscall.ENOSPC)).
func storageError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrStorage) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrStorage, op, err)
}

// errBeyondCapacity is an internal invariant failure: a write past a file's preallocated size.
var errBeyondCapacity = errors.New("write beyond the preallocated file size")

// errCorruptIndex marks an index file that disagrees with itself or its segment; the
// index is rebuilt from the segment.
var errCorruptIndex = errors.New("corrupt index")

// errLocked: another Log (in this process or another) has the directory open.
var errLocked = errors.New("log directory is in use by another open log")
