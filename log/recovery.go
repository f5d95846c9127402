package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// load builds the segment list from the directory, recovering after an unclean
// shutdown. Segments wholly below the recovery point were durable when the point was
// written and are trusted; the rest are scanned. A clean-shutdown marker means nothing
// needs scanning, and its table gives each segment's size and largest timestamp without
// opening any file but the active segment's.
//
// The marker stays until the first change (markDirty): a log reopened and closed again,
// or abandoned in a crash, without a write in between is still exactly what the marker
// describes. The active segment's files are grown for appends on open, so its size comes
// from the table, and its indexes, grown too, fail their check and are rebuilt from it.
func (l *Log) load() error {
	cfg := l.config()
	lg := cfg.Logger.With("dir", l.dir)
	now := cfg.Now().UnixMilli()
	params := paramsFor(*cfg, 0)

	swapped, err := recoverSwaps(l.fsys, l.dir)
	if err != nil {
		return err
	}
	if swapped {
		// The marker predates no swap (cleaning removes it first); be safe regardless.
		if err := removeIfExists(l.fsys, filepath.Join(l.dir, cleanShutdownFile)); err != nil {
			return err
		}
	}
	marker, markerErr := readWholeFile(l.fsys, filepath.Join(l.dir, cleanShutdownFile))
	clean := markerErr == nil
	var table map[int64]segmentSummary
	var markerEnd, startCk, rp int64
	var startOK, rpOK bool
	if clean {
		// An older marker has no table: still clean, the sizes come from the files.
		var err error
		if markerEnd, startCk, table, err = decodeCleanShutdown(marker); err == nil {
			// The marker was written after both checkpoints and nothing changed since:
			// its start offset is theirs, and a clean log needs no recovery point.
			startOK, rp, rpOK = true, markerEnd, true
		}
	}
	if !rpOK {
		var err error
		rp, rpOK, err = readCheckpoint(l.fsys, l.dir, recoveryPointFile)
		if err != nil {
			lg.Warn("ignoring unreadable recovery point; scanning all segments", "err", err)
			rp, rpOK, clean = 0, false, false
		}
		if !rpOK {
			rp = 0
		}
	}
	if !startOK {
		var err error
		startCk, startOK, err = readCheckpoint(l.fsys, l.dir, logStartFile)
		if err != nil {
			lg.Warn("ignoring unreadable log start offset checkpoint", "err", err)
			startOK = false
		}
	}

	bases, err := l.listSegments()
	if err != nil {
		return err
	}

	var segs []*segment
	fail := func(err error) error {
		for _, s := range segs {
			s.release()
		}
		return err
	}

	// First segment that may hold offsets at or above the recovery point.
	scanFrom := len(bases)
	if !clean {
		for i := range bases {
			if i+1 == len(bases) || bases[i+1] > rp {
				scanFrom = i
				break
			}
		}
	}

	if !clean && len(bases) > 0 {
		from := int64(0)
		if scanFrom < len(bases) {
			from = bases[scanFrom]
		}
		lg.Info("recovering log after an unclean shutdown", "recovery_point", rp,
			"segments", len(bases), "segments_to_scan", len(bases)-scanFrom, "scan_from", from)
	}

	for i := 0; i < scanFrom; i++ {
		base := bases[i]
		sum, known := table[base]
		if !known {
			size, mod, err := statFile(l.fsys, segmentPath(l.dir, base, logSuffix))
			if err != nil {
				return fail(storageError("stat segment", err))
			}
			sum = segmentSummary{base: base, size: size, maxTs: -1, modTime: mod}
		}
		size, mod := sum.size, sum.modTime
		if i == len(bases)-1 && known && markerEnd >= base {
			// Clean shutdown: the last segment stays as it is, read-only and unmapped,
			// until the first append makes it the writable active segment (activate):
			// an idle replica costs no mapping and no descriptor for it.
			s := openSealedSegment(l.fsys, l.dir, base, size, sum.maxTs, mod, true, params.maps)
			s.next, s.rollTs, s.created = markerEnd, sum.rollTs, now
			s.reopened(now)
			segs = append(segs, s)
			break
		}
		if i == len(bases)-1 {
			// Clean shutdown: the last segment becomes the active one as it is.
			s, err := openActiveSegment(l.fsys, l.dir, base, size, params, nil, now)
			if err != nil {
				return fail(err)
			}
			segs = append(segs, s)
			break
		}
		if known {
			segs = append(segs, openSealedSegment(l.fsys, l.dir, base, size, sum.maxTs, mod, true, params.maps))
			continue
		}
		maxTs, err := readLastTimestamp(l.fsys, segmentPath(l.dir, base, timeIndexSuffix), base, bases[i+1])
		s := openSealedSegment(l.fsys, l.dir, base, size, maxTs, mod, true, params.maps)
		if err != nil {
			// Missing or damaged time index: loading rebuilds it, and its last entry is
			// the largest timestamp that retention needs.
			if lerr := s.use(params.interval); lerr != nil {
				s.release()
				return fail(lerr)
			}
			ts, _, _ := s.times.lastEntry()
			s.unuse()
			s.maxTimestamp.Store(ts)
		}
		segs = append(segs, s)
	}

	for i := scanFrom; i < len(bases); i++ {
		base := bases[i]
		last := i == len(bases)-1
		limit := int64(math.MaxInt64)
		if !last {
			limit = bases[i+1]
		}
		path := segmentPath(l.dir, base, logSuffix)
		r, size, mod, err := recoverSegmentFile(l.fsys, path, base, limit, params.interval)
		if err != nil {
			return fail(err)
		}
		if r.stop != nil && !(last && r.zeroTail) {
			lg.Warn("truncating segment at invalid batch", "segment", filepath.Base(path),
				"position", r.valid, "dropped_bytes", size-r.valid, "reason", r.stop)
		}
		// Zeros after batches that reach the next segment's base are a preallocated tail
		// whose trim did not reach the disk (a crash during a roll), not lost data.
		rollTail := r.zeroTail && r.next == limit
		if !last && r.valid < size && !rollTail {
			// Data after a hole or a damaged batch is not a valid prefix: drop the rest.
			for _, later := range bases[i+1:] {
				lg.Warn("deleting segment after a truncated one", "base_offset", later)
				if err := removeSegmentFiles(l.fsys, l.dir, later); err != nil {
					return fail(err)
				}
			}
			bases = bases[:i+1]
			last = true
		}
		if last {
			s, err := openActiveSegment(l.fsys, l.dir, base, r.valid, params, &r, now)
			if err != nil {
				return fail(err)
			}
			segs = append(segs, s)
			break
		}
		s := openSealedSegment(l.fsys, l.dir, base, r.valid, r.state.maxTs, mod, false, params.maps)
		if err := s.writeIndexes(&r, params, false); err != nil {
			s.closeIndexes()
			s.release()
			return fail(err)
		}
		s.closeIndexes()
		segs = append(segs, s)
	}

	if len(segs) == 0 {
		base := int64(0)
		if startOK {
			base = startCk
		}
		s, err := createSegment(l.fsys, l.dir, base, params, now)
		if err != nil {
			return err
		}
		l.newFiles = true
		segs = append(segs, s)
	}

	active := segs[len(segs)-1]
	end := active.next
	start := segs[0].base
	if startOK {
		start = max(start, startCk)
	}
	if start > end {
		// Records up to the checkpointed start were deleted, but the log now ends before
		// it (lost in a crash): start afresh there rather than reuse deleted offsets.
		lg.Warn("log ends before its start offset; starting empty at the start offset", "start", start, "end", end)
		for _, s := range segs {
			s.retire()
			s.release()
			if err := s.removeFiles(); err != nil {
				return storageError("delete segment", err)
			}
		}
		s, err := createSegment(l.fsys, l.dir, start, params, now)
		if err != nil {
			return err
		}
		l.newFiles = true
		segs, end = []*segment{s}, start
	}
	l.publish(segs)
	l.end.Store(end)
	l.start.Store(start)
	if clean {
		l.recoveryPoint = end
		l.marked = true
	} else {
		l.recoveryPoint = min(rp, end)
	}
	l.recoveredFrom = l.recoveryPoint
	return nil
}

// markDirty removes the clean-shutdown marker, durably, before the first change to the
// log after a clean open: from then on a crash must be recovered from. The caller holds
// mu; nothing may change when it fails.
func (l *Log) markDirty() error {
	if !l.marked {
		return nil
	}
	if err := l.fsys.Remove(filepath.Join(l.dir, cleanShutdownFile)); err != nil && !isNotExist(err) {
		return storageError("remove clean-shutdown marker", err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return storageError("sync log directory", err)
	}
	l.marked = false
	return nil
}

// listSegments returns the base offsets of the segment files in the directory, after
// removing what an interrupted operation can leave behind: index files without a
// segment, temporary checkpoint files and the .deleted files of deleted segments.
func (l *Log) listSegments() ([]int64, error) {
	entries, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return nil, storageError("list log directory", err)
	}
	logs := map[int64]bool{}
	var indexes []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if stem, ok := strings.CutSuffix(name, deletedSuffix); ok {
			// A segment file deleted from the log whose unlink a crash cut short: the
			// log's start had moved past it (or a truncation below it), so it is not data.
			if _, _, seg := parseSegmentFileName(stem); seg {
				if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !isNotExist(err) {
					return nil, storageError("remove deleted segment file", err)
				}
			}
			continue
		}
		if strings.HasSuffix(name, ".tmp") {
			switch strings.TrimSuffix(name, ".tmp") {
			case recoveryPointFile, logStartFile, cleanShutdownFile:
				if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !isNotExist(err) {
					return nil, storageError("remove temporary file", err)
				}
			}
			continue
		}
		base, suffix, ok := parseSegmentFileName(name)
		if !ok {
			continue
		}
		if suffix == logSuffix {
			logs[base] = true
		} else {
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		base, _, _ := parseSegmentFileName(name)
		if !logs[base] {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !isNotExist(err) {
				return nil, storageError("remove orphan index", err)
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	return bases, nil
}

// recoverSegmentFile scans a segment file, cuts it after its valid prefix and returns
// what the scan found with the file's former size and modification time.
func recoverSegmentFile(fsys fileSystem, path string, base, limit, interval int64) (r scanResult, size, mod int64, err error) {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return r, 0, 0, storageError("open segment", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, 0, 0, storageError("stat segment", err)
	}
	size, mod = st.Size(), st.ModTime().UnixMilli()
	if size > math.MaxUint32 {
		return r, 0, 0, storageError("recover segment", fmt.Errorf("%s: %d bytes exceeds a segment's limit", path, size))
	}
	data, err := f.Map(int(size), false)
	if err != nil {
		return r, 0, 0, storageError("map segment", err)
	}
	adviseSequential(data)
	err = guardFault(func() error { r = scanSegment(data, base, limit, interval); return nil })
	unmap(data)
	if err != nil {
		return r, 0, 0, err
	}
	if r.valid < size {
		// Cutting the file also drops whatever lies beyond, so a later crash cannot
		// bring old batches back after newly appended ones.
		if err := f.Truncate(r.valid); err != nil {
			return r, 0, 0, storageError("truncate segment", err)
		}
	}
	return r, size, mod, nil
}

func statFile(fsys fileSystem, path string) (size, mod int64, err error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return st.Size(), st.ModTime().UnixMilli(), nil
}

func removeSegmentFiles(fsys fileSystem, dir string, base int64) error {
	var errs []error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := fsys.Remove(segmentPath(dir, base, suffix)); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return storageError("delete segment", err)
	}
	return nil
}
