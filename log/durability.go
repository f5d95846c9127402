package log

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// durability remembers, for the files a log opens through a Faults with tracking on,
// what a power cut would leave of them: each file's content as of its last fsync, and
// each directory's entries as of its last fsync. Each file gets an id of its own when the
// tracker first sees it, so that a rename or a removal that was not made durable can be
// undone, even where the file system has since given the removed file's inode number to
// another file.
//
// The model is the adversarial end of what POSIX allows: every write since the last
// fsync of its file is lost, and every creation, rename and removal since the last fsync
// of its directory is undone. A file created and never fsynced comes back empty, if its
// directory entry was made durable at all. Only files the log opens are tracked: other
// files in the same directories (the partition's checkpoints, written atomically with
// their own fsyncs) and the directories themselves are left as they are.
type durability struct {
	nextID uint64
	// ids maps each tracked inode that still has a name to its file id.
	ids map[uint64]uint64
	// content is each file's durable bytes (nil: never synced, so empty).
	content map[uint64][]byte
	// entries is each directory's durable names (name to file id), as of its last fsync
	// (a directory first seen without one has none).
	entries map[string]map[string]uint64
	// dirIno is the inode of the directory entries describes. Directories themselves
	// are not tracked: one renamed away (a deleted topic's replica set aside) and
	// another created at its path start afresh, and the old one's entries are dropped.
	dirIno map[string]uint64
	// live is each directory's current names of tracked files, kept by the tracked
	// operations, so that a directory's fsync costs no listing.
	live map[string]map[string]uint64
}

func (d *durability) liveDir(dir string) map[string]uint64 {
	if d.live[dir] == nil {
		d.live[dir] = map[string]uint64{}
	}
	return d.live[dir]
}

// dirEntries returns dir's durable entries, afresh when the directory at that path is
// not the one they were recorded for. The caller holds the Faults' lock.
func (d *durability) dirEntries(dir string) map[string]uint64 {
	ino := uint64(0)
	if fi, err := os.Stat(dir); err == nil {
		ino, _ = inodeOf(fi)
	}
	if d.entries[dir] == nil || d.dirIno[dir] != ino {
		d.entries[dir], d.dirIno[dir] = map[string]uint64{}, ino
		delete(d.live, dir)
	}
	return d.entries[dir]
}

// TrackDurability makes f remember what every file and directory operation of the logs
// opened with f has made durable, so that PowerLoss can put the disk back to it. Call it
// before opening the logs; it is for simulations and tests.
func (f *Faults) TrackDurability() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dur == nil {
		f.dur = &durability{ids: map[uint64]uint64{}, content: map[uint64][]byte{},
			entries: map[string]map[string]uint64{}, dirIno: map[string]uint64{}, live: map[string]map[string]uint64{}}
	}
}

func (f *Faults) tracking() *durability {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dur
}

func inodeOf(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ino, true
}

func readAllAt(fl file, size int64) []byte {
	b := make([]byte, size)
	if n, err := fl.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		b = b[:n]
	}
	return b
}

// opened records a file opened at name and returns its id. A file this open created has
// nothing durable yet; one first seen that predates tracking is taken as durable, entry
// included.
func (f *Faults) opened(name string, fl file, created bool) uint64 {
	fi, err := fl.Stat()
	if err != nil {
		return 0
	}
	ino, ok := inodeOf(fi)
	if !ok {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dur
	dir, base := filepath.Dir(name), filepath.Base(name)
	entries := d.dirEntries(dir)
	id, known := d.ids[ino]
	if created || !known {
		d.nextID++
		id = d.nextID
		d.ids[ino] = id
		if created {
			d.content[id] = nil
		} else {
			d.content[id] = readAllAt(fl, fi.Size())
			entries[base] = id
		}
	}
	d.liveDir(dir)[base] = id
	return id
}

// synced records a file's fsync: its current bytes are durable.
func (f *Faults) synced(fl file, id uint64) {
	if id == 0 {
		return
	}
	// Read under the lock: of two fsyncs of one file on different goroutines (an
	// append's under flush.messages and the background's after it trimmed the file), the
	// one recorded last must not be the older content.
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := fl.Stat()
	if err != nil {
		return
	}
	f.dur.content[id] = readAllAt(fl, fi.Size())
}

// syncedDir records a directory's fsync: its current names of tracked files are durable.
func (f *Faults) syncedDir(dir string) {
	dir = filepath.Clean(dir)
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dur
	entries := d.dirEntries(dir)
	clear(entries)
	for name, id := range d.live[dir] {
		entries[name] = id
	}
}

// renamed and removed keep the live names, and forget the inode of a file that lost its
// last name, so that a new file given the same inode number is a new file.
func (f *Faults) renamed(oldpath, newpath string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dur
	od, on := filepath.Dir(oldpath), filepath.Base(oldpath)
	id, ok := d.live[od][on]
	if !ok {
		return
	}
	delete(d.live[od], on)
	nd, nn := filepath.Dir(newpath), filepath.Base(newpath)
	if over, ok := d.live[nd][nn]; ok && over != id {
		d.forgetLocked(over)
	}
	d.liveDir(nd)[nn] = id
}

func (f *Faults) removed(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dur
	dir, base := filepath.Dir(path), filepath.Base(path)
	if id, ok := d.live[dir][base]; ok {
		delete(d.live[dir], base)
		d.forgetLocked(id)
	}
}

func (f *Faults) removedAll(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dur
	path = filepath.Clean(path)
	for dir, names := range d.live {
		if dir == path || len(dir) > len(path) && dir[:len(path)+1] == path+string(filepath.Separator) {
			for _, id := range names {
				d.forgetLocked(id)
			}
			delete(d.live, dir)
		}
	}
	if id, ok := d.live[filepath.Dir(path)][filepath.Base(path)]; ok {
		delete(d.live[filepath.Dir(path)], filepath.Base(path))
		d.forgetLocked(id)
	}
}

// forgetLocked drops the inode of file id, unless another live name still holds it (its
// content stays: a durable entry may still name it).
func (d *durability) forgetLocked(id uint64) {
	for _, names := range d.live {
		for _, other := range names {
			if other == id {
				return
			}
		}
	}
	for ino, v := range d.ids {
		if v == id {
			delete(d.ids, ino)
		}
	}
}

// PowerLoss puts every directory the tracked logs used back to what a power cut leaves:
// each tracked file reverts to its content at its last fsync, tracked files created or
// renamed in since their directory's last fsync disappear, and those removed or renamed
// away since then come back. The logs must be closed (a crashed process's). It returns
// how many files it changed.
func (f *Faults) PowerLoss() (changed int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dur
	if d == nil {
		return 0, errors.New("power loss without TrackDurability")
	}
	dirs := make([]string, 0, len(d.entries))
	for dir := range d.entries {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		n, err := d.restoreDir(dir)
		changed += n
		if err != nil {
			return changed, fmt.Errorf("power loss in %s: %w", dir, err)
		}
	}
	return changed, nil
}

func (d *durability) restoreDir(dir string) (changed int, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		// Directories are not tracked: a removed one stays removed.
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if ino, _ := inodeOf(fi); ino != d.dirIno[dir] {
		// Another directory now: the one recorded was renamed away or removed.
		return 0, nil
	}
	durable := d.entries[dir]
	// After the cut the live names are the durable ones.
	defer func() { d.live[dir] = maps.Clone(d.entries[dir]) }()
	names := make([]string, 0, len(d.live[dir]))
	for name := range d.live[dir] {
		names = append(names, name)
	}
	slices.Sort(names)
	present := map[string]bool{}
	for _, name := range names {
		id := d.live[dir][name]
		path := filepath.Join(dir, name)
		if want, ok := durable[name]; !ok || want != id {
			// Created, or renamed in, since the directory's last fsync.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return changed, err
			}
			d.forgetLocked(id)
			changed++
			continue
		}
		present[name] = true
		b, err := os.ReadFile(path)
		if err != nil {
			return changed, err
		}
		if string(b) == string(d.content[id]) {
			continue
		}
		if err := rewrite(path, d.content[id]); err != nil {
			return changed, err
		}
		changed++
	}
	back := make([]string, 0, len(durable))
	for name := range durable {
		if !present[name] {
			back = append(back, name)
		}
	}
	slices.Sort(back)
	for _, name := range back {
		// Removed, or renamed away, since the directory's last fsync: back, as a new
		// inode with the old file's durable content.
		id := durable[name]
		path := filepath.Join(dir, name)
		if err := rewrite(path, d.content[id]); err != nil {
			return changed, err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return changed, err
		}
		ino, ok := inodeOf(fi)
		if !ok {
			return changed, fmt.Errorf("no inode for %s", path)
		}
		d.ids[ino] = id
		changed++
	}
	return changed, nil
}

// rewrite replaces path's content in place (or creates it).
func rewrite(path string, b []byte) error {
	fl, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := fl.Write(b); err != nil {
		fl.Close()
		return err
	}
	return fl.Close()
}

// TrackedFiles is how many inodes the tracker knows (for traces and tests).
func (f *Faults) TrackedFiles() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dur == nil {
		return 0
	}
	return len(f.dur.content)
}
