package log

import (
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

// swapSegment replaces the sealed segment old with data, its cleaned contents, if old is
// still in the log (retention or truncation may have removed it meanwhile: then it
// reports false and changes nothing). The bytes are written and synced outside the
// appender's lock; only the renames and the new segment list take it.
func (l *Log) swapSegment(old *segment, data []byte) (bool, error) {
	cleaned := segmentPath(l.dir, old.base, logSuffix+cleanedSuffix)
	if err := l.writeCleaned(cleaned, data); err != nil {
		return false, err
	}
	var size, maxTs int64 = int64(len(data)), -1
	r := scanSegment(data, old.base, maxOffset, int64(l.config().IndexIntervalBytes))
	if r.valid != size {
		l.fsys.Remove(cleaned)
		return false, storageError("clean segment", r.stop)
	}
	maxTs = r.state.maxTs
	if maxTs < 0 {
		maxTs = old.maxTimestamp.Load()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	segs := l.segments()
	idx := -1
	for i, s := range segs {
		if s == old {
			idx = i
		}
	}
	if l.closed.Load() || idx < 0 || idx == len(segs)-1 {
		l.fsys.Remove(cleaned)
		return false, nil
	}
	if err := l.markDirty(); err != nil {
		l.fsys.Remove(cleaned)
		return false, err
	}
	if err := swapHook("cleaned"); err != nil {
		return false, err
	}
	swap := segmentPath(l.dir, old.base, logSuffix+swapSuffix)
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
	// From here the swap is committed. The old object must never load the new files,
	// so it retires, and a new object describes whichever file the name now holds.
	old.retire()
	renamed, err := completeSwap(l.fsys, l.dir, old.base)
	ns := openSealedSegment(l.fsys, l.dir, old.base, size, maxTs, old.modTime.Load(), true, old.maps)
	if !renamed {
		// Still the old bytes (their indexes may be gone: loading rebuilds them). The
		// next Open completes the swap.
		ns = openSealedSegment(l.fsys, l.dir, old.base, old.size.Load(), old.maxTimestamp.Load(), old.modTime.Load(), true, old.maps)
	}
	next := append([]*segment(nil), segs...)
	next[idx] = ns
	l.publish(next)
	old.release() // the Log's reference; Views keep the old mapping until they let go
	return renamed && err == nil, err
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

// completeSwap finishes a committed swap of the segment at base: the old indexes go
// (they describe the old bytes; loading rebuilds them), then the .swap file takes the
// segment's name. Each step is idempotent, so recovery can repeat it after a crash.
// It reports whether the rename happened.
func completeSwap(fsys fileSystem, dir string, base int64) (renamed bool, err error) {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(fsys, segmentPath(dir, base, suffix)); err != nil {
			return false, err
		}
	}
	if err := swapHook("indexes-removed"); err != nil {
		return false, err
	}
	if err := fsys.Rename(segmentPath(dir, base, logSuffix+swapSuffix), segmentPath(dir, base, logSuffix)); err != nil {
		return false, storageError("rename swapped segment", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return true, storageError("sync log directory", err)
	}
	return true, nil
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
		if _, err := completeSwap(fsys, dir, base); err != nil {
			return swapped, err
		}
		swapped = true
	}
	return swapped, nil
}
