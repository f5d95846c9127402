package partition

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The replica's durable state besides its log, in Kafka's file names and text formats so
// that an operator who knows Kafka can read them:
//   - partition.metadata: the topic id, so that a directory left by a deleted topic is
//     never taken for a new topic of the same name;
//   - leader-epoch-checkpoint: the epoch cache, so that an epoch that began without a
//     batch yet (a leader elected at its log end) survives a restart;
//   - replication-offset-checkpoint (one per log directory, written by the Manager): the
//     high watermarks, from which a restarted replica starts rather than from its log
//     end. (A replica elected with an ISR of one still commits its whole log at once:
//     see README, Durability.)
//   - NNNNNNNNNNNNNNNNNNNN.snapshot, for a Tiered partition: the producer state as of a
//     local segment's base offset, written at its roll and uploaded with the segment
//     before (tiered.go); producer-state.json is the one of a clean shutdown
//     (producers.go).

const (
	topicIDFile         = "partition.metadata"
	epochCheckpointFile = "leader-epoch-checkpoint"
	hwCheckpointFile    = "replication-offset-checkpoint"
)

// ErrTopicIDMismatch means a replica directory belongs to another topic of the same name
// (one deleted and recreated while this broker was away).
var ErrTopicIDMismatch = errors.New("replica directory belongs to another topic id")

// writeFileAtomic replaces path with b: written to a temporary file, synced, renamed over
// path, and the directory synced, so a crash leaves the old or the new content.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := writeFileSync(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// checkTopicID compares the directory's recorded topic id with id, recording id when the
// directory has none yet. A zero id (metadata without ids) is never recorded or checked.
func checkTopicID(dir string, id [16]byte) error {
	if id == ([16]byte{}) {
		return nil
	}
	path := filepath.Join(dir, topicIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return writeFileAtomic(path, fmt.Appendf(nil, "version: 0\ntopic_id: %s\n", hex.EncodeToString(id[:])))
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	got, err := parseTopicID(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got != id {
		return fmt.Errorf("%w: %s holds topic id %x, the metadata says %x", ErrTopicIDMismatch, dir, got, id)
	}
	return nil
}

func parseTopicID(b []byte) ([16]byte, error) {
	var id [16]byte
	for line := range strings.SplitSeq(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "topic_id: ")
		if !ok {
			continue
		}
		raw, err := hex.DecodeString(strings.TrimSpace(v))
		if err != nil || len(raw) != 16 {
			return id, fmt.Errorf("bad topic_id %q", v)
		}
		copy(id[:], raw)
		return id, nil
	}
	return id, errors.New("no topic_id line")
}

// encodeEpochs writes the epoch cache as Kafka's leader-epoch-checkpoint: version 0, the
// entry count, then "epoch startOffset" per line.
func encodeEpochs(entries []epochEntry) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&buf, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return buf.Bytes()
}

func decodeEpochs(b []byte) ([]epochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || lines[0] != "0" {
		return nil, errors.New("not a version 0 leader-epoch-checkpoint")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("entry count %q does not match %d lines", lines[1], len(lines)-2)
	}
	out := make([]epochEntry, 0, n)
	for _, l := range lines[2:] {
		es, os, ok := strings.Cut(l, " ")
		e, err1 := strconv.ParseInt(es, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("bad entry %q", l)
		}
		if k := len(out); k > 0 && (out[k-1].Epoch >= int32(e) || out[k-1].StartOffset > o) {
			return nil, fmt.Errorf("entry %q is not after the previous one", l)
		}
		out = append(out, epochEntry{Epoch: int32(e), StartOffset: o})
	}
	return out, nil
}

// encodeHighWatermarks writes Kafka's replication-offset-checkpoint: version 0, the
// count, then "topic partition offset" per line, sorted for stable output.
func encodeHighWatermarks(hws map[TopicPartition]int64) []byte {
	keys := make([]TopicPartition, 0, len(hws))
	for tp := range hws {
		keys = append(keys, tp)
	}
	slices.SortFunc(keys, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Index) - int(b.Index)
	})
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(keys))
	for _, tp := range keys {
		fmt.Fprintf(&buf, "%s %d %d\n", tp.Topic, tp.Index, hws[tp])
	}
	return buf.Bytes()
}

func decodeHighWatermarks(b []byte) (map[TopicPartition]int64, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		return nil, errors.New("not a version 0 replication-offset-checkpoint")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("entry count %q does not match %d lines", lines[1], len(lines)-2)
	}
	out := make(map[TopicPartition]int64, n)
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("bad entry %q", l)
		}
		idx, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || idx < 0 || off < 0 {
			return nil, fmt.Errorf("bad entry %q", l)
		}
		out[TopicPartition{f[0], int32(idx)}] = off
	}
	return out, nil
}
