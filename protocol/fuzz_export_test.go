package protocol

import (
	"context"
	"net"
	"time"
)

// DispatchRaw runs one request body (header and payload, without the size prefix)
// through what a connection of s does with it: header and kmsg decoding, dispatch to
// its handler, and response encoding. FuzzRequest drives it on a broker built as the
// node builds it, which an in-package test cannot import.
func DispatchRaw(s *Server, body []byte) {
	c := &conn{s: s, nc: fakeConn{}, lg: s.lg, stopRead: make(chan struct{})}
	req, err := c.decode(body)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res := c.dispatch(ctx, req)
	for res.Wait != nil {
		res = res.Wait(ctx)
	}
	if res.Resp != nil {
		res.Resp.AppendTo(nil)
	}
	if res.Release != nil {
		res.Release()
	}
}

// fakeConn is only asked for its address.
type fakeConn struct{ net.Conn }

func (fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
