package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Limit is one of this machine's limits, measured without Kafka in the way,
// for the benchmark figures to be set against.
type Limit struct {
	// Name is loopback-tcp, disk-pagecache or disk-fsync.
	Name string `json:"name"`
	// MessageSize and Streams describe a loopback probe; BlockSize and Dir
	// a disk probe.
	MessageSize   int     `json:"message_size,omitempty"`
	Streams       int     `json:"streams,omitempty"`
	BlockSize     int     `json:"block_size,omitempty"`
	Dir           string  `json:"dir,omitempty"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	MBPerSec      float64 `json:"mb_per_sec"`
	RecordsPerSec float64 `json:"records_per_sec,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// Label names the limit with its parameters.
func (l Limit) Label() string {
	switch l.Name {
	case limitLoopback:
		return fmt.Sprintf("%s %s x%d", l.Name, formatBytes(int64(l.MessageSize)), l.Streams)
	default:
		return fmt.Sprintf("%s %s blocks", l.Name, formatBytes(int64(l.BlockSize)))
	}
}

const (
	limitLoopback  = "loopback-tcp"
	limitPageCache = "disk-pagecache"
	limitFsync     = "disk-fsync"
)

// pumpBufferSize is the loopback pump's write and read buffer: the size of
// a full produce request with franz-go's default batch, so the pump makes
// about as many system calls per byte as a batching Kafka client.
const pumpBufferSize = 1 << 20

// ProbeLoopback pumps length-prefixed messages of msgSize bytes over
// streams loopback TCP connections for d, and returns the payload
// throughput. Each receiver parses every message and copies it out, as a
// broker must at least do.
func ProbeLoopback(ctx context.Context, msgSize, streams int, d time.Duration) (Limit, error) {
	l := Limit{Name: limitLoopback, MessageSize: msgSize, Streams: streams}
	if msgSize < 1 || streams < 1 || d <= 0 {
		return l, fmt.Errorf("loopback probe: bad parameters size=%d streams=%d duration=%v", msgSize, streams, d)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return l, fmt.Errorf("loopback probe: %w", err)
	}
	defer ln.Close()

	var received, messages atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*streams)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Receivers.
	accepted := make(chan net.Conn, streams)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range streams {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			accepted <- c
		}
	}()
	conns := make([]net.Conn, 0, 2*streams)
	var connMu sync.Mutex
	track := func(c net.Conn) {
		connMu.Lock()
		conns = append(conns, c)
		connMu.Unlock()
	}
	defer func() {
		connMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connMu.Unlock()
	}()
	var readers sync.WaitGroup
	for range streams {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var c net.Conn
			select {
			case c = <-accepted:
			case <-ctx.Done():
				return
			}
			track(c)
			r := bufio.NewReaderSize(c, pumpBufferSize)
			var hdr [4]byte
			buf := make([]byte, msgSize)
			for {
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					if !errors.Is(err, io.EOF) && ctx.Err() == nil {
						errs <- err
					}
					return
				}
				n := binary.BigEndian.Uint32(hdr[:])
				if int(n) != msgSize {
					errs <- fmt.Errorf("loopback probe: framing lost (message of %d bytes)", n)
					return
				}
				if _, err := io.ReadFull(r, buf); err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				received.Add(int64(msgSize))
				messages.Add(1)
			}
		}()
	}

	// Senders. The clock starts once every connection is up.
	senders := make([]net.Conn, streams)
	for i := range senders {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return l, fmt.Errorf("loopback probe: %w", err)
		}
		track(c)
		senders[i] = c
	}
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := bufio.NewWriterSize(c, pumpBufferSize)
			msg := make([]byte, 4+msgSize)
			binary.BigEndian.PutUint32(msg, uint32(msgSize))
			for j := range msg[4:] {
				msg[4+j] = byte('A' + (i+j)%26)
			}
			for n := 1; ; n++ {
				if n%256 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
					break
				}
				if _, err := w.Write(msg); err != nil {
					errs <- err
					return
				}
			}
			if err := w.Flush(); err != nil {
				errs <- err
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}()
	}
	wg.Wait()
	readers.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return l, fmt.Errorf("loopback probe: %w", err)
	}
	l.Bytes = received.Load()
	if l.Bytes == 0 {
		return l, errors.New("loopback probe: no data arrived")
	}
	l.Seconds = elapsed.Seconds()
	l.MBPerSec = float64(l.Bytes) / l.Seconds / 1e6
	l.RecordsPerSec = float64(messages.Load()) / l.Seconds
	return l, nil
}

// diskProbeMaxBytes caps what a disk probe writes, so a fast disk does not
// fill the page cache or the file system.
const diskProbeMaxBytes = 2 << 30

// ProbeDisk writes blockSize blocks sequentially to a new file in dir for d
// (or diskProbeMaxBytes) and returns the throughput: into the page cache,
// or with fsync after every block.
func ProbeDisk(ctx context.Context, dir string, blockSize int, fsync bool, d time.Duration) (Limit, error) {
	name := limitPageCache
	if fsync {
		name = limitFsync
	}
	l := Limit{Name: name, BlockSize: blockSize, Dir: dir}
	if blockSize < 1 || d <= 0 {
		return l, fmt.Errorf("disk probe: bad parameters block=%d duration=%v", blockSize, d)
	}
	f, err := os.CreateTemp(dir, "shale-bench-disk-*")
	if err != nil {
		return l, fmt.Errorf("disk probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, blockSize)
	for i := range block {
		block[i] = byte('A' + i%26)
	}
	start := time.Now()
	deadline := start.Add(d)
	var written int64
	for written == 0 || (written+int64(blockSize) <= diskProbeMaxBytes && time.Now().Before(deadline) && ctx.Err() == nil) {
		if _, err := f.Write(block); err != nil {
			return l, fmt.Errorf("disk probe: write %s: %w", f.Name(), err)
		}
		if fsync {
			if err := f.Sync(); err != nil {
				return l, fmt.Errorf("disk probe: fsync %s: %w", f.Name(), err)
			}
		}
		written += int64(blockSize)
	}
	elapsed := time.Since(start)
	l.Bytes = written
	l.Seconds = elapsed.Seconds()
	l.MBPerSec = float64(written) / l.Seconds / 1e6
	return l, ctx.Err()
}
