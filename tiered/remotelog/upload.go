package remotelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/tiered/objstore"
)

// Files are the local files of a closed segment, as the replica manager finds them in
// the partition's log directory. TxnIndex may be "" when the segment has none.
type Files struct {
	Log, OffsetIndex, TimeIndex, TxnIndex string
	// LogPosition is the byte position in Log of the batch at seg.BaseOffset: 0 for a
	// whole segment. Above 0 only the segment's part from there is uploaded, as
	// seg.SizeBytes bytes: a local segment that begins inside the remote log (rolled
	// elsewhere than the uploader of the remote log's last segment rolled it) goes on
	// from the remote log's end, so that remote segments stay contiguous without
	// overlap. The local indexes are relative to the file's start then, so the part's
	// offset and time indexes are rebuilt from its batches, and its transaction index
	// keeps the aborts whose markers are in the part.
	LogPosition int64
	// ProducerSnapshot is the producer state as of the segment's end (EndOffset+1),
	// in the broker's snapshot format; nil when there is none.
	ProducerSnapshot []byte
}

// ErrInvalidSegment is returned (wrapped) by Upload when the segment's description or
// its files are not consistent: nothing is uploaded then.
var ErrInvalidSegment = errors.New("remotelog: invalid segment")

// Upload copies a closed segment to store under seg's keys and writes the manifest
// last. The log file is read up to seg.SizeBytes (a sealed segment's file may still be
// preallocated past it) and checked to hold whole batches from BaseOffset to EndOffset;
// the indexes are cut to their valid entries. seg.UploadID must be fresh (NewUploadID).
//
// An error leaves the outcome unknown: some objects, even the manifest, may exist. The
// caller records nothing then and leaves the objects to orphan cleanup (ListUploads).
func Upload(ctx context.Context, store objstore.Store, seg Segment, files Files) error {
	if err := checkSegment(seg); err != nil {
		return err
	}
	if files.LogPosition < 0 {
		return fmt.Errorf("%w: log position %d", ErrInvalidSegment, files.LogPosition)
	}
	logFile, err := os.Open(files.Log)
	if err != nil {
		return fmt.Errorf("remotelog: upload segment %d: %w", seg.BaseOffset, err)
	}
	defer logFile.Close()
	var rebuilt *indexBuilder
	if files.LogPosition > 0 {
		rebuilt = &indexBuilder{base: seg.BaseOffset, lastTs: -1}
	}
	if err := checkLogFile(logFile, files.LogPosition, seg, rebuilt); err != nil {
		return err
	}
	var index, timeIndex []byte
	if rebuilt != nil {
		index, timeIndex = rebuilt.index, rebuilt.timeIndex
	} else {
		if index, err = readIndex(files.OffsetIndex, shalelog.OffsetIndexEntrySize, validOffsetEntries(seg)); err != nil {
			return err
		}
		if timeIndex, err = readIndex(files.TimeIndex, shalelog.TimeIndexEntrySize, validTimeEntries(seg)); err != nil {
			return err
		}
	}
	var txnIndex []byte
	if files.TxnIndex != "" {
		b, err := os.ReadFile(files.TxnIndex)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remotelog: upload segment %d: %w", seg.BaseOffset, err)
		}
		txns, derr := shalelog.DecodeTxnIndex(b)
		if derr != nil {
			return fmt.Errorf("%w: transaction index %s: %w", ErrInvalidSegment, files.TxnIndex, derr)
		}
		txnIndex = b
		if rebuilt != nil {
			// The aborts whose markers are below the part are in the remote
			// segment that holds those markers.
			txnIndex = nil
			for _, a := range txns {
				if a.LastOffset >= seg.BaseOffset {
					txnIndex = shalelog.EncodeAbortedTxn(txnIndex, a)
				}
			}
		}
	}

	objects := map[string]int64{suffixLog: seg.SizeBytes}
	if err := store.Put(ctx, seg.Key(suffixLog), io.NewSectionReader(logFile, files.LogPosition, seg.SizeBytes), seg.SizeBytes); err != nil {
		return fmt.Errorf("remotelog: upload segment %d log: %w", seg.BaseOffset, err)
	}
	for _, o := range []struct {
		suffix string
		data   []byte
	}{
		{suffixIndex, index},
		{suffixTimeIndex, timeIndex},
		{suffixTxnIndex, txnIndex},
		{suffixSnapshot, files.ProducerSnapshot},
	} {
		// The indexes are always written, even empty: a reader of an old upload
		// then never mistakes a lost index for an empty one.
		if len(o.data) == 0 && (o.suffix == suffixTxnIndex || o.suffix == suffixSnapshot) {
			continue
		}
		if err := store.Put(ctx, seg.Key(o.suffix), bytes.NewReader(o.data), int64(len(o.data))); err != nil {
			return fmt.Errorf("remotelog: upload segment %d %s: %w", seg.BaseOffset, o.suffix, err)
		}
		objects[o.suffix] = int64(len(o.data))
	}
	m, err := json.Marshal(newManifest(seg, objects))
	if err != nil {
		return fmt.Errorf("remotelog: encode manifest: %w", err)
	}
	if err := store.Put(ctx, seg.Key(suffixManifest), bytes.NewReader(m), int64(len(m))); err != nil {
		return fmt.Errorf("remotelog: upload segment %d manifest: %w", seg.BaseOffset, err)
	}
	return nil
}

func checkSegment(seg Segment) error {
	switch {
	case seg.UploadID == [16]byte{}:
		return fmt.Errorf("%w: zero upload id", ErrInvalidSegment)
	case seg.BaseOffset < 0 || seg.EndOffset < seg.BaseOffset:
		return fmt.Errorf("%w: offsets %d to %d", ErrInvalidSegment, seg.BaseOffset, seg.EndOffset)
	case seg.SizeBytes < shalelog.BatchHeaderSize:
		return fmt.Errorf("%w: %d bytes", ErrInvalidSegment, seg.SizeBytes)
	case seg.Partition < 0:
		return fmt.Errorf("%w: partition %d", ErrInvalidSegment, seg.Partition)
	}
	return nil
}

// batchHeader is what the remote log needs of a RecordBatch header.
type batchHeader struct {
	base, last, maxTs int64
	size              int64
}

// parseBatchHeader decodes the header at the start of b (at least BatchHeaderSize
// bytes); unlike log.ParseHeader it does not need the whole batch.
func parseBatchHeader(b []byte) (batchHeader, error) {
	if len(b) < shalelog.BatchHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", shalelog.ErrCorruptMessage, len(b))
	}
	length := int32(binary.BigEndian.Uint32(b[8:]))
	if magic := int8(b[16]); magic != 2 {
		return batchHeader{}, fmt.Errorf("%w: magic %d", shalelog.ErrCorruptMessage, magic)
	}
	if length < shalelog.BatchHeaderSize-12 {
		return batchHeader{}, fmt.Errorf("%w: batch length %d", shalelog.ErrCorruptMessage, length)
	}
	base := int64(binary.BigEndian.Uint64(b[0:]))
	delta := int32(binary.BigEndian.Uint32(b[23:]))
	if delta < 0 {
		return batchHeader{}, fmt.Errorf("%w: last offset delta %d", shalelog.ErrCorruptMessage, delta)
	}
	return batchHeader{
		base:  base,
		last:  base + int64(delta),
		maxTs: int64(binary.BigEndian.Uint64(b[35:])),
		size:  int64(length) + 12,
	}, nil
}

// indexBuilder rebuilds the offset and time indexes of a part of a segment from its
// batch headers, in the local formats, relative to the part's base offset and first
// byte: an offset entry every index interval of log bytes, and a time entry whenever
// such an entry sees a larger timestamp than the last time entry (as the local log
// writes them).
type indexBuilder struct {
	base             int64
	index, timeIndex []byte
	sinceEntry       int64 // bytes since the last offset entry
	maxTs, maxTsOff  int64 // largest timestamp so far and the base offset of its batch
	lastTs           int64 // timestamp of the last time entry
}

// add notes the batch h at pos (relative to the part's first byte).
func (b *indexBuilder) add(pos int64, h batchHeader) {
	if pos == 0 || h.maxTs > b.maxTs {
		b.maxTs, b.maxTsOff = h.maxTs, h.base
	}
	if pos > 0 && b.sinceEntry >= shalelog.DefaultIndexIntervalBytes {
		b.index = binary.BigEndian.AppendUint32(b.index, uint32(h.base-b.base))
		b.index = binary.BigEndian.AppendUint32(b.index, uint32(pos))
		b.sinceEntry = 0
		if b.maxTs > b.lastTs && b.maxTs > 0 {
			b.timeIndex = binary.BigEndian.AppendUint64(b.timeIndex, uint64(b.maxTs))
			b.timeIndex = binary.BigEndian.AppendUint32(b.timeIndex, uint32(b.maxTsOff-b.base))
			b.lastTs = b.maxTs
		}
	}
	b.sinceEntry += h.size
}

// checkLogFile walks the batch headers of the SizeBytes bytes of f from start: whole
// batches, in offset order, inside [BaseOffset, EndOffset], the first one at
// BaseOffset when start is not 0 (a part begins where a batch does), the last one
// ending at EndOffset. When rebuild is not nil it gets every batch.
func checkLogFile(f *os.File, start int64, seg Segment, rebuild *indexBuilder) error {
	var hdr [shalelog.BatchHeaderSize]byte
	prevLast := seg.BaseOffset - 1
	for pos := int64(0); pos < seg.SizeBytes; {
		if _, err := f.ReadAt(hdr[:], start+pos); err != nil {
			return fmt.Errorf("%w: segment %d: reading the batch at %d: %w", ErrInvalidSegment, seg.BaseOffset, pos, err)
		}
		h, err := parseBatchHeader(hdr[:])
		if err != nil {
			return fmt.Errorf("%w: segment %d position %d: %w", ErrInvalidSegment, seg.BaseOffset, pos, err)
		}
		if h.base <= prevLast || h.last > seg.EndOffset || pos+h.size > seg.SizeBytes {
			return fmt.Errorf("%w: segment %d position %d: batch %d-%d (%d bytes) after %d, segment ends at %d (%d bytes)",
				ErrInvalidSegment, seg.BaseOffset, pos, h.base, h.last, h.size, prevLast, seg.EndOffset, seg.SizeBytes)
		}
		if pos == 0 && start > 0 && h.base != seg.BaseOffset {
			return fmt.Errorf("%w: segment %d: the batch at position %d begins at %d", ErrInvalidSegment, seg.BaseOffset, start, h.base)
		}
		if rebuild != nil {
			rebuild.add(pos, h)
		}
		prevLast = h.last
		pos += h.size
	}
	if prevLast != seg.EndOffset {
		return fmt.Errorf("%w: segment %d ends at offset %d, not %d", ErrInvalidSegment, seg.BaseOffset, prevLast, seg.EndOffset)
	}
	return nil
}

// readIndex reads an index file and keeps the prefix of entries valid reports true
// for: a sealed segment's index may still be preallocated (zeros) past its entries.
func readIndex(path string, entrySize int, valid func(prev, e []byte) bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("remotelog: read index: %w", err)
	}
	n := 0
	var prev []byte
	for ; n+entrySize <= len(b); n += entrySize {
		e := b[n : n+entrySize]
		if !valid(prev, e) {
			break
		}
		prev = e
	}
	return b[:n], nil
}

func validOffsetEntries(seg Segment) func(prev, e []byte) bool {
	return func(prev, e []byte) bool {
		rel, pos := binary.BigEndian.Uint32(e), int64(binary.BigEndian.Uint32(e[4:]))
		if seg.BaseOffset+int64(rel) > seg.EndOffset || pos+shalelog.BatchHeaderSize > seg.SizeBytes {
			return false
		}
		if prev == nil {
			// A first entry of zeros is (base, 0): harmless and possibly genuine.
			return true
		}
		return rel > binary.BigEndian.Uint32(prev) && pos > int64(binary.BigEndian.Uint32(prev[4:]))
	}
}

func validTimeEntries(seg Segment) func(prev, e []byte) bool {
	return func(prev, e []byte) bool {
		ts, rel := int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
		if ts < 0 || seg.BaseOffset+int64(rel) > seg.EndOffset {
			return false
		}
		if prev == nil {
			return ts > 0 || rel == 0
		}
		return ts > int64(binary.BigEndian.Uint64(prev)) && rel > binary.BigEndian.Uint32(prev[8:])
	}
}

// Delete removes every object of seg's upload (only its TopicID, Partition, BaseOffset
// and UploadID are used), the manifest first. Deleting what is already gone is not an
// error, so that a delete can be retried after any failure.
func Delete(ctx context.Context, store objstore.Store, seg Segment) error {
	for _, s := range suffixes {
		if err := store.Delete(ctx, seg.Key(s)); err != nil {
			return fmt.Errorf("remotelog: delete segment %d upload %x: %w", seg.BaseOffset, seg.UploadID, err)
		}
	}
	return nil
}

// UploadRef is an upload found in the store by ListUploads.
type UploadRef struct {
	// Segment has TopicID, Partition, BaseOffset and UploadID set: enough for Delete
	// and ReadManifest.
	Segment Segment
	// Complete reports whether the manifest exists (the upload finished).
	Complete bool
	// Objects and Bytes count the upload's objects and their sizes.
	Objects int
	Bytes   int64
}

// ListUploads returns the uploads of a partition found in the store, complete or not,
// by base offset and then upload id. Those the controller has not recorded (and is not
// about to record) are orphans, for Delete.
func ListUploads(ctx context.Context, store objstore.Store, topicID [16]byte, partition int32) ([]UploadRef, error) {
	prefix := PartitionPrefix(topicID, partition)
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("remotelog: list uploads of %s: %w", prefix, err)
	}
	var out []UploadRef
	byStem := map[string]int{}
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, prefix)
		dot := strings.IndexByte(rest, '.')
		if dot < 0 {
			continue
		}
		name, suffix := rest[:dot], rest[dot:]
		base, id, ok := parseStemName(name)
		if !ok {
			continue
		}
		i, seen := byStem[name]
		if !seen {
			i = len(out)
			byStem[name] = i
			out = append(out, UploadRef{Segment: Segment{TopicID: topicID, Partition: partition, BaseOffset: base, UploadID: id}})
		}
		out[i].Objects++
		out[i].Bytes += o.Size
		if suffix == suffixManifest {
			out[i].Complete = true
		}
	}
	// Keys sort by base offset (zero-padded) and then upload id (fixed-width hex), and
	// List returns them in key order, so out is in order already.
	return out, nil
}

// ReadManifest reads the manifest of seg's upload (only its identity fields are used)
// and returns the segment it describes. An upload without one wraps objstore.ErrNotFound.
func ReadManifest(ctx context.Context, store objstore.Store, seg Segment) (Segment, error) {
	_, full, err := readManifest(ctx, Direct(store), seg)
	return full, err
}

func readManifest(ctx context.Context, src Source, seg Segment) (manifest, Segment, error) {
	// Most manifests fit the first read; a long list of epochs takes a second.
	b, err := src.ReadAt(ctx, seg.Key(suffixManifest), 0, manifestFirstRead)
	if err == nil && len(b) == manifestFirstRead {
		var rest []byte
		rest, err = src.ReadAt(ctx, seg.Key(suffixManifest), manifestFirstRead, maxManifestBytes-manifestFirstRead)
		b = append(b, rest...)
	}
	if err != nil {
		return manifest{}, Segment{}, fmt.Errorf("remotelog: read manifest of segment %d: %w", seg.BaseOffset, err)
	}
	if len(b) >= maxManifestBytes {
		return manifest{}, Segment{}, fmt.Errorf("%w: larger than %d bytes", errBadManifest, maxManifestBytes)
	}
	m, full, err := decodeManifest(b)
	if err != nil {
		return m, full, err
	}
	if full.TopicID != seg.TopicID || full.Partition != seg.Partition || full.BaseOffset != seg.BaseOffset || full.UploadID != seg.UploadID {
		return m, full, fmt.Errorf("%w: describes another upload", errBadManifest)
	}
	return m, full, nil
}

// maxManifestBytes bounds a manifest (its epochs make it grow, a little);
// manifestFirstRead is what a reader asks for first.
const (
	maxManifestBytes  = 1 << 20
	manifestFirstRead = 16 << 10
)
