// Package lazyfs is a FUSE file system for power-loss tests, in the spirit of Jepsen's
// LazyFS: it passes every operation through to a backing directory and remembers, for
// each file, what was written to it since its last fsync or fdatasync; Cut ("the power
// goes") undoes all of that, leaving each file exactly as it was synced.
//
// Writes go straight to the backing file, and before a write (or a truncate, or a hole
// punched) overwrites bytes that were synced, their old contents are saved. A cut
// truncates each file written since its last sync back to its synced size and puts the
// saved bytes back, newest first. Files are known by their backing inode, so a rename
// does not lose track of one.
//
// What it does not model: directory entries. A file created, renamed or removed stays so
// after a cut whether or not its directory was fsynced; only file contents roll back (a
// file created and never synced is left empty). Metadata other than size (mode, times)
// is not rolled back either.
//
// A cut unmounts the file system first (the processes that used it must be gone: kill
// them first), so that the kernel keeps none of the dropped data cached; then it rolls
// back and mounts again. The unmount aborts the FUSE connection (see Unmount), which
// drops the dirty pages of shared mappings the kernel still holds: unsynced, so a cut
// would roll them back anyway.
//
// Nothing here may hang a test: an unmount that does not finish in time falls back to
// Abort, which aborts the FUSE connection (every request pending or to come fails, so no
// process stays stuck in one, killed or not) and detaches the mount.
//
// The file system is served by goroutines of the process that mounts it. That process
// may use the mount through system calls, but must not touch a mapping of a file on it:
// a page fault waits for those goroutines, which a stop-the-world of the Go runtime may
// be holding, waiting for the faulting thread.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is one mount of a backing directory.
type FS struct {
	backing, mnt string

	mu      sync.Mutex            // held by the file system's handlers
	pending map[uint64]*fileState // backing inode -> what to undo

	// mountMu is apart from mu so that Abort never waits on a wedged handler.
	mountMu sync.Mutex
	server  *fuse.Server
	conn    uint32 // the mounted FUSE connection's number (its device), 0 when unmounted
	aborted bool   // Abort was called: never mount again
}

const (
	// unmountTimeout bounds a clean unmount before Unmount aborts the connection.
	unmountTimeout = 20 * time.Second
	// serverTimeout bounds the wait for the server's loops once the mount is gone.
	serverTimeout = 30 * time.Second
	// fusectlMagic is the file system type of fusectl (FUSE_CTL_SUPER_MAGIC).
	fusectlMagic = 0x65735543
)

// fileState is what a file's contents were at its last sync: its size, and the bytes
// below that size overwritten since, oldest first.
type fileState struct {
	syncedSize int64
	undo       []span
}

type span struct {
	off  int64
	data []byte
}

// Mount mounts backing on mnt (both must exist).
func Mount(backing, mnt string) (*FS, error) {
	// Absolute, as /proc/self/mountinfo names it (mountedAt).
	mnt, err := filepath.Abs(mnt)
	if err != nil {
		return nil, err
	}
	f := &FS{backing: backing, mnt: mnt, pending: map[uint64]*fileState{}}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Available says why FUSE tests cannot run here, or nil if they may try: /dev/fuse must
// exist. Whether mounting is allowed only a mount tells (Mount's error).
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: %w", err)
	}
	return nil
}

func (f *FS) mount() error {
	f.mountMu.Lock()
	aborted := f.aborted
	f.mountMu.Unlock()
	if aborted {
		return fmt.Errorf("lazyfs: %s was aborted; it is not mounted again", f.mnt)
	}
	root := &gofs.LoopbackRoot{Path: f.backing}
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return fmt.Errorf("lazyfs: stat %s: %w", f.backing, err)
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, fs: f}
	}
	rootNode := root.NewNode(root, nil, "", &st)
	root.RootNode = rootNode
	// Zero timeouts: every lookup and attribute comes from the backing files, so what
	// the kernel shows never strays from what a cut leaves.
	zero := time.Duration(0)
	server, err := gofs.Mount(f.mnt, rootNode, &gofs.Options{
		EntryTimeout: &zero,
		AttrTimeout:  &zero,
		MountOptions: fuse.MountOptions{FsName: "lazyfs", Name: "lazyfs"},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount %s on %s: %w", f.backing, f.mnt, err)
	}
	// The connection's number, for Abort, is the device of the mounted file system: known
	// now, while the server surely answers, rather than when it may not.
	var mst unix.Stat_t
	err = unix.Stat(f.mnt, &mst)
	f.mountMu.Lock()
	aborted = f.aborted
	if err == nil && !aborted {
		f.server = server
		f.conn = unix.Major(mst.Dev)<<20 | unix.Minor(mst.Dev) // the kernel's dev_t, as fusectl names it
	}
	f.mountMu.Unlock()
	if err != nil || aborted {
		// Aborted while mounting, or no number to abort it by: the new mount must not
		// stay.
		_ = detach(f.mnt)
		waitServer(server)
		if aborted {
			return fmt.Errorf("lazyfs: %s aborted while mounting", f.mnt)
		}
		return fmt.Errorf("lazyfs: mount %s on %s: %w", f.backing, f.mnt, err)
	}
	return nil
}

// Unmount unmounts the file system and ends its server. It aborts the FUSE connection
// first (as Abort does, where it can), because an unmount alone ends the connection only
// if no other mount namespace holds a copy of the mount: with private mount propagation
// any namespace made while it was mounted keeps the file system, its connection and so
// the server alive (tests/chaos makes them with `ip netns exec`, in parallel with this
// under go test ./...). Aborting before the unmount, rather than after, is while the
// mount pins the connection's number, which no other mount can then be given. For a cut
// it changes nothing: what it drops, dirty pages of shared mappings not synced, a cut
// drops anyway. An unmount that fails (the mount stays busy: a process still holds a
// file on it) or does not finish within unmountTimeout falls back to Abort, and Unmount
// returns why it had to. It is a no-op when not mounted.
func (f *FS) Unmount() error {
	f.mountMu.Lock()
	server, conn := f.server, f.conn
	f.server = nil
	f.mountMu.Unlock()
	if server == nil {
		return nil
	}
	var abortErr error
	if conn != 0 {
		// Where this fails (not root, no fusectl) the unmount alone has to do.
		abortErr = abortConn(conn)
	}
	unmounted := make(chan error, 1) // buffered: umount may outlive the wait
	go func() { unmounted <- umount(f.mnt) }()
	var err error
	select {
	case err = <-unmounted:
	case <-time.After(unmountTimeout):
		err = fmt.Errorf("not unmounted after %v", unmountTimeout)
	}
	if err != nil {
		if aerr := f.abort(server); aerr != nil {
			return fmt.Errorf("lazyfs: unmount %s: %w; abort: %w", f.mnt, err, aerr)
		}
		return fmt.Errorf("lazyfs: unmount %s: %w (aborted and detached instead)", f.mnt, err)
	}
	f.mountMu.Lock()
	f.conn = 0
	f.mountMu.Unlock()
	if !waitServer(server) {
		return errors.Join(fmt.Errorf("lazyfs: server of %s still running %v after unmount", f.mnt, serverTimeout), abortErr)
	}
	return nil
}

// umount unmounts mnt, not lazily: a killed process may take a moment to let go of its
// files, so a busy mount is tried again for a while.
func umount(mnt string) error {
	delay := 10 * time.Millisecond
	for {
		err := unix.Unmount(mnt, 0)
		if errors.Is(err, unix.EPERM) {
			// Not root: the set-uid helper unmounts what it mounted for us.
			out, ferr := exec.Command("fusermount", "-u", mnt).CombinedOutput()
			if ferr != nil {
				return fmt.Errorf("fusermount -u: %w: %s", ferr, out)
			}
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || delay > 2*time.Second {
			return err
		}
		time.Sleep(delay)
		delay *= 2
	}
}

// Abort ends the mount at once, whatever state its server and its users are in: it
// aborts the FUSE connection, so that every request pending or to come fails (ENOTCONN)
// and no process stays stuck in one, detaches the mount lazily, and waits (bounded) for
// the server to stop. The FS cannot be mounted again: a Cut after it fails. Abort may be
// called from any goroutine, at any time, any number of times; it needs root to reach
// fusectl where it is not mounted, and detaches the mount even without.
func (f *FS) Abort() error {
	f.mountMu.Lock()
	server := f.server
	f.server = nil
	f.mountMu.Unlock()
	return f.abort(server)
}

func (f *FS) abort(server *fuse.Server) error {
	f.mountMu.Lock()
	f.aborted = true
	conn := f.conn
	f.conn = 0
	f.mountMu.Unlock()
	var errs []error
	if conn != 0 {
		if err := abortConn(conn); err != nil {
			errs = append(errs, err)
		}
	}
	if err := detach(f.mnt); err != nil {
		errs = append(errs, err)
	}
	if server != nil && !waitServer(server) {
		errs = append(errs, fmt.Errorf("lazyfs: server of %s still running %v after abort", f.mnt, serverTimeout))
	}
	return errors.Join(errs...)
}

// waitServer waits up to serverTimeout for the server's read loops to end (they do once
// the kernel's side of the connection is gone), and says whether they did.
func waitServer(server *fuse.Server) bool {
	done := make(chan struct{})
	go func() {
		server.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(serverTimeout):
		return false
	}
}

// abortConn aborts FUSE connection conn through fusectl: at /sys/fs/fuse/connections
// where it is mounted (systemd mounts it), else on a mount of its own, made for the
// purpose and removed after (root only). A connection already gone is not an error.
func abortConn(conn uint32) error {
	dir, release, err := fusectl()
	if err != nil {
		return fmt.Errorf("lazyfs: abort connection %d: %w", conn, err)
	}
	defer release()
	// Not os.WriteFile: fusectl's files do not take O_CREATE|O_TRUNC kindly.
	file, err := os.OpenFile(filepath.Join(dir, strconv.FormatUint(uint64(conn), 10), "abort"), os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lazyfs: abort connection %d: %w", conn, err)
	}
	defer file.Close()
	if _, err := file.Write([]byte("1")); err != nil {
		return fmt.Errorf("lazyfs: abort connection %d: %w", conn, err)
	}
	return nil
}

// fusectl is a directory where fusectl is mounted, and what to call when done with it.
func fusectl() (dir string, release func(), err error) {
	const std = "/sys/fs/fuse/connections"
	var sfs unix.Statfs_t
	if err := unix.Statfs(std, &sfs); err == nil && sfs.Type == fusectlMagic {
		return std, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "fusectl")
	if err != nil {
		return "", nil, err
	}
	if err := unix.Mount("fusectl", tmp, "fusectl", 0, ""); err != nil {
		os.Remove(tmp)
		return "", nil, fmt.Errorf("fusectl is not mounted at %s and cannot be mounted: %w", std, err)
	}
	return tmp, func() {
		_ = unix.Unmount(tmp, unix.MNT_DETACH)
		os.Remove(tmp)
	}, nil
}

// detach unmounts mnt lazily (MNT_DETACH: at once for new lookups, fully once the last
// user lets go); nothing mounted there is not an error. umount2 touches only a mount
// whose root is mnt, never the file system that holds mnt.
func detach(mnt string) error {
	err := unix.Unmount(mnt, unix.MNT_DETACH)
	switch {
	case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EPERM):
		// Not root: the set-uid helper may unmount what it mounted for us, if anything
		// is still mounted there (umount2 said EPERM before looking).
		if !mountedAt(mnt) {
			return nil
		}
		out, ferr := exec.Command("fusermount", "-uz", mnt).CombinedOutput()
		if ferr != nil {
			return fmt.Errorf("lazyfs: detach %s: %w; fusermount -uz: %w: %s", mnt, err, ferr, out)
		}
		return nil
	default:
		return fmt.Errorf("lazyfs: detach %s: %w", mnt, err)
	}
}

// Cut is a power cut: it unmounts, rolls every file back to its last sync, and mounts
// again. Whatever used the mount must be dead already. It returns how many files were
// rolled back.
func (f *FS) Cut() (int, error) {
	if err := f.Unmount(); err != nil {
		return 0, err
	}
	n, err := f.Drop()
	if err != nil {
		return n, err
	}
	return n, f.mount()
}

// Drop rolls every file in the backing directory back to its last sync. The file system
// must not be mounted (Cut does all three steps).
func (f *FS) Drop() (int, error) {
	f.mountMu.Lock()
	mounted := f.server != nil
	f.mountMu.Unlock()
	if mounted {
		return 0, errors.New("lazyfs: drop while mounted")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	pending := f.pending
	f.pending = map[uint64]*fileState{}
	n := 0
	err := filepath.WalkDir(f.backing, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		ino := info.Sys().(*syscall.Stat_t).Ino
		st, ok := pending[ino]
		if !ok {
			return nil
		}
		delete(pending, ino) // a hard link must not be rolled back twice
		n++
		return st.rollBack(path)
	})
	return n, err
}

func (st *fileState) rollBack(path string) error {
	file, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("lazyfs: roll back %s: %w", path, err)
	}
	defer file.Close()
	if err := file.Truncate(st.syncedSize); err != nil {
		return fmt.Errorf("lazyfs: roll back %s: %w", path, err)
	}
	for i := len(st.undo) - 1; i >= 0; i-- {
		if _, err := file.WriteAt(st.undo[i].data, st.undo[i].off); err != nil {
			return fmt.Errorf("lazyfs: roll back %s: %w", path, err)
		}
	}
	return nil
}

// Pending is how many files hold unsynced changes.
func (f *FS) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// beforeChange records what bytes [off, off+n) of the open backing file fd were at its
// last sync, before they change (n < 0: to the end of the synced size); f.mu is held.
func (f *FS) beforeChange(fd int, off, n int64) error {
	var sys unix.Stat_t
	if err := unix.Fstat(fd, &sys); err != nil {
		return err
	}
	st, ok := f.pending[sys.Ino]
	if !ok {
		// Nothing changed since the last sync: the file as it stands is the synced one.
		st = &fileState{syncedSize: sys.Size}
		f.pending[sys.Ino] = st
	}
	end := off + n
	if n < 0 || end > st.syncedSize {
		end = st.syncedSize
	}
	if off >= end {
		return nil // only bytes past the synced size change: truncation undoes them
	}
	old := make([]byte, end-off)
	got, err := unix.Pread(fd, old, off)
	if err != nil {
		return err
	}
	st.undo = append(st.undo, span{off: off, data: old[:got]})
	return nil
}

// node is a loopback node whose files are tracked.
type node struct {
	gofs.LoopbackNode
	fs *FS
}

var (
	_ gofs.NodeOpener    = (*node)(nil)
	_ gofs.NodeCreater   = (*node)(nil)
	_ gofs.NodeSetattrer = (*node)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.wrap(fh), fuseFlags, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	in, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, n.wrap(fh), fuseFlags, 0
}

func (n *node) wrap(fh gofs.FileHandle) gofs.FileHandle {
	lf := fh.(*gofs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	return &file{lf: lf, fd: fd, fs: n.fs}
}

// Setattr without a file handle (truncate(2) by path) is tracked here; with one, the
// file's own Setattr tracks it.
func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := fh.(*file); !ok {
		if size, ok := in.GetSize(); ok {
			path := filepath.Join(n.RootData.Path, n.Path(n.Root()))
			fd, err := unix.Open(path, unix.O_RDWR, 0)
			if err != nil {
				return gofs.ToErrno(err)
			}
			n.fs.mu.Lock()
			err = n.fs.beforeChange(fd, int64(size), -1)
			if err == nil {
				err = unix.Ftruncate(fd, int64(size))
			}
			n.fs.mu.Unlock()
			unix.Close(fd)
			if err != nil {
				return gofs.ToErrno(err)
			}
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// file is an open backing file whose changes are recorded. It deliberately implements
// no Writev, passthrough or copy_file_range, which would reach the backing file around
// the record.
type file struct {
	lf *gofs.LoopbackFile
	fd int
	fs *FS
}

var (
	_ gofs.FileReader    = (*file)(nil)
	_ gofs.FileWriter    = (*file)(nil)
	_ gofs.FileFsyncer   = (*file)(nil)
	_ gofs.FileFlusher   = (*file)(nil)
	_ gofs.FileReleaser  = (*file)(nil)
	_ gofs.FileGetattrer = (*file)(nil)
	_ gofs.FileSetattrer = (*file)(nil)
	_ gofs.FileLseeker   = (*file)(nil)
	_ gofs.FileAllocater = (*file)(nil)
)

func (h *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, buf, off)
}

func (h *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.fs.beforeChange(h.fd, off, int64(len(data))); err != nil {
		return 0, gofs.ToErrno(err)
	}
	n, err := unix.Pwrite(h.fd, data, off)
	return uint32(n), gofs.ToErrno(err)
}

func (h *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	// Hold the lock across the sync so that no write slips in between it and the record
	// being forgotten.
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	var sys unix.Stat_t
	if err := unix.Fstat(h.fd, &sys); err != nil {
		return gofs.ToErrno(err)
	}
	delete(h.fs.pending, sys.Ino)
	// The backing directory is the "disk" of the test; syncing it for real would only
	// slow the test down, and a cut does not go through the kernel.
	return 0
}

func (h *file) Flush(ctx context.Context) syscall.Errno   { return h.lf.Flush(ctx) }
func (h *file) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }

func (h *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		h.fs.mu.Lock()
		err := h.fs.beforeChange(h.fd, int64(size), -1)
		if err == nil {
			err = unix.Ftruncate(h.fd, int64(size))
		}
		h.fs.mu.Unlock()
		if err != nil {
			return gofs.ToErrno(err)
		}
	}
	return h.lf.Setattr(ctx, in, out)
}

func (h *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

func (h *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	// Plain allocation only grows the file, which the cut's truncation undoes; a punched
	// or zeroed range changes bytes.
	if mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
		n := int64(size)
		if mode&(unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
			n = -1 // everything after off moves
		}
		if err := h.fs.beforeChange(h.fd, int64(off), n); err != nil {
			return gofs.ToErrno(err)
		}
	}
	return gofs.ToErrno(unix.Fallocate(h.fd, mode, int64(off), int64(size)))
}

// mountedAt says whether this process sees a mount at mnt, from /proc/self/mountinfo:
// asking the mount itself (stat) could wait on a wedged server.
func mountedAt(mnt string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true // cannot tell: let the caller try
	}
	for line := range strings.Lines(string(b)) {
		// "id parent major:minor root mount-point options ...", spaces in the mount point
		// written as \040.
		fields := strings.Fields(line)
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == mnt {
			return true
		}
	}
	return false
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
