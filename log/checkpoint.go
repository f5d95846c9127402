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

// The clean-shutdown marker says that the log was closed cleanly: every file synced and
// trimmed, nothing to scan on open. It also lists each segment's size, largest
// timestamp and modification time, so that a clean open learns them without opening
// two files per segment (at thousands of partitions, those opens were most of a
// restart), and the end and start offsets, so that it is the only file a clean open reads
// besides the directory. Text, like the checkpoints: a version line, "end start", then
// "base size maxTimestamp modTime rollTimestamp" per segment (rollTimestamp: the first
// batch's, which segment.ms counts from while the last segment waits for its first
// append).

const cleanShutdownVersion = "shale-clean-shutdown 1"

type segmentSummary struct{ base, size, maxTs, modTime, rollTs int64 }

func encodeCleanShutdown(end, start int64, segs []segmentSummary) []byte {
	b := fmt.Appendf(nil, "%s\n%d %d\n", cleanShutdownVersion, end, start)
	for _, s := range segs {
		b = fmt.Appendf(b, "%d %d %d %d %d\n", s.base, s.size, s.maxTs, s.modTime, s.rollTs)
	}
	return b
}

// decodeCleanShutdown parses a marker. A marker of an older version (the recovery
// point's format) still means a clean shutdown, only without the table.
func decodeCleanShutdown(b []byte) (end, start int64, table map[int64]segmentSummary, err error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 || lines[0] != cleanShutdownVersion {
		return 0, 0, nil, fmt.Errorf("clean-shutdown marker has no %q header", cleanShutdownVersion)
	}
	es, ss, _ := strings.Cut(lines[1], " ")
	end, err1 := strconv.ParseInt(es, 10, 64)
	start, err2 := strconv.ParseInt(ss, 10, 64)
	if err1 != nil || err2 != nil || end < 0 || start < 0 {
		return 0, 0, nil, fmt.Errorf("clean-shutdown marker: bad offsets %q", lines[1])
	}
	out := make(map[int64]segmentSummary, len(lines)-2)
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 5 {
			return 0, 0, nil, fmt.Errorf("clean-shutdown marker: bad line %q", line)
		}
		var v [5]int64
		for i := range f {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || (n < 0 && i != 2 && i != 4) {
				return 0, 0, nil, fmt.Errorf("clean-shutdown marker: bad line %q", line)
			}
			v[i] = n
		}
		out[v[0]] = segmentSummary{base: v[0], size: v[1], maxTs: v[2], modTime: v[3], rollTs: v[4]}
	}
	return end, start, out, nil
}
