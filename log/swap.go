package log

import (
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Suffixes of a segment being replaced by its cleaned version, as in Kafka. The cleaned
// bytes are written to BASE.log.cleaned and synced; renaming that to BASE.log.swap is
// the commit point; then the old indexes are removed (loading rebuilds them from the new
// bytes) and BASE.log.swap is renamed over BASE.log. Recovery deletes any .cleaned file
// and completes any .swap it finds, so a crash at any step leaves either the old
// segment or the new one, never a mix.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// swapSegments replaces the consecutive sealed segments olds with one segment holding
// data, their cleaned contents, at the first one's base offset, if they are all still in
// the log (retention or truncation may have removed one meanwhile: then it reports false
// and changes nothing). The bytes are written and synced outside the appender's lock;
// only the renames and the new segment list take it.
func (l *Log) swapSegments(olds []*segment, data []byte) (bool, error) {
	first := olds[0]
	cleaned := segmentPath(l.dir, first.base, logSuffix+cleanedSuffix)
	if err := l.writeCleaned(cleaned, data); err != nil {
		return false, err
	}
	size := int64(len(data))
	r := scanSegment(data, first.base, maxOffset, int64(l.config().IndexIntervalBytes))
	if r.valid != size {
		l.fsys.Remove(cleaned)
		return false, storageError("clean segment", r.stop)
	}
	// Retention counts from the largest timestamp left (the old ones' when no batch
	// has one) and the latest modification of the replaced segments, as Kafka keeps it.
	maxTs, oldMaxTs, modTime := r.state.maxTs, int64(-1), int64(-1)
	for _, o := range olds {
		oldMaxTs = max(oldMaxTs, o.maxTimestamp.Load())
		modTime = max(modTime, o.modTime.Load())
	}
	if maxTs < 0 {
		maxTs = oldMaxTs
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	segs := l.segments()
	idx := -1
	for i, s := range segs {
		if s == first {
			idx = i
		}
	}
	if l.closed.Load() || idx < 0 || idx+len(olds) > len(segs)-1 {
		l.fsys.Remove(cleaned)
		return false, nil
	}
	for n, o := range olds {
		if segs[idx+n] != o {
			l.fsys.Remove(cleaned)
			return false, nil
		}
	}
	if err := l.markDirty(); err != nil {
		l.fsys.Remove(cleaned)
		return false, err
	}
	if err := swapHook("cleaned"); err != nil {
		return false, err
	}
	swap := segmentPath(l.dir, first.base, logSuffix+swapSuffix)
	if err := l.fsys.Rename(cleaned, swap); err != nil {
		l.fsys.Remove(cleaned)
		return false, storageError("rename cleaned segment", err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		// Committed or not, recovery knows what to do with the .swap file; this log
		// must not go on as if nothing happened.
		return false, storageError("sync log directory", err)
	}
	if err := swapHook("committed"); err != nil {
		return false, err
	}
	// From here the swap is committed. The old objects must never load the new files,
	// so they retire, and a new object describes whichever file the name now holds.
	for _, o := range olds {
		o.retire()
	}
	bases := make([]int64, len(olds))
	for n, o := range olds {
		bases[n] = o.base
	}
	renamed, err := completeSwap(l.fsys, l.dir, bases)
	next := append([]*segment(nil), segs[:idx]...)
	if renamed {
		next = append(next, openSealedSegment(l.fsys, l.dir, first.base, size, maxTs, modTime, true, first.maps))
	} else {
		// The swap is committed but not done: the next Open completes it. Until then
		// the old files serve (their indexes may be gone: loading rebuilds them);
		// those removed already leave a gap that reads step over.
		for _, o := range olds {
			if fileExists(l.fsys, o.logPath()) {
				next = append(next, openSealedSegment(l.fsys, l.dir, o.base, o.size.Load(), o.maxTimestamp.Load(), o.modTime.Load(), true, o.maps))
			}
		}
	}
	next = append(next, segs[idx+len(olds):]...)
	l.publish(next)
	for _, o := range olds {
		o.release() // the Log's reference; Views keep the old mapping until they let go
	}
	return renamed && err == nil, err
}

func fileExists(fsys fileSystem, path string) bool {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// testSwapHook, set only by tests, is called at each step of a swap; an error stops the
// swap there, as a crash would.
var testSwapHook func(stage string) error

func swapHook(stage string) error {
	if testSwapHook != nil {
		return testSwapHook(stage)
	}
	return nil
}

// maxOffset bounds a scan that has no next segment to stop at.
const maxOffset = int64(^uint64(0) >> 1)

// writeCleaned writes and syncs a cleaned segment beside the live one.
func (l *Log) writeCleaned(path string, data []byte) error {
	f, err := l.fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return storageError("create cleaned segment", err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		l.fsys.Remove(path)
		return storageError("write cleaned segment", err)
	}
	return nil
}

// completeSwap finishes a committed swap of the segments at bases into one at bases[0]:
// the segments after the first go, then the first one's indexes (they describe the old
// bytes; loading rebuilds them), then the .swap file takes the first one's name. Each
// step is idempotent, so recovery can repeat it after a crash. It reports whether the
// rename happened.
func completeSwap(fsys fileSystem, dir string, bases []int64) (renamed bool, err error) {
	for _, b := range bases[1:] {
		if err := removeSegmentFiles(fsys, dir, b); err != nil {
			return false, err
		}
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(fsys, segmentPath(dir, bases[0], suffix)); err != nil {
			return false, err
		}
	}
	if err := swapHook("indexes-removed"); err != nil {
		return false, err
	}
	if err := fsys.Rename(segmentPath(dir, bases[0], logSuffix+swapSuffix), segmentPath(dir, bases[0], logSuffix)); err != nil {
		return false, storageError("rename swapped segment", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return true, storageError("sync log directory", err)
	}
	return true, nil
}

// swapCovers returns the base offsets of the segments a committed swap at base
// replaces: its own, and every other segment whose base lies within the offsets of the
// .swap file (cleaning keeps the last batch of a merged group, so the file reaches at
// least the last replaced segment's base).
func swapCovers(fsys fileSystem, dir string, base int64, entries []os.DirEntry) ([]int64, error) {
	f, err := fsys.OpenFile(segmentPath(dir, base, logSuffix+swapSuffix), os.O_RDONLY, 0)
	if err != nil {
		return nil, storageError("open swap file", err)
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return nil, storageError("stat swap file", err)
	}
	var r scanResult
	if size > 0 {
		data, err := f.Map(int(size), false)
		if err != nil {
			return nil, storageError("map swap file", err)
		}
		err = guardFault(func() error { r = scanSegment(data, base, maxOffset, math.MaxInt64); return nil })
		unmap(data)
		if err != nil {
			return nil, err
		}
	}
	bases := []int64{base}
	for _, e := range entries {
		b, suffix, ok := parseSegmentFileName(e.Name())
		if ok && suffix == logSuffix && b > base && b < r.next {
			bases = append(bases, b)
		}
	}
	return bases, nil
}

// recoverSwaps deals with what an interrupted cleaning left in dir: .cleaned files were
// never committed and are deleted; .swap files were, and their swap is completed. It
// reports whether it completed any, which makes a clean-shutdown marker untrustworthy.
func recoverSwaps(fsys fileSystem, dir string) (swapped bool, err error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false, storageError("list log directory", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, cleanedSuffix) {
			if err := removeIfExists(fsys, filepath.Join(dir, name)); err != nil {
				return swapped, err
			}
			continue
		}
		stem, ok := strings.CutSuffix(name, swapSuffix)
		if !ok {
			continue
		}
		base, suffix, ok := parseSegmentFileName(stem)
		if !ok || suffix != logSuffix {
			// Not ours to complete (Kafka swaps index files too; Shale never does).
			if err := removeIfExists(fsys, filepath.Join(dir, name)); err != nil {
				return swapped, err
			}
			continue
		}
		bases, err := swapCovers(fsys, dir, base, entries)
		if err != nil {
			return swapped, err
		}
		if _, err := completeSwap(fsys, dir, bases); err != nil {
			return swapped, err
		}
		swapped = true
	}
	return swapped, nil
}
