package protocol_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the wire protocol by hand, for the cases a real client never sends.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// frame encodes req with a request header at the request's version.
func frame(req kmsg.Request, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = kbin.AppendNullableString(b, strPtr("raw-test"))
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func strPtr(s string) *string { return &s }

func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	if _, err := rc.c.Write(frame(req, rc.corr)); err != nil {
		rc.t.Fatal(err)
	}
	return rc.corr
}

// readBody reads one response frame and returns its body after the correlation id.
func (rc *rawConn) readBody() (int32, []byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.c, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// roundTrip sends req and decodes its response at the request's version.
func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	corr := rc.send(req)
	got, body, err := rc.readBody()
	if err != nil {
		rc.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got != corr {
		rc.t.Fatalf("correlation %d, want %d", got, corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed asserts the broker closes the connection.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	if _, _, err := rc.readBody(); err == nil {
		rc.t.Fatal("connection still open, want it closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		rc.t.Fatal("connection not closed within 5s")
	}
}
