package protocol

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	shalelog "github.com/shalelog/shale/log"
)

// Plaintext fetch responses send their record bytes with sendfile(2) from the segment
// files rather than with writev from the segments' mappings. writev copies every byte
// out of the mapping into the socket's buffers, and the first touch of each page the
// appender wrote with pwrite maps it into the broker's page tables; sendfile hands the
// page-cache pages to the socket without either (on loopback the receiver's copy is
// the only one). The headers between the record chunks still come from memory, written
// in order between the sendfile calls.
//
// unix.Sendfile with an explicit offset, rather than (*net.TCPConn).ReadFrom over an
// io.SectionReader or io.LimitedReader of the *os.File: the standard library's Linux
// path sends from the file's current offset and moves it, and one segment's descriptor
// is shared by every connection reading it, so concurrent fetches would race on that
// offset; ReadFrom also falls back silently to a copy through a user-space buffer, which
// would hide a broken path behind a slower one. The offset form reads like pread and
// touches no shared state; the socket's RawConn waits for writability through the
// runtime poller, so EAGAIN, write deadlines and a close from another goroutine behave
// as they do for writev.
//
// What is sent is what writev would send. Each section is the file range of one View
// chunk, the same bytes of the same file (the chunk is a MAP_SHARED mapping of it), read
// below the high watermark or LSO the View was bounded by. The View pins its segments
// until the response is written: retention, DeleteRecords, a roll or a compaction swap
// unlink or replace the files, but the descriptor stays open (log keeps a mapped
// segment's descriptor), and an unlinked file's pages stay readable through it. A
// truncation of the active segment (a follower's, on a leader change) zeroes the cut
// bytes in the page cache and appends may overwrite them; a response already built over
// them sends old bytes, zeros, new bytes or a mix, with writev as with sendfile, as log's
// Truncate documents. The one difference is when the bytes are taken: writev copies
// them during the call, while sendfile passes page references that the receiver's
// kernel (on loopback) or the NIC reads a little later, so the window of that race
// stretches to the moment the bytes leave. Those are bytes above the high watermark
// (only an unclean election truncates below it), which a consumer never reads and a
// follower checks by CRC and leader epoch before it keeps them. A file cut under a
// section (which the log never does to a pinned range) ends the response early: the
// connection is closed, as a writev faulting on the same range would have it.

// fileSender sends file sections to a plaintext TCP socket.
type fileSender struct {
	rc syscall.RawConn
	// refused is set once the kernel refused sendfile from a segment file (a file
	// system without splice support): the connection then writes from memory. Used by
	// the connection's writer only.
	refused bool
}

// warnRefused logs the first refusal only: every connection finds out for itself.
var warnRefused sync.Once

// newFileSender returns nil when nc is not a plain TCP connection (TLS, or a wrapper),
// which then keeps the writev path.
func newFileSender(nc net.Conn) *fileSender {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &fileSender{rc: rc}
}

// errNoSendfile: the kernel cannot sendfile from this file; nothing was sent.
var errNoSendfile = errors.New("sendfile not supported for this file")

// writeSections writes bufs in order, each buffer whose section names a file with
// sendfile from that file, the others from memory. A buffer of a section holds the same
// bytes as its file range (a View's chunk), so where sendfile cannot be used the
// buffer itself goes out instead.
func (c *conn) writeSections(bufs net.Buffers, secs []shalelog.Section) error {
	fs := c.files
	for i := 0; i < len(bufs); {
		if secs[i].File == nil || fs.refused {
			j := i + 1
			for j < len(bufs) && (secs[j].File == nil || fs.refused) {
				j++
			}
			// Headers followed by a file section are held back (MSG_MORE) to leave in the
			// same segments as the records rather than in a small packet of their own.
			if err := fs.writeMemory(c, bufs[i:j:j], j < len(bufs)); err != nil {
				return err
			}
			i = j
			continue
		}
		err := fs.sendSection(c, secs[i].File, secs[i].Offset, len(bufs[i]))
		if errors.Is(err, errNoSendfile) {
			fs.refused = true
			warnRefused.Do(func() {
				c.lg.Warn("sendfile is not supported for segment files; fetch responses are written from memory", "err", err)
			})
			continue // the same buffer again, from memory
		}
		if err != nil {
			return err
		}
		i++
	}
	return nil
}

// writeMemory writes bufs with sendmsg (writev's gather), a chunk at a time under a
// fresh write deadline each, like writeBuffers; more sets MSG_MORE on the last chunk.
func (fs *fileSender) writeMemory(c *conn, bufs net.Buffers, more bool) error {
	for len(bufs) > 0 {
		var (
			chunk net.Buffers
			total int
		)
		chunk, bufs, total = nextChunk(bufs)
		flags := 0
		if more && len(bufs) == 0 {
			flags = unix.MSG_MORE
		}
		c.armWrite()
		var werr error
		err := fs.rc.Write(func(fd uintptr) bool {
			for total > 0 {
				w, err := unix.SendmsgBuffers(int(fd), [][]byte(chunk), nil, nil, flags|unix.MSG_NOSIGNAL)
				if err == unix.EINTR {
					continue
				}
				if err == unix.EAGAIN {
					return false // wait until writable, under the deadline
				}
				if err != nil {
					werr = os.NewSyscallError("sendmsg", err)
					return true
				}
				total -= w
				chunk = consume(chunk, w)
			}
			return true
		})
		if err == nil {
			err = werr
		}
		if err != nil {
			return err
		}
		c.touch()
	}
	return nil
}

// consume drops the first n bytes of bufs.
func consume(bufs net.Buffers, n int) net.Buffers {
	for n > 0 && len(bufs) > 0 {
		if n < len(bufs[0]) {
			bufs[0] = bufs[0][n:]
			return bufs
		}
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}

// sendSection sends n bytes of f from off with sendfile, a chunk at a time under a
// fresh write deadline each. errNoSendfile means nothing was sent and the kernel
// refused; any other error leaves the response cut and the connection to be closed.
func (fs *fileSender) sendSection(c *conn, f *os.File, off int64, n int) error {
	src, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("sendfile from %s: %w", f.Name(), err)
	}
	sent := 0
	for sent < n {
		chunk := min(n-sent, writeChunk)
		c.armWrite()
		var werr error
		// Control keeps the segment's descriptor from being closed during the calls; the
		// View that the response holds keeps it open until the response is written.
		cerr := src.Control(func(sfd uintptr) {
			err := fs.rc.Write(func(dfd uintptr) bool {
				for chunk > 0 {
					w, err := unix.Sendfile(int(dfd), int(sfd), &off, chunk)
					if w > 0 {
						chunk -= w
						sent += w
					}
					switch {
					case err == unix.EINTR:
						continue
					case err == unix.EAGAIN:
						return false // wait until writable, under the deadline
					case (err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) && sent == 0:
						werr = fmt.Errorf("%w: %s: %w", errNoSendfile, f.Name(), err)
						return true
					case err != nil:
						werr = os.NewSyscallError("sendfile", err)
						return true
					case w == 0:
						// The file ends before the section: it was cut under the response.
						// The frame's length is already out, so the connection must close.
						werr = fmt.Errorf("sendfile from %s at %d: %w", f.Name(), off, io.ErrUnexpectedEOF)
						return true
					}
				}
				return true
			})
			if werr == nil {
				werr = err
			}
		})
		if cerr != nil {
			return fmt.Errorf("sendfile from %s: %w", f.Name(), cerr)
		}
		if werr != nil {
			return werr
		}
		c.touch()
	}
	c.s.cfg.Metrics.BytesSendfile.Add(float64(n))
	return nil
}
