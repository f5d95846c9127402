package remotelog

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/tiered/objstore"
)

// Source reads byte ranges of immutable objects. ReadAt returns up to n bytes of key
// from off: fewer only at the object's end. A ChunkCache is a Source; so is Direct.
type Source interface {
	ReadAt(ctx context.Context, key string, off int64, n int) ([]byte, error)
}

// Direct returns a Source that reads from the store on every call, without caching.
func Direct(store objstore.Store) Source { return direct{store} }

type direct struct{ store objstore.Store }

func (d direct) ReadAt(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	rc, err := d.store.Get(ctx, key, off, int64(n))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(n)))
	if err != nil {
		return nil, fmt.Errorf("objstore: read %s: %w", key, err)
	}
	return b, nil
}

// Reader reads uploaded segments. It is safe for concurrent use.
type Reader struct {
	src Source

	mu        sync.Mutex
	manifests map[[16]byte]manifest // by upload id
}

// maxManifests bounds the manifests a Reader keeps (a few hundred bytes each).
const maxManifests = 4096

// NewReader returns a Reader that reads through src.
func NewReader(src Source) *Reader {
	return &Reader{src: src, manifests: make(map[[16]byte]manifest)}
}

// manifest returns the manifest of seg's upload, read once.
func (r *Reader) manifest(ctx context.Context, seg Segment) (manifest, error) {
	r.mu.Lock()
	m, ok := r.manifests[seg.UploadID]
	r.mu.Unlock()
	if ok {
		return m, nil
	}
	m, _, err := readManifest(ctx, r.src, seg)
	if err != nil {
		return m, err
	}
	r.mu.Lock()
	if len(r.manifests) >= maxManifests {
		for k := range r.manifests { // evict an arbitrary one: a reread is one small GET
			delete(r.manifests, k)
			break
		}
	}
	r.manifests[seg.UploadID] = m
	r.mu.Unlock()
	return m, nil
}

// readFull reads exactly n bytes of key at off: the caller knows they exist.
func (r *Reader) readFull(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	b, err := r.src.ReadAt(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("remotelog: read %s at %d: %w", key, off, err)
	}
	if len(b) < n {
		return nil, fmt.Errorf("remotelog: read %s at %d: %d bytes, want %d: %w", key, off, len(b), n, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// lookupOffset returns the position of the last indexed batch with base offset <=
// offset, by a binary search over the uploaded offset index (0 when there is none).
func (r *Reader) lookupOffset(ctx context.Context, seg Segment, m manifest, offset int64) (int64, error) {
	const size = shalelog.OffsetIndexEntrySize
	n := int(m.Objects[suffixIndex] / size)
	var err error
	i := sort.Search(n, func(i int) bool {
		if err != nil {
			return true
		}
		var e []byte
		e, err = r.readFull(ctx, seg.Key(suffixIndex), int64(i*size), size)
		return err != nil || seg.BaseOffset+int64(binary.BigEndian.Uint32(e)) > offset
	})
	if err != nil || i == 0 {
		return 0, err
	}
	e, err := r.readFull(ctx, seg.Key(suffixIndex), int64((i-1)*size), size)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint32(e[4:])), nil
}

// lookupTime returns the offset of the last time index entry with a timestamp < ts
// (every batch before it has a smaller timestamp), or the segment's base.
func (r *Reader) lookupTime(ctx context.Context, seg Segment, m manifest, ts int64) (int64, error) {
	const size = shalelog.TimeIndexEntrySize
	n := int(m.Objects[suffixTimeIndex] / size)
	var err error
	i := sort.Search(n, func(i int) bool {
		if err != nil {
			return true
		}
		var e []byte
		e, err = r.readFull(ctx, seg.Key(suffixTimeIndex), int64(i*size), size)
		return err != nil || int64(binary.BigEndian.Uint64(e)) >= ts
	})
	if err != nil || i == 0 {
		return seg.BaseOffset, err
	}
	e, err := r.readFull(ctx, seg.Key(suffixTimeIndex), int64((i-1)*size), size)
	if err != nil {
		return seg.BaseOffset, err
	}
	return seg.BaseOffset + int64(binary.BigEndian.Uint32(e[8:])), nil
}

// scanWindow is how much log a header scan reads at once: more than an index interval
// (4 KiB by default), so that finding a batch from its index entry is one read.
const scanWindow = 64 << 10

// headerScanner reads batch headers forward through a window of the log object.
type headerScanner struct {
	r    *Reader
	ctx  context.Context
	key  string
	size int64
	pos  int64 // of buf[0]
	buf  []byte
}

// at returns the header of the batch at pos.
func (s *headerScanner) at(pos int64) (batchHeader, error) {
	if pos < s.pos || pos+shalelog.BatchHeaderSize > s.pos+int64(len(s.buf)) {
		n := int(min(scanWindow, s.size-pos))
		if n < shalelog.BatchHeaderSize {
			return batchHeader{}, fmt.Errorf("remotelog: %s: %w: truncated batch header at %d", s.key, shalelog.ErrCorruptMessage, pos)
		}
		b, err := s.r.readFull(s.ctx, s.key, pos, n)
		if err != nil {
			return batchHeader{}, err
		}
		s.pos, s.buf = pos, b
	}
	h, err := parseBatchHeader(s.buf[pos-s.pos:])
	if err != nil {
		return h, fmt.Errorf("remotelog: %s position %d: %w", s.key, pos, err)
	}
	if pos+h.size > s.size {
		return h, fmt.Errorf("remotelog: %s position %d: %w: batch of %d bytes past the end", s.key, pos, shalelog.ErrCorruptMessage, h.size)
	}
	return h, nil
}

// find returns the position of the batch containing offset, or of the first batch
// after it, scanning from the offset index's entry; size when there is none.
func (r *Reader) find(ctx context.Context, seg Segment, m manifest, s *headerScanner, offset int64) (int64, batchHeader, error) {
	pos, err := r.lookupOffset(ctx, seg, m, offset)
	if err != nil {
		return 0, batchHeader{}, err
	}
	for pos < seg.SizeBytes {
		h, err := s.at(pos)
		if err != nil {
			return 0, h, err
		}
		if h.last >= offset {
			return pos, h, nil
		}
		pos += h.size
	}
	return seg.SizeBytes, batchHeader{}, nil
}

// Read returns whole batches of seg from the one containing offset (or the first
// after it): as many as fit in maxBytes, and at least one even if it is larger, as a
// fetch with Kafka's minOneMessage. offset outside the segment wraps
// log.ErrOffsetOutOfRange; nil means no batch at or after offset (compaction).
func (r *Reader) Read(ctx context.Context, seg Segment, offset int64, maxBytes int) ([]byte, error) {
	if offset < seg.BaseOffset || offset > seg.EndOffset {
		return nil, fmt.Errorf("remotelog: offset %d outside segment %d-%d: %w", offset, seg.BaseOffset, seg.EndOffset, shalelog.ErrOffsetOutOfRange)
	}
	m, err := r.manifest(ctx, seg)
	if err != nil {
		return nil, err
	}
	key := seg.Key(suffixLog)
	s := &headerScanner{r: r, ctx: ctx, key: key, size: seg.SizeBytes}
	start, first, err := r.find(ctx, seg, m, s, offset)
	if err != nil || start >= seg.SizeBytes {
		return nil, err
	}
	// The batches that fit, by their headers; one read of them all.
	end := start + first.size
	for end < seg.SizeBytes {
		h, err := s.at(end)
		if err != nil {
			return nil, err
		}
		if end+h.size-start > int64(maxBytes) {
			break
		}
		end += h.size
	}
	return r.readFull(ctx, key, start, int(end-start))
}

// OffsetForTimestamp returns the base offset of the first batch of seg whose largest
// timestamp is >= ts (ok false when there is none), as log.Log.OffsetForTimestamp: the
// caller finds the record in the batch.
func (r *Reader) OffsetForTimestamp(ctx context.Context, seg Segment, ts int64) (offset int64, ok bool, err error) {
	if seg.MaxTimestamp < ts {
		return 0, false, nil
	}
	m, err := r.manifest(ctx, seg)
	if err != nil {
		return 0, false, err
	}
	from, err := r.lookupTime(ctx, seg, m, ts)
	if err != nil {
		return 0, false, err
	}
	s := &headerScanner{r: r, ctx: ctx, key: seg.Key(suffixLog), size: seg.SizeBytes}
	pos, _, err := r.find(ctx, seg, m, s, from)
	if err != nil {
		return 0, false, err
	}
	for pos < seg.SizeBytes {
		h, err := s.at(pos)
		if err != nil {
			return 0, false, err
		}
		if h.maxTs >= ts {
			return h.base, true, nil
		}
		pos += h.size
	}
	return 0, false, nil
}

// AbortedTxns returns the entries of seg's uploaded transaction index that a read of
// [from, to) spans: marker at or after from, begun before to (as log.Log.AbortedTxns).
// A segment's index holds the aborts whose markers are in it, so a transaction begun
// in one segment is found in the segment of its marker: the caller asks the segment
// holding from and those after it, until done, which reports that an entry's last
// stable offset reached to, so that no later segment can hold an abort the read spans.
func (r *Reader) AbortedTxns(ctx context.Context, seg Segment, from, to int64) (txns []shalelog.AbortedTxn, done bool, err error) {
	m, err := r.manifest(ctx, seg)
	if err != nil {
		return nil, false, err
	}
	n := m.Objects[suffixTxnIndex]
	if n == 0 {
		return nil, false, nil
	}
	b, err := r.readFull(ctx, seg.Key(suffixTxnIndex), 0, int(n))
	if err != nil {
		return nil, false, err
	}
	all, err := shalelog.DecodeTxnIndex(b)
	if err != nil {
		return nil, false, fmt.Errorf("remotelog: transaction index of segment %d: %w", seg.BaseOffset, err)
	}
	for _, a := range all {
		if a.LastOffset >= from && a.FirstOffset < to {
			txns = append(txns, a)
		}
		if a.LastStableOffset >= to {
			return txns, true, nil
		}
	}
	return txns, false, nil
}

// ProducerSnapshot returns the producer snapshot uploaded with seg, nil if there was
// none.
func (r *Reader) ProducerSnapshot(ctx context.Context, seg Segment) ([]byte, error) {
	m, err := r.manifest(ctx, seg)
	if err != nil {
		return nil, err
	}
	n := m.Objects[suffixSnapshot]
	if n == 0 {
		return nil, nil
	}
	return r.readFull(ctx, seg.Key(suffixSnapshot), 0, int(n))
}
