package remotelog

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// EpochEntry is a leader epoch and the first offset written in it, as in the leader
// epoch checkpoint: the entries of a segment are those whose ranges intersect it.
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// Segment describes one uploaded segment: what the controller records when an upload
// commits. TopicID, Partition, BaseOffset and UploadID name the objects; the rest says
// what the segment covers.
type Segment struct {
	TopicID   [16]byte
	Partition int32
	UploadID  [16]byte
	// BaseOffset is the segment's base offset (its file name); EndOffset is the
	// offset of its last record, inclusive.
	BaseOffset, EndOffset int64
	// MaxTimestamp is the largest batch timestamp in the segment (-1 if none).
	MaxTimestamp int64
	// SizeBytes is the size of the segment's log data.
	SizeBytes int64
	// Epochs are the leader epochs of the segment's batches, in order.
	Epochs []EpochEntry
}

// NewUploadID returns a random upload id.
func NewUploadID() [16]byte {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24 panics itself).
		panic(fmt.Sprintf("remotelog: reading random bytes: %v", err))
	}
	return id
}

// Object suffixes of an upload; see the package documentation.
const (
	suffixLog       = ".log"
	suffixIndex     = ".index"
	suffixTimeIndex = ".timeindex"
	suffixTxnIndex  = ".txnindex"
	suffixSnapshot  = ".snapshot"
	suffixManifest  = ".manifest"
)

// suffixes lists every object suffix, the manifest first: Delete removes it first, so
// that an upload deleted halfway is seen as incomplete, never as whole.
var suffixes = []string{suffixManifest, suffixLog, suffixIndex, suffixTimeIndex, suffixTxnIndex, suffixSnapshot}

// PartitionPrefix is the key prefix of every object of a partition's uploads.
func PartitionPrefix(topicID [16]byte, partition int32) string {
	return hex.EncodeToString(topicID[:]) + "/" + strconv.FormatInt(int64(partition), 10) + "/"
}

// stem is the key of an upload's objects without their suffix.
func stem(topicID [16]byte, partition int32, base int64, uploadID [16]byte) string {
	return fmt.Sprintf("%s%020d-%s", PartitionPrefix(topicID, partition), base, hex.EncodeToString(uploadID[:]))
}

// Key returns the key of one of seg's objects; suffix is ".log", ".index", ".timeindex",
// ".txnindex", ".snapshot" or ".manifest".
func (seg Segment) Key(suffix string) string {
	return stem(seg.TopicID, seg.Partition, seg.BaseOffset, seg.UploadID) + suffix
}

// parseStemName parses "<base>-<upload id>" (the part of a key after the partition
// prefix, without the suffix).
func parseStemName(name string) (base int64, uploadID [16]byte, ok bool) {
	b, u, found := strings.Cut(name, "-")
	if !found || len(b) != 20 || len(u) != 32 {
		return 0, uploadID, false
	}
	base, err := strconv.ParseInt(b, 10, 64)
	if err != nil || base < 0 {
		return 0, uploadID, false
	}
	if _, err := hex.Decode(uploadID[:], []byte(u)); err != nil {
		return 0, uploadID, false
	}
	return base, uploadID, true
}

// manifestVersion is the version of the manifest format written.
const manifestVersion = 1

// manifest is the JSON of an upload's .manifest object.
type manifest struct {
	Version      int          `json:"version"`
	TopicID      string       `json:"topic_id"`
	Partition    int32        `json:"partition"`
	UploadID     string       `json:"upload_id"`
	BaseOffset   int64        `json:"base_offset"`
	EndOffset    int64        `json:"end_offset"`
	MaxTimestamp int64        `json:"max_timestamp"`
	SizeBytes    int64        `json:"size_bytes"`
	Epochs       []EpochEntry `json:"epochs"`
	// Sizes of the other objects, by suffix; a suffix missing or 0 has no object.
	Objects map[string]int64 `json:"objects"`
}

func newManifest(seg Segment, objects map[string]int64) manifest {
	return manifest{
		Version:      manifestVersion,
		TopicID:      hex.EncodeToString(seg.TopicID[:]),
		Partition:    seg.Partition,
		UploadID:     hex.EncodeToString(seg.UploadID[:]),
		BaseOffset:   seg.BaseOffset,
		EndOffset:    seg.EndOffset,
		MaxTimestamp: seg.MaxTimestamp,
		SizeBytes:    seg.SizeBytes,
		Epochs:       seg.Epochs,
		Objects:      objects,
	}
}

var errBadManifest = errors.New("remotelog: invalid manifest")

func decodeManifest(b []byte) (manifest, Segment, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, Segment{}, fmt.Errorf("%w: %w", errBadManifest, err)
	}
	if m.Version != manifestVersion {
		return m, Segment{}, fmt.Errorf("%w: version %d", errBadManifest, m.Version)
	}
	seg := Segment{
		Partition:    m.Partition,
		BaseOffset:   m.BaseOffset,
		EndOffset:    m.EndOffset,
		MaxTimestamp: m.MaxTimestamp,
		SizeBytes:    m.SizeBytes,
		Epochs:       m.Epochs,
	}
	if err := decodeID(m.TopicID, &seg.TopicID); err != nil {
		return m, seg, err
	}
	if err := decodeID(m.UploadID, &seg.UploadID); err != nil {
		return m, seg, err
	}
	if m.Objects[suffixLog] != m.SizeBytes {
		return m, seg, fmt.Errorf("%w: log object of %d bytes for a segment of %d", errBadManifest, m.Objects[suffixLog], m.SizeBytes)
	}
	return m, seg, nil
}

func decodeID(s string, id *[16]byte) error {
	if len(s) != 32 {
		return fmt.Errorf("%w: id %q", errBadManifest, s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return fmt.Errorf("%w: id %q: %w", errBadManifest, s, err)
	}
	return nil
}
