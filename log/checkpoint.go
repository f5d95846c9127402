package log

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// A checkpoint file holds one offset: the recovery point (everything below it was
// durable when written, so recovery need not scan it) or the log start offset (raised
// by DeleteRecordsBefore, below which nothing may be read). Like Kafka's checkpoint
// files they are text, a version line then the value, replaced atomically.

const checkpointVersion = "shale-offset-checkpoint 1"

func encodeCheckpoint(offset int64) []byte {
	return fmt.Appendf(nil, "%s\n%d\n", checkpointVersion, offset)
}

func decodeCheckpoint(b []byte) (int64, error) {
	version, rest, ok := strings.Cut(string(b), "\n")
	if !ok || version != checkpointVersion {
		return 0, fmt.Errorf("checkpoint has no %q header", checkpointVersion)
	}
	value, tail, ok := strings.Cut(rest, "\n")
	if !ok || tail != "" {
		return 0, fmt.Errorf("checkpoint is not one offset per line")
	}
	off, err := strconv.ParseInt(value, 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("checkpoint offset %q is not a non-negative integer", value)
	}
	return off, nil
}

// readCheckpoint returns the offset in dir/name; ok is false when the file is missing.
func readCheckpoint(fsys fileSystem, dir, name string) (offset int64, ok bool, err error) {
	b, err := readWholeFile(fsys, filepath.Join(dir, name))
	if isNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	off, err := decodeCheckpoint(b)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", name, err)
	}
	return off, true, nil
}

func writeCheckpoint(fsys fileSystem, dir, name string, offset int64) error {
	if err := writeFileAtomic(fsys, filepath.Join(dir, name), encodeCheckpoint(offset)); err != nil {
		return storageError("write "+name, err)
	}
	return nil
}
