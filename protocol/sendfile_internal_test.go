package protocol

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// sendfileTestLog is a log of small segments filled with batches of random values,
// closed and opened again.
func sendfileTestLog(t *testing.T, cfg shalelog.Config, batches, valueBytes int) *shalelog.Log {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	l, err := shalelog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range batches {
		v := make([]byte, valueBytes)
		rand.Read(v)
		now := time.Now().UnixMilli()
		b, err := records.Build(shalelog.Header{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			0, []records.Record{{Value: v}, {OffsetDelta: 1, Key: []byte{byte(i)}, Value: v[:valueBytes/2]}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Reopened, every segment is sealed and durable, and is mapped on its first read:
	// the case where a segment used to close its descriptor once loaded.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = shalelog.Open(dir, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// testConnPair is a loopback TCP connection with small socket buffers, so that a
// response of a few hundred KiB cannot be written before the peer reads it.
func testConnPair(t *testing.T) (server *net.TCPConn, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server, client = sv.(*net.TCPConn), cl.(*net.TCPConn)
	server.SetWriteBuffer(16 << 10)
	client.SetReadBuffer(16 << 10)
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func testWriterConn(nc net.Conn, sendfile bool) *conn {
	s := &Server{cfg: Config{Metrics: NewMetrics(nil), WriteTimeout: 30 * time.Second}}
	c := &conn{s: s, nc: nc, lg: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if sendfile {
		c.files = newFileSender(nc)
	}
	return c
}

// A response whose record bytes lie in segments that retention and DeleteRecords delete
// (files unlinked, segments gone from the log) while the response is still being
// written goes out whole and unchanged: its View pins the segments, and with them the
// descriptors sendfile reads from.
func TestSendfileSegmentDeletedWhileWriting(t *testing.T) {
	l := sendfileTestLog(t, shalelog.Config{SegmentBytes: 64 << 10, RetentionBytes: 1, RetentionMs: -1}, 64, 6000)
	if n := l.NumSegments(); n < 4 {
		t.Fatalf("%d segments, want several", n)
	}
	v, err := l.Read(0, 64<<20, l.EndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if len(v.Sections) != len(v.Chunks) || len(v.Chunks) < 4 {
		t.Fatalf("%d chunks and %d sections, want one section per chunk over several segments", len(v.Chunks), len(v.Sections))
	}
	for i, s := range v.Sections {
		if s.File == nil {
			t.Fatalf("section %d names no file", i)
		}
	}
	head := []byte("response header")
	bufs := append(net.Buffers{head}, v.Chunks...)
	secs := append([]shalelog.Section{{}}, v.Sections...)
	want := bytes.Join(bufs, nil)

	server, client := testConnPair(t)
	c := testWriterConn(server, true)
	done := make(chan error, 1)
	go func() { done <- c.writeSections(slices.Clone(bufs), secs) }()

	// The small socket buffers hold a few KiB of a response of hundreds: the writer is
	// still at it while everything it sends from is deleted.
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRecordsBefore(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the response was written before the peer read it (err %v)", err)
	default:
	}
	// The log renames deleted segments at once and unlinks them in its background, which
	// does not wait for readers: wait for the unlink, still before the peer reads.
	for i, sec := range v.Sections {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("section %d's file %s unlinked", i, sec.File.Name()), func() bool {
			st, err := sec.File.Stat()
			if err != nil {
				t.Fatal(err)
			}
			return st.Sys().(*syscall.Stat_t).Nlink == 0
		})
	}

	got := make([]byte, len(want))
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes sent differ from the View's")
	}
}

// Where sendfile cannot be used the response goes out from memory, the same bytes: a
// connection that is not a plain *net.TCPConn (TLS, or a listener's wrapper) has no file
// sender, and a file the kernel refuses to sendfile from (here a directory, EINVAL; a file
// system without splice support alike) is written from its buffer, and so is every
// later section of that connection.
func TestSendfileFallbacks(t *testing.T) {
	server, client := testConnPair(t)
	if newFileSender(struct{ net.Conn }{server}) != nil {
		t.Fatal("a wrapped connection got a file sender")
	}
	if newFileSender(tls.Server(server, &tls.Config{})) != nil {
		t.Fatal("a TLS connection got a file sender")
	}

	// A directory has no splice_read: sendfile from it is EINVAL.
	pr, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	chunk := bytes.Repeat([]byte("records "), 1000)
	bufs := net.Buffers{[]byte("header"), chunk, []byte("middle"), chunk, []byte("end")}
	secs := []shalelog.Section{{}, {File: pr}, {}, {File: pr, Offset: 7}, {}}
	want := bytes.Join(bufs, nil)
	c := testWriterConn(server, true)
	done := make(chan error, 1)
	go func() { done <- c.writeSections(slices.Clone(bufs), secs) }()
	got := make([]byte, len(want))
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the fallback sent other bytes")
	}
	if !c.files.refused {
		t.Fatal("the connection did not note the refusal")
	}
}
