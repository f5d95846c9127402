package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
)

// errSegmentGone: the segment was deleted or replaced while a reader was getting to it;
// the reader retries against the current segment list.
var errSegmentGone = errors.New("segment removed")

// segmentParams are the sizes a new or reopened active segment gets.
type segmentParams struct {
	capacity      int64 // bytes the log file is preallocated and mapped to
	offsetEntries int64 // offset index capacity
	timeEntries   int64 // time index capacity (one slot is kept for sealing)
	interval      int64 // index.interval.bytes
	maps          *MapCache
}

func paramsFor(cfg Config, batchSize int64) segmentParams {
	return segmentParams{
		capacity:      max(cfg.SegmentBytes, batchSize),
		offsetEntries: max(int64(cfg.SegmentIndexBytes)/offsetEntrySize, 1),
		timeEntries:   max(int64(cfg.SegmentIndexBytes)/timeEntrySize, 2),
		interval:      int64(cfg.IndexIntervalBytes),
		maps:          cfg.Maps,
	}
}

// segment is one log file with its offset and time indexes, like Kafka's LogSegment.
//
// The active segment's log file is preallocated (sparse) to its capacity and mapped
// read-write; blocks are reserved ahead of the write position. Sealed segments are
// trimmed to their length and mapped read-only on first use. Readers see the batches in
// data[:size]; the single appender fills bytes beyond size, then publishes the new size.
//
// A segment is reference counted: the Log holds one reference while the segment is in
// its list, each View one more. Mappings go away with the last reference, so deleting
// or truncating never unmaps memory a View still points at.
//
// A sealed segment's mappings may also go away while it stays in the list: the MapCache
// unmaps idle ones to bound the mappings of a broker with many segments. Whoever uses a
// segment's data or indexes holds pin (read-locked, via use) from before load until it
// is done, a View until Release; the cache unmaps only what it can write-lock at once.
type segment struct {
	fsys fileSystem
	dir  string
	base int64
	maps *MapCache

	pin  sync.RWMutex
	used atomic.Bool // set by use, cleared by the cache's sweep
	slot int         // index in maps.ring, -1 when not there; under maps.mu

	refs         atomic.Int32
	size         atomic.Int64
	maxTimestamp atomic.Int64 // largest batch MaxTimestamp, -1 if none
	modTime      atomic.Int64 // unix ms of the last change, for retention without timestamps
	synced       atomic.Bool  // sealed, and its data and indexes are durable

	mu      sync.Mutex // serializes load, retire and unload
	loaded  atomic.Bool
	dead    bool // retired or unloaded: never load again
	logFile file
	data    []byte
	offsets *offsetIndex
	times   *timeIndex

	// Appender state, used under the Log's append lock on the active segment only.
	writable bool
	capacity int64
	res      *reservation
	idx      indexState
	next     int64 // offset after the last batch
	rollTs   int64 // MaxTimestamp of the first batch, -1 if none
	created  int64 // unix ms the segment became active
	params   segmentParams
	// writtenBack: writeback was started for data[:writtenBack] (Log.maybeWriteback).
	writtenBack int64

	// deletion says how its files are deleted once it is taken out of the log: set by
	// the appender before the segment is handed to the background.
	deletion int
}

func (s *segment) logPath() string       { return segmentPath(s.dir, s.base, logSuffix) }
func (s *segment) indexPath() string     { return segmentPath(s.dir, s.base, indexSuffix) }
func (s *segment) timeIndexPath() string { return segmentPath(s.dir, s.base, timeIndexSuffix) }

func newSegmentStruct(fsys fileSystem, dir string, base int64, maps *MapCache) *segment {
	if maps == nil {
		maps = defaultMaps
	}
	s := &segment{fsys: fsys, dir: dir, base: base, maps: maps, slot: -1, next: base, rollTs: -1}
	s.refs.Store(1)
	s.maxTimestamp.Store(-1)
	return s
}

// createSegment makes a new, empty active segment at base, replacing stale files of
// the same name (a mapping of those stays valid: they are unlinked, not overwritten).
func createSegment(fsys fileSystem, dir string, base int64, p segmentParams, now int64) (*segment, error) {
	s := newSegmentStruct(fsys, dir, base, p.maps)
	s.created = now
	s.modTime.Store(now)
	if err := removeIfExists(fsys, s.logPath()); err != nil {
		return nil, err
	}
	f, err := fsys.OpenFile(s.logPath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, storageError("create segment", err)
	}
	fail := func(err error) (*segment, error) {
		s.closeFiles()
		if f != nil {
			f.Close()
		}
		fsys.Remove(s.logPath())
		fsys.Remove(s.indexPath())
		fsys.Remove(s.timeIndexPath())
		return nil, err
	}
	if err := f.Truncate(p.capacity); err != nil {
		return fail(storageError("preallocate segment", err))
	}
	data, err := f.Map(int(p.capacity), true)
	if err != nil {
		return fail(storageError("map segment", err))
	}
	adviseRandom(data, 0)
	s.logFile, s.data, f = f, data, nil
	oi, err := createIndexFile(fsys, s.indexPath(), offsetEntrySize, p.offsetEntries)
	if err != nil {
		return fail(err)
	}
	s.offsets = &offsetIndex{indexFile: oi, base: base}
	ti, err := createIndexFile(fsys, s.timeIndexPath(), timeEntrySize, p.timeEntries)
	if err != nil {
		return fail(err)
	}
	s.times = &timeIndex{indexFile: ti, base: base}
	s.makeWritable(p)
	s.idx = newIndexState(base)
	s.loaded.Store(true)
	return s, nil
}

func (s *segment) makeWritable(p segmentParams) {
	s.writable = true
	s.params = p
	s.capacity = int64(len(s.data))
	// No mapping to pre-fault: appends pwrite (writeBatch), which needs no resident pages.
	s.res = &reservation{f: s.logFile, limit: s.capacity, chunk: reserveChunk, background: true}
	s.res.startAt(s.size.Load())
	s.writtenBack = pageFloor(s.size.Load())
}

// openActiveSegment reopens the segment at base, whose log file holds size valid bytes,
// for appending. With scan (from recovery) the indexes are rebuilt from it; without,
// the index files are trusted after a sanity check and rebuilt if they fail it.
func openActiveSegment(fsys fileSystem, dir string, base, size int64, p segmentParams, scan *scanResult, now int64) (*segment, error) {
	s := newSegmentStruct(fsys, dir, base, p.maps)
	s.created = now
	s.modTime.Store(now)
	f, err := fsys.OpenFile(s.logPath(), os.O_RDWR, 0)
	if err != nil {
		return nil, storageError("open segment", err)
	}
	capacity := max(p.capacity, size)
	if err := f.Truncate(capacity); err != nil {
		f.Close()
		return nil, storageError("preallocate segment", err)
	}
	data, err := f.Map(int(capacity), true)
	if err != nil {
		f.Close()
		return nil, storageError("map segment", err)
	}
	// What is already written keeps read-around for readers catching up after a restart.
	adviseRandom(data, size)
	s.logFile, s.data = f, data
	s.size.Store(size)
	if scan == nil {
		if err := s.openIndexesWritable(p); err == nil {
			if err = s.restoreAppendState(size); err == nil {
				s.makeWritable(p)
				s.loaded.Store(true)
				s.reopened(now)
				return s, nil
			}
		}
		s.closeIndexes()
		var r scanResult
		if err := guardFault(func() error { r = scanSegment(data[:size], base, math.MaxInt64, p.interval); return nil }); err != nil {
			s.closeFiles()
			return nil, err
		}
		if r.valid != size {
			// The caller trusted this segment; keep what is valid of it all the same.
			s.size.Store(r.valid)
		}
		scan = &r
	}
	if err := s.writeIndexes(scan, p, true); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.idx, s.rollTs, s.next = scan.state, scan.firstTs, scan.next
	s.maxTimestamp.Store(scan.state.maxTs)
	s.makeWritable(p)
	s.loaded.Store(true)
	s.reopened(now)
	return s, nil
}

// reopened sets the creation time of a segment that was active before a restart to its
// first batch's timestamp when that is plausible, so segment.ms keeps counting from it.
func (s *segment) reopened(now int64) {
	if s.rollTs >= 0 && s.rollTs <= now {
		s.created = s.rollTs
	}
}

// openSealedSegment describes a sealed segment without mapping anything; it is loaded
// on first use.
func openSealedSegment(fsys fileSystem, dir string, base, size, maxTs, modTime int64, synced bool, maps *MapCache) *segment {
	s := newSegmentStruct(fsys, dir, base, maps)
	s.size.Store(size)
	s.maxTimestamp.Store(maxTs)
	s.modTime.Store(modTime)
	s.synced.Store(synced)
	return s
}

func (s *segment) openIndexesWritable(p segmentParams) error {
	oi, err := openIndexFileWritable(s.fsys, s.indexPath(), offsetEntrySize, p.offsetEntries)
	if err != nil {
		return err
	}
	s.offsets = &offsetIndex{indexFile: oi, base: s.base}
	ti, err := openIndexFileWritable(s.fsys, s.timeIndexPath(), timeEntrySize, p.timeEntries)
	if err != nil {
		return err
	}
	s.times = &timeIndex{indexFile: ti, base: s.base}
	return nil
}

// writeIndexes replaces both index files with the entries of scan. Writable ones stay
// mapped for appends; sealed ones are trimmed.
func (s *segment) writeIndexes(scan *scanResult, p segmentParams, writable bool) error {
	s.closeIndexes()
	oi, err := createIndexFile(s.fsys, s.indexPath(), offsetEntrySize, max(p.offsetEntries, int64(len(scan.offsets))+1))
	if err != nil {
		return err
	}
	s.offsets = &offsetIndex{indexFile: oi, base: s.base}
	ti, err := createIndexFile(s.fsys, s.timeIndexPath(), timeEntrySize, max(p.timeEntries, int64(len(scan.times))+2))
	if err != nil {
		return err
	}
	s.times = &timeIndex{indexFile: ti, base: s.base}
	for _, e := range scan.offsets {
		if err := s.offsets.add(e.offset, e.pos); err != nil {
			return err
		}
	}
	for _, e := range scan.times {
		if err := s.times.add(e.ts, e.offset); err != nil {
			return err
		}
	}
	if !writable {
		if err := s.times.sealAdd(scan.state.maxTs, scan.state.maxTsOffset); err != nil {
			return err
		}
		if err := s.offsets.trim(); err != nil {
			return err
		}
		return s.times.trim()
	}
	return nil
}

// restoreAppendState rebuilds the appender's bookkeeping for data[:size] from the
// indexes and the batches after the last offset index entry, checking both.
func (s *segment) restoreAppendState(size int64) error {
	if err := s.offsets.check(size); err != nil {
		return err
	}
	if err := s.times.check(); err != nil {
		return err
	}
	st := newIndexState(s.base)
	if ts, off, ok := s.times.lastEntry(); ok {
		st.maxTs, st.maxTsOffset = ts, off
	}
	lastOff, pos, has := s.offsets.last()
	next := s.base
	if has {
		b, ok := batchAt(s.data, pos, size)
		if !ok || b.base != lastOff {
			return fmt.Errorf("%w: last offset index entry (offset %d, position %d) does not point at a batch", errCorruptIndex, lastOff, pos)
		}
	}
	st.bytesSince = size - pos
	err := guardFault(func() error {
		for pos < size {
			b, ok := batchAt(s.data, pos, size)
			if !ok || b.base < next {
				return fmt.Errorf("%w: no valid batch at position %d", ErrCorruptMessage, pos)
			}
			if ts := maxTimestampAt(s.data, pos); ts > st.maxTs {
				st.maxTs, st.maxTsOffset = ts, b.base
			}
			next = b.last + 1
			pos += b.size
		}
		return nil
	})
	if err != nil {
		return err
	}
	if size > 0 {
		s.rollTs = maxTimestampAt(s.data, 0)
		if b, ok := batchAt(s.data, 0, size); !ok || b.base < s.base {
			return fmt.Errorf("%w: first batch below the segment's base offset", ErrCorruptMessage)
		}
	}
	s.idx, s.next = st, next
	s.maxTimestamp.Store(st.maxTs)
	return nil
}

// acquire takes a reference for a reader; false once the segment is being released.
func (s *segment) acquire() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference; the last one unmaps and closes everything.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.mu.Lock()
		s.dead = true
		s.loaded.Store(false)
		s.closeFiles()
		s.mu.Unlock()
		s.maps.remove(s)
	}
}

// use pins the segment's mappings and loads them if needed: until unuse, the MapCache
// cannot unmap them. The caller holds a reference. On error nothing stays pinned.
func (s *segment) use(interval int64) error {
	s.pin.RLock()
	if !s.used.Load() {
		s.used.Store(true)
	}
	if err := s.load(interval); err != nil {
		s.pin.RUnlock()
		return err
	}
	return nil
}

// unuse lets the MapCache unmap the segment again, and gets the cache back within its
// limit if readers had held it over.
func (s *segment) unuse() {
	s.pin.RUnlock()
	if s.maps.over() {
		s.maps.shrink()
	}
}

// unmapIdle unmaps a sealed segment that no reader holds, keeping it in its log's list
// to be loaded again on its next use. It reports false when a reader holds it.
func (s *segment) unmapIdle() bool {
	if !s.acquire() {
		return true // being destroyed: the last release unmaps it
	}
	defer s.release()
	if !s.pin.TryLock() {
		return false
	}
	defer s.pin.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded.Load() {
		s.loaded.Store(false)
		s.closeFiles()
	}
	return true
}

// retire stops the segment from ever being loaded again: it was deleted or another
// segment object took over its files.
func (s *segment) retire() {
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
}

// load maps a sealed segment and its indexes, checking the indexes and rebuilding
// those that fail, and counts it in the MapCache. The caller holds a reference and pins
// the segment (use), or is its only user (recovery, shutdown).
func (s *segment) load(interval int64) error {
	if s.loaded.Load() {
		return nil
	}
	if err := s.loadLocked(interval); err != nil {
		return err
	}
	s.maps.add(s)
	return nil
}

func (s *segment) loadLocked(interval int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded.Load() {
		return nil
	}
	if s.dead {
		return errSegmentGone
	}
	size := s.size.Load()
	f, err := s.fsys.OpenFile(s.logPath(), os.O_RDONLY, 0)
	if err != nil {
		return storageError("open segment", err)
	}
	// The size came from the clean-shutdown marker or a stat at open: a file cut since
	// (by hand) must fail here rather than fault a reader past its end.
	if actual, err := fileSize(f); err != nil || actual < size {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s has %d bytes, %d expected", s.logPath(), actual, size)
		}
		return storageError("open segment", err)
	}
	data, err := f.Map(int(size), false)
	if err != nil {
		f.Close()
		return storageError("map segment", err)
	}
	adviseSequential(data)
	s.logFile, s.data = f, data
	if err := s.loadSealedIndexes(size, interval); err != nil {
		s.closeFiles()
		return err
	}
	// The checked (or rebuilt) index is the authority on the largest timestamp.
	if ts, _, ok := s.times.lastEntry(); ok {
		s.maxTimestamp.Store(ts)
	}
	if s.synced.Load() {
		// Durable and read-only: the index mappings outlive their descriptors, which
		// would otherwise count against the open-files limit for nothing. The log's
		// descriptor stays while the segment is mapped: fetch responses send from it
		// with sendfile (View.Sections), and it must be the very file that was mapped, which
		// reopening by name after a swap or a deletion would not give.
		s.closeIndexDescriptors()
	}
	s.loaded.Store(true)
	return nil
}

// osFile is the segment's log file when it is a real one, for sendfile. The caller pins
// the segment (use), under which a loaded segment keeps its descriptor.
func (s *segment) osFile() *os.File {
	if f, ok := s.logFile.(*osFile); ok {
		return f.f
	}
	return nil
}

// closeIndexDescriptors closes the index files of a loaded segment that no longer
// writes them (sealed and synced), keeping the mappings.
func (s *segment) closeIndexDescriptors() {
	for _, x := range []*indexFile{s.offsets.indexFile, s.times.indexFile} {
		if x.f != nil && x.res == nil {
			x.f.Close()
			x.f = nil
		}
	}
}

func (s *segment) loadSealedIndexes(size, interval int64) error {
	oi, err := openIndexFileReadOnly(s.fsys, s.indexPath(), offsetEntrySize)
	if err == nil {
		s.offsets = &offsetIndex{indexFile: oi, base: s.base}
		err = s.offsets.check(size)
	}
	if err == nil {
		var ti *indexFile
		ti, err = openIndexFileReadOnly(s.fsys, s.timeIndexPath(), timeEntrySize)
		if err == nil {
			s.times = &timeIndex{indexFile: ti, base: s.base}
			err = s.times.check()
		}
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, errCorruptIndex) && !isNotExist(err) {
		return storageError("open index", err)
	}
	// A missing or damaged index is rebuilt from the segment.
	var r scanResult
	if gerr := guardFault(func() error { r = scanSegment(s.data[:size], s.base, math.MaxInt64, interval); return nil }); gerr != nil {
		return gerr
	}
	return s.writeIndexes(&r, segmentParams{interval: interval}, false)
}

// readLastTimestamp reads a sealed segment's largest timestamp, the last time index
// entry, without mapping the segment; limit is the next segment's base offset.
func readLastTimestamp(fsys fileSystem, path string, base, limit int64) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return -1, err
	}
	if size%timeEntrySize != 0 {
		return -1, fmt.Errorf("%w: time index %s has %d bytes", errCorruptIndex, path, size)
	}
	if size == 0 {
		return -1, nil
	}
	var e [timeEntrySize]byte
	if _, err := f.ReadAt(e[:], size-timeEntrySize); err != nil {
		return -1, err
	}
	ts := int64(binary.BigEndian.Uint64(e[:8]))
	if rel := int64(binary.BigEndian.Uint32(e[8:])); ts < 0 || base+rel >= limit {
		return -1, fmt.Errorf("%w: last entry of %s (timestamp %d, offset %d) is implausible", errCorruptIndex, path, ts, base+rel)
	}
	return ts, nil
}

// append copies batch to the end of the active segment, rewriting its base offset (and
// leader epoch when setEpoch), then publishes it. On error nothing is visible.
func (s *segment) append(batch []byte, h Header, base int64, epoch int32, setEpoch bool) error {
	pos := s.size.Load()
	n := int64(len(batch))
	end := pos + n
	if !s.writable || end > s.capacity {
		return storageError("append", errBeyondCapacity)
	}
	due := s.idx.due(pos, s.params.interval)
	if err := s.res.ensure(end); err != nil {
		return err
	}
	if due {
		if err := s.offsets.reserveNext(); err != nil {
			return err
		}
		if err := s.times.reserveNext(); err != nil {
			return err
		}
	}
	if err := s.writeBatch(batch, pos, base, epoch, setEpoch); err != nil {
		return err
	}
	if due {
		// The space is reserved, so these cannot fail for lack of it; and the indexes are
		// sparse: a missing entry only lengthens a scan.
		_ = s.offsets.add(base, pos)
		_ = s.times.maybeAdd(s.idx.maxTs, s.idx.maxTsOffset)
		s.idx.indexed()
	}
	s.idx.add(n, base, h.MaxTimestamp)
	if pos == 0 {
		s.rollTs = h.MaxTimestamp
	}
	s.next = base + int64(h.LastOffsetDelta) + 1
	s.maxTimestamp.Store(s.idx.maxTs)
	s.size.Store(end)
	return nil
}

// writeBatch writes batch at pos with its base offset (and leader epoch when setEpoch)
// rewritten, with pwrite rather than by copying into the mapping. A copy into the
// mapping faults each fresh page in, and the kernel zero-fills it first (about 10 µs a
// page here, even pre-faulted in the background); pwrite of whole pages skips both, at
// 4-6x less CPU per byte for batches of 16 KiB and more (BenchmarkAppendStrategy). The
// mapping still serves reads: it shares the page cache with the file.
//
// The rewritten fields lie in the first 16 bytes, outside the CRC, so those go out of a
// copy and the rest straight from the caller's batch.
func (s *segment) writeBatch(batch []byte, pos, base int64, epoch int32, setEpoch bool) error {
	var hdr [offPartitionLeaderEpoch + 4]byte
	copy(hdr[:], batch)
	SetBaseOffset(hdr[:], base)
	if setEpoch {
		SetPartitionLeaderEpoch(hdr[:], epoch)
	}
	if err := writeVectorAt(s.logFile, hdr[:], batch[len(hdr):], pos); err != nil {
		return storageError("write segment", err)
	}
	return nil
}

// indexesFull reports whether the next index entry would not fit.
func (s *segment) indexesFull() bool { return s.offsets.full() || s.times.full() }

// seal ends the segment's active life: its largest timestamp goes into the time index.
// The mapping stays for readers. Trimming the files to their contents waits for the
// background (trim): cutting a preallocated file frees its reserved blocks, which waits
// on the file system's journal, and stopping the reservation waits for a fallocate in
// flight; neither belongs on the appender's path. Until the trim, recovery takes the
// zeros after the last batch for the preallocated tail they are.
func (s *segment) seal(now int64) error {
	if !s.writable {
		return nil
	}
	s.writable = false
	adviseNormal(s.data)
	s.modTime.Store(now)
	return s.times.sealAdd(s.idx.maxTs, s.idx.maxTsOffset)
}

// trim cuts a sealed segment's files to their contents, after stopping the background
// reservation of its log file. It is idempotent, so that the flusher can retry a trim
// that failed.
func (s *segment) trim() error {
	if s.writable {
		return nil
	}
	if s.res != nil {
		s.res.stop()
	}
	var errs []error
	if s.logFile != nil && int64(len(s.data)) > s.size.Load() {
		if err := s.logFile.Truncate(s.size.Load()); err != nil {
			errs = append(errs, storageError("trim segment", err))
		}
	}
	if err := s.offsets.trim(); err != nil {
		errs = append(errs, err)
	}
	if err := s.times.trim(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// sync makes the segment's data and indexes durable. The caller holds a reference and
// has loaded the segment.
func (s *segment) sync() error {
	if s.logFile == nil || s.synced.Load() { // loaded after it was synced: nothing to do
		return nil
	}
	if err := s.logFile.Sync(); err != nil {
		return storageError("sync segment", err)
	}
	if err := s.offsets.sync(); err != nil {
		return err
	}
	return s.times.sync()
}

// syncData makes only the log data durable; indexes are rebuilt on recovery anyway.
func (s *segment) syncData() error {
	if s.logFile == nil || s.synced.Load() { // loaded after it was synced
		return nil
	}
	if err := s.logFile.Sync(); err != nil {
		return storageError("sync segment", err)
	}
	return nil
}

// truncateTo cuts the active segment at pos, where the batch with base offset next
// (or the first batch after offset next) starts. The cut bytes are zeroed and synced so
// that recovery can never bring them back.
func (s *segment) truncateTo(pos, next, now int64) error {
	old := s.size.Load()
	if pos >= old {
		return nil
	}
	s.size.Store(pos)
	s.writtenBack = min(s.writtenBack, pageFloor(pos))
	s.offsets.truncateTo(next)
	s.times.truncateTo(next)
	if err := guardFault(func() error { clear(s.data[pos:old]); return nil }); err != nil {
		return err
	}
	if err := s.restoreAppendState(pos); err != nil {
		// The indexes came from this segment's own appends, so this is a broken invariant.
		return storageError("truncate segment", err)
	}
	if pos == 0 {
		s.rollTs = -1
		s.created = now
	}
	s.next = max(s.next, next)
	s.modTime.Store(now)
	return s.syncData()
}

// removeFiles unlinks the segment's files. Mappings of them stay valid.
func (s *segment) removeFiles() error {
	var errs []error
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath()} {
		if err := s.fsys.Remove(p); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// How the files of a segment taken out of the log are to be deleted (segment.deletion).
const (
	deleteRenamed  = iota // renamed to NAME.deleted (markDeleted): unlink those
	deleteAsNamed         // the rename failed: unlink the files under their own names
	deleteReplaced        // a new segment of the same base took the names: nothing to unlink
)

// markDeleted renames the segment's files to NAME.deleted, as Kafka does, before they
// are closed and unlinked in the background: once the log's list no longer holds the
// segment, a crash must not bring it back as live data (Open removes .deleted files),
// and a rename is a directory update that costs no I/O of the file's data. The caller
// has retired the segment, so that it is never loaded again from its old names.
func (s *segment) markDeleted() error {
	var errs []error
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath()} {
		if err := s.fsys.Rename(p, p+deletedSuffix); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.deletion = deleteAsNamed
		return err
	}
	s.deletion = deleteRenamed
	return nil
}

// removeDeletedFiles unlinks the files of a segment taken out of the log, under the
// names markDeleted left them.
func (s *segment) removeDeletedFiles() error {
	suffix := deletedSuffix
	switch s.deletion {
	case deleteReplaced:
		return nil
	case deleteAsNamed:
		suffix = ""
	}
	var errs []error
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath()} {
		if err := s.fsys.Remove(p + suffix); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *segment) closeIndexes() {
	if s.offsets != nil {
		s.offsets.close()
		s.offsets = nil
	}
	if s.times != nil {
		s.times.close()
		s.times = nil
	}
}

func (s *segment) closeFiles() {
	if s.res != nil {
		s.res.stop()
	}
	s.closeIndexes()
	if s.data != nil {
		unmap(s.data)
		s.data = nil
	}
	if s.logFile != nil {
		s.logFile.Close()
		s.logFile = nil
	}
}

func removeIfExists(fsys fileSystem, path string) error {
	if err := fsys.Remove(path); err != nil && !isNotExist(err) {
		return storageError("remove stale file", err)
	}
	return nil
}
