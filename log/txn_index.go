package log

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The aborted-transaction index, Kafka's .txnindex: one file per segment, named by the
// base offset of the segment that was active when the abort marker was appended, holding
// fixed entries in marker order. A read_committed fetch asks it which aborted
// transactions its range spans. Files are tiny (one entry per abort), so each is read
// whole into memory on first use and kept there.
//
// A file stays valid when compaction merges its segment into an earlier one: lookups
// take every file whose base is at or after the base of the segment holding the fetch
// offset, not only the file of that segment. A marker never moves to a later segment,
// so files below that base hold only aborts that ended before the fetch offset.

const (
	txnIndexSuffix = ".txnindex"
	// txnEntrySize: version int16 (0), producer id int64, first offset int64, last
	// offset int64, last stable offset int64, big-endian, as in Kafka.
	txnEntrySize = 34
)

// AbortedTxn is one entry of the aborted-transaction index: a producer's aborted
// transaction from FirstOffset to its abort marker at LastOffset, and the last stable
// offset when the marker was appended (where the next open transaction began, or the
// offset after the marker). A read_committed consumer drops the producer's records from
// FirstOffset until the marker.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

func encodeAbortedTxn(dst []byte, a AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStableOffset))
}

// decodeTxnIndex decodes a .txnindex file. It returns the entries of the valid prefix
// and an error describing what follows it (a torn last entry, an unknown version, or
// entries out of order), so that the caller can cut the file there.
func decodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	out := make([]AbortedTxn, 0, len(b)/txnEntrySize)
	for len(b) > 0 {
		if len(b) < txnEntrySize {
			return out, fmt.Errorf("%w: %d trailing bytes in a transaction index", errCorruptTxnIndex, len(b))
		}
		if v := binary.BigEndian.Uint16(b); v != 0 {
			return out, fmt.Errorf("%w: transaction index entry version %d", errCorruptTxnIndex, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if a.FirstOffset < 0 || a.LastOffset < a.FirstOffset {
			return out, fmt.Errorf("%w: transaction index entry %+v", errCorruptTxnIndex, a)
		}
		if n := len(out); n > 0 && out[n-1].LastOffset >= a.LastOffset {
			return out, fmt.Errorf("%w: transaction index entry at %d after one at %d", errCorruptTxnIndex, a.LastOffset, out[n-1].LastOffset)
		}
		out = append(out, a)
		b = b[txnEntrySize:]
	}
	return out, nil
}

var errCorruptTxnIndex = errors.New("corrupt transaction index")

type txnFile struct {
	base    int64
	entries []AbortedTxn
	// dirty: written since the last sync, which a clean close does.
	dirty bool
}

// txnIndexes are a log's aborted-transaction index files, loaded on first use (most
// logs have none, and a broker's startup should not read them).
type txnIndexes struct {
	mu     sync.Mutex
	loaded bool
	files  []*txnFile // by base
}

func (l *Log) txnPath(base int64) string { return segmentPath(l.dir, base, txnIndexSuffix) }

// loadTxnsLocked reads every .txnindex file of the directory, cutting each after its
// valid prefix and dropping entries at or past the log end (a crash lost their markers).
func (l *Log) loadTxnsLocked() error {
	t := &l.txns
	if t.loaded {
		return nil
	}
	entries, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return storageError("list log directory", err)
	}
	end := l.end.Load()
	var files []*txnFile
	for _, e := range entries {
		stem, ok := strings.CutSuffix(e.Name(), txnIndexSuffix)
		if !ok || len(stem) != 20 {
			continue
		}
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || base < 0 {
			continue
		}
		b, err := readTxnFile(l.fsys, l.txnPath(base))
		if err != nil {
			return storageError("read transaction index", err)
		}
		txns, derr := decodeTxnIndex(b)
		if derr != nil {
			l.logger().Warn("cutting a damaged transaction index", "dir", l.dir, "base_offset", base, "err", derr)
		}
		keep := sort.Search(len(txns), func(i int) bool { return txns[i].LastOffset >= end })
		f := &txnFile{base: base, entries: txns}
		if derr != nil || keep < len(txns) {
			if err := l.cutTxnFile(f, keep); err != nil {
				return err
			}
		}
		if len(f.entries) > 0 {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, func(a, b *txnFile) int { return cmp.Compare(a.base, b.base) })
	t.files, t.loaded = files, true
	return nil
}

// readTxnFile reads a whole index file (readWholeFile is bounded for checkpoints).
func readTxnFile(fsys fileSystem, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, err
	}
	return b, nil
}

// cutTxnFile keeps the first n entries of f, removing the file when none is left.
func (l *Log) cutTxnFile(f *txnFile, n int) error {
	f.entries = f.entries[:n]
	path := l.txnPath(f.base)
	if n == 0 {
		return removeIfExists(l.fsys, path)
	}
	h, err := l.fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return storageError("open transaction index", err)
	}
	defer h.Close()
	if err := h.Truncate(int64(n) * txnEntrySize); err != nil {
		return storageError("truncate transaction index", err)
	}
	return nil
}

// AppendAbortedTxn records an aborted transaction whose abort marker, at a.LastOffset,
// is in the log. Like Kafka, the entry is not synced on its own: after a crash the
// replica replays its producer state from its last snapshot and appends the entries
// from there again (DropAbortedTxnsFrom first).
func (l *Log) AppendAbortedTxn(a AbortedTxn) error {
	if l.closed.Load() {
		return l.errClosed()
	}
	segs := l.segments()
	if len(segs) == 0 {
		return l.errClosed()
	}
	base := segs[segmentFor(segs, a.LastOffset)].base
	t := &l.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := l.loadTxnsLocked(); err != nil {
		return err
	}
	var f *txnFile
	for _, g := range t.files {
		if g.base == base {
			f = g
		}
	}
	if f == nil {
		f = &txnFile{base: base}
	}
	if n := len(f.entries); n > 0 && f.entries[n-1].LastOffset >= a.LastOffset {
		return fmt.Errorf("transaction index of %s: entry at %d after one at %d", l.dir, a.LastOffset, f.entries[n-1].LastOffset)
	}
	h, err := l.fsys.OpenFile(l.txnPath(base), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return storageError("open transaction index", err)
	}
	_, werr := h.WriteAt(encodeAbortedTxn(nil, a), int64(len(f.entries))*txnEntrySize)
	if cerr := h.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return storageError("write transaction index", werr)
	}
	if len(f.entries) == 0 {
		t.files = append(t.files, f)
		slices.SortFunc(t.files, func(a, b *txnFile) int { return cmp.Compare(a.base, b.base) })
	}
	f.entries = append(f.entries, a)
	f.dirty = true
	return nil
}

// syncTxns makes the index files written since they were loaded durable, for a clean
// close: the producer snapshot written then promises that no replay will rebuild them.
func (l *Log) syncTxns() error {
	t := &l.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, f := range t.files {
		if !f.dirty {
			continue
		}
		h, err := l.fsys.OpenFile(l.txnPath(f.base), os.O_RDWR, 0)
		if err == nil {
			err = h.Sync()
			if cerr := h.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			errs = append(errs, storageError("sync transaction index", err))
			continue
		}
		f.dirty = false
	}
	return errors.Join(errs...)
}

// AbortedTxns returns the aborted transactions a read of [from, to) spans: those whose
// marker is at or after from and that began before to, as Kafka collects them, from the
// segment holding from onward until an entry shows that no earlier transaction can
// still be open at to.
func (l *Log) AbortedTxns(from, to int64) ([]AbortedTxn, error) {
	segs := l.segments()
	if len(segs) == 0 {
		return nil, l.errClosed()
	}
	fromBase := segs[segmentFor(segs, from)].base
	t := &l.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := l.loadTxnsLocked(); err != nil {
		return nil, err
	}
	var out []AbortedTxn
	for _, f := range t.files {
		if f.base < fromBase {
			continue
		}
		for _, a := range f.entries {
			if a.LastOffset >= from && a.FirstOffset < to {
				out = append(out, a)
			}
			if a.LastStableOffset >= to {
				return out, nil
			}
		}
	}
	return out, nil
}

// DropAbortedTxnsFrom removes the entries whose marker is at or after offset: the replica
// replays its producer state from there and appends them again.
func (l *Log) DropAbortedTxnsFrom(offset int64) error {
	t := &l.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := l.loadTxnsLocked(); err != nil {
		return err
	}
	return l.dropTxnsFromLocked(offset)
}

func (l *Log) dropTxnsFromLocked(offset int64) error {
	t := &l.txns
	var errs []error
	kept := t.files[:0]
	for _, f := range t.files {
		n := sort.Search(len(f.entries), func(i int) bool { return f.entries[i].LastOffset >= offset })
		if n < len(f.entries) {
			errs = append(errs, l.cutTxnFile(f, n))
		}
		if len(f.entries) > 0 {
			kept = append(kept, f)
		}
	}
	clear(t.files[len(kept):])
	t.files = kept
	return errors.Join(errs...)
}

// truncateTxns follows a truncation of the log to end. Unloaded indexes need nothing:
// loading drops what lies past the log end.
func (l *Log) truncateTxns(end int64) error {
	t := &l.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		return nil
	}
	return l.dropTxnsFromLocked(end)
}

// removeTxnsBelow deletes the index files of segments deleted from the front of the log:
// every file below the new first segment's base describes aborts that ended there.
func (l *Log) removeTxnsBelow(base int64) {
	t := &l.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		if err := l.loadTxnsLocked(); err != nil {
			l.logger().Warn("loading the transaction indexes to delete old ones", "dir", l.dir, "err", err)
			return
		}
	}
	kept := t.files[:0]
	for _, f := range t.files {
		if f.base < base {
			if err := removeIfExists(l.fsys, l.txnPath(f.base)); err != nil {
				l.logger().Warn("deleting a transaction index", "dir", l.dir, "base_offset", f.base, "err", err)
			}
			continue
		}
		kept = append(kept, f)
	}
	clear(t.files[len(kept):])
	t.files = kept
}
