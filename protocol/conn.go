package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
)

// Request is one decoded client request.
type Request struct {
	Key         int16
	Version     int16
	Correlation int32
	ClientID    string
	Kreq        kmsg.Request
	Remote      net.Addr
	Received    time.Time
	// Principal is who the connection authenticated as when this request was handled, in
	// Kafka's form ("User:alice"); AnonymousPrincipal before or without authentication.
	Principal string

	// reserved is what the request holds of the broker's memory pool, and slot whether it
	// holds one of queued.max.requests: both are given back once it has been handled.
	reserved int64
	slot     bool
	// size is the request's length on the wire, and handlerTime the time its handler
	// took: what produce and request-time quotas charge.
	size        int32
	handlerTime time.Duration
	// Listener is the name of the listener the request arrived on.
	Listener string
	// rawSASL marks a SASL token sent without a Kafka header after SaslHandshake v0;
	// its answer goes back the same way (auth.go).
	rawSASL bool
	// conn is the connection the request came on (share sessions end with theirs).
	conn *conn

	// body is the request's bytes when they go back to the pool once the response is
	// written (bodypool.go), nil otherwise.
	body []byte
}

// AnonymousPrincipal is Kafka's principal for an unauthenticated connection.
const AnonymousPrincipal = "User:ANONYMOUS"

// Result is a handler's answer. Exactly one of Resp, Encoded or NoResponse applies;
// Wait, when set, is called in response order and its Result replaces this one, so a
// handler can finish its ordered work (appends) at once and wait (for replication, or a
// fetch's MinBytes) without holding up the requests behind it.
type Result struct {
	Resp kmsg.Response
	// Encoded is a response body already encoded (fetch responses pointing into the log);
	// Flexible says whether the response header needs its tag byte.
	Encoded  net.Buffers
	Flexible bool
	// Sections, when not nil, has one entry per Encoded buffer: where a buffer's bytes
	// also lie in a segment file, for sendfile on plaintext connections (sendfile.go).
	// Release keeps those files open, as it keeps the buffers mapped.
	Sections []shalelog.Section
	// Release is called once the response is written or dropped.
	Release func()
	// NoResponse: write nothing (Produce with acks=0).
	NoResponse bool
	// CloseConn closes the connection after this result (acks=0 produce that failed).
	CloseConn bool
	Wait      func(ctx context.Context) Result
}

type pending struct {
	req *Request
	res Result
}

type conn struct {
	s  *Server
	nc net.Conn
	lg *slog.Logger

	stopOnce sync.Once
	stopRead chan struct{}
	// deadlineMu orders stopReading's immediate deadline against the reader arming its
	// idle deadline, so that a stop is never overwritten by a later deadline.
	deadlineMu sync.Mutex
	stopped    bool

	// lastActive (unix nanoseconds) is when bytes last moved either way, and inFlight the
	// requests read but not yet answered: connections.max.idle.ms counts from the later
	// of the two.
	lastActive atomic.Int64
	inFlight   atomic.Int32
	// throttledUntil (unix nanoseconds) is when a quota throttle ends: until then the
	// connection reads no further request, as Kafka mutes a throttled channel.
	throttledUntil atomic.Int64

	// principal is owned by the processor goroutine: requests are handled one at a time
	// in order, so an authentication changes it for exactly the requests after it.
	principal string
	// ln is the listener the connection arrived on; auth its SASL state (auth.go).
	ln   *Listener
	auth authState
	// files sends fetch responses' record bytes with sendfile; nil on TLS connections,
	// wrapped ones, or with sendfile turned off.
	files *fileSender
	// software is what the client said it is in ApiVersions v3+ (KIP-511), for KIP-714's
	// client_software_name and client_software_version; nil before.
	software atomic.Pointer[clientSoftware]
}

type clientSoftware struct{ name, version string }

// peekClientSoftware keeps the ClientSoftwareName and ClientSoftwareVersion at the start
// of a too-new ApiVersions body (after the flexible header's tags), when they are there
// and well formed.
func (c *conn) peekClientSoftware(rd kbin.Reader, version int16) {
	if version < 3 {
		return
	}
	kmsg.SkipTags(&rd)
	name, ver := rd.CompactString(), rd.CompactString()
	if rd.Ok() && validClientSoftware(name, ver) {
		c.software.Store(&clientSoftware{name, ver})
	}
}

func newConn(s *Server, nc net.Conn, ln *Listener) *conn {
	if ln.TLS != nil {
		nc = tls.Server(nc, ln.TLS)
	}
	c := &conn{s: s, nc: nc, lg: s.lg.With("remote", nc.RemoteAddr().String()), stopRead: make(chan struct{}), principal: AnonymousPrincipal, ln: ln}
	if !s.cfg.DisableSendfile {
		c.files = newFileSender(nc)
	}
	c.touch()
	return c
}

func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// stopReading makes the connection take no new requests; those read already are answered.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		c.deadlineMu.Lock()
		defer c.deadlineMu.Unlock()
		c.stopped = true
		close(c.stopRead)
		// Unblock a read in progress; the writer keeps going.
		c.nc.SetReadDeadline(time.Now())
	})
}

// serve runs the connection: a reader decodes requests, a processor handles them in
// order, a writer sends responses in order. It returns when all three are done.
func (c *conn) serve(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if c.s.graceOver != nil {
		defer context.AfterFunc(c.s.graceOver, cancel)()
	}
	if !c.handshakeTLS(ctx) {
		c.nc.Close()
		return
	}
	reqs := make(chan *Request, c.s.cfg.MaxInFlight)
	resps := make(chan pending, c.s.cfg.MaxInFlight)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(resps)
		c.process(ctx, reqs, resps)
	}()
	go func() {
		defer wg.Done()
		c.write(ctx, resps)
		cancel()
		c.nc.Close() // a write failure ends the reader too
	}()
	err := c.read(ctx, reqs)
	if peerGone(err) {
		// Nobody will read the answers: end the waits (long polls, joins, acks=all)
		// now rather than when they time out.
		cancel()
	}
	close(reqs)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, context.Canceled) {
		c.lg.Debug("closing connection", "err", err)
	}
	wg.Wait()
	c.nc.Close()
	c.s.closeShareSessions(c)
}

// peerGone reports whether a read error means the client hung up or the socket
// failed, as opposed to a request Shale refused (whose earlier answers still go out).
func peerGone(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &opErr) && !opErr.Timeout()
}

func (c *conn) read(ctx context.Context, reqs chan<- *Request) error {
	err := c.readLoop(ctx, reqs)
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}

func (c *conn) readLoop(ctx context.Context, reqs chan<- *Request) error {
	br := bufio.NewReaderSize(idleReader{c}, readBufferSize)
	var sizeBuf [4]byte
	for {
		select {
		case <-c.stopRead:
			return nil
		default:
		}
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || size > c.s.cfg.MaxRequestBytes {
			c.s.cfg.Metrics.RejectedRequests.Inc()
			return fmt.Errorf("request of %d bytes is outside [8, socket.request.max.bytes=%d]", size, c.s.cfg.MaxRequestBytes)
		}
		if size > maxPreAuthRequestBytes && c.ln.sasl() && !c.auth.authenticated.Load() {
			c.s.cfg.Metrics.RejectedRequests.Inc()
			return fmt.Errorf("request of %d bytes before SASL authentication (at most %d)", size, maxPreAuthRequestBytes)
		}
		if err := c.waitThrottle(ctx); err != nil {
			return err
		}
		body, err := c.readBody(ctx, br, size)
		if err != nil {
			return err
		}
		req, err := c.decodeOrRawSASL(body)
		if err != nil {
			c.s.pool.release(int64(size))
			c.s.cfg.Metrics.RejectedRequests.Inc()
			return err
		}
		req.reserved, req.size = int64(size), size+4
		if recyclable(req.Key) {
			req.body = body
		}
		c.s.cfg.Metrics.BytesIn.Add(float64(size + 4))
		// A full broker-wide queue mutes this connection until a request is handled.
		if err := c.s.slots.acquire(ctx, c.stopRead); err != nil {
			c.s.pool.release(req.reserved)
			return err
		}
		req.slot = true
		c.inFlight.Add(1)
		select {
		case reqs <- req:
		case <-ctx.Done():
			c.releaseRequest(req)
			return ctx.Err()
		}
	}
}

// readBufferSize is each connection's socket read buffer, which is all that a client
// that sends nothing (or only a size prefix) makes the broker hold.
const readBufferSize = 16 << 10

// firstBodyChunk is the buffer a request body starts in; it doubles as bytes arrive,
// so a size prefix alone allocates nothing and a slow body no more than twice what came.
const firstBodyChunk = 64 << 10

// readBody reads a request body of size bytes. It reserves the bytes from the broker's
// pool only once the body starts to arrive, so a connection stalled after its size
// prefix holds none of the pool, and it allocates the buffer as the bytes arrive.
func (c *conn) readBody(ctx context.Context, br *bufio.Reader, size int32) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, fmt.Errorf("read request body: %w", unexpectedEOF(err))
	}
	if err := c.s.pool.reserve(ctx, c.stopRead, int64(size)); err != nil {
		return nil, err
	}
	head, err := br.Peek(2) // the API key: only Produce bodies are pooled
	if err != nil {
		c.s.pool.release(int64(size))
		return nil, fmt.Errorf("read request body: %w", unexpectedEOF(err))
	}
	pooled := recyclable(int16(binary.BigEndian.Uint16(head)))
	if pooled {
		if buf := getBody(int(size)); buf != nil {
			// A recycled buffer is already paid for: reading straight into it allocates nothing.
			if _, err := io.ReadFull(br, buf); err != nil {
				c.s.pool.release(int64(size))
				putBody(buf)
				return nil, fmt.Errorf("read request body: %w", unexpectedEOF(err))
			}
			return buf, nil
		}
	}
	// A body the pool takes ends in a buffer of its class size, so that it can be reused
	// for any body of that class (bodypool.go).
	full := int(size)
	if pooled {
		full = bodyCap(full)
	}
	buf := make([]byte, 0, min(full, firstBodyChunk))
	for len(buf) < int(size) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(full, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		// Never past the body: what follows is the next request's.
		n, err := br.Read(buf[len(buf):min(cap(buf), int(size))])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < int(size) {
			c.s.pool.release(int64(size))
			return nil, fmt.Errorf("read request body: %w", unexpectedEOF(err))
		}
	}
	return buf, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// releaseRequest gives back what a handled (or dropped) request held of the broker's
// limits. Like Kafka, it is called once the handler has returned, not when the response
// is written: a produce waiting for replication must not keep followers' fetches out.
func (c *conn) releaseRequest(req *Request) {
	c.s.pool.release(req.reserved)
	req.reserved = 0
	if req.slot {
		req.slot = false
		c.s.slots.release()
	}
}

// throttle mutes the connection for d from now (or longer, if already throttled).
func (c *conn) throttle(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.throttledUntil.Load()
		if cur >= until || c.throttledUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitThrottle waits out a quota throttle before the reader takes the next request's
// body, so a throttled client's requests stay in its socket.
func (c *conn) waitThrottle(ctx context.Context) error {
	d := time.Until(time.Unix(0, c.throttledUntil.Load()))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		c.touch() // a muted connection is not idle
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stopRead:
		return errStopped
	}
}

// errStopped ends a read the broker stopped (shutdown), as opposed to one that failed.
var errStopped = errors.New("connection stopped reading")

// errIdle closes a connection idle for connections.max.idle.ms.
var errIdle = errors.New("connection idle for connections.max.idle.ms")

// idleReader reads from the connection under connections.max.idle.ms: a read that waits
// that long after the last traffic, with no request of the connection in flight, closes
// it, so that a client that stopped talking releases what it holds.
type idleReader struct{ c *conn }

func (r idleReader) Read(p []byte) (int, error) {
	c := r.c
	idle := c.s.cfg.ConnectionsMaxIdle
	for {
		c.deadlineMu.Lock()
		if c.stopped {
			c.deadlineMu.Unlock()
			return 0, errStopped
		}
		if idle > 0 {
			last := time.Unix(0, c.lastActive.Load())
			if c.inFlight.Load() > 0 {
				last = time.Now()
			}
			c.nc.SetReadDeadline(last.Add(idle))
		}
		c.deadlineMu.Unlock()
		n, err := c.nc.Read(p)
		if n > 0 {
			c.touch()
		}
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() {
			c.deadlineMu.Lock()
			stopped := c.stopped
			c.deadlineMu.Unlock()
			if stopped {
				return 0, errStopped
			}
			if idle > 0 && (c.inFlight.Load() > 0 || time.Since(time.Unix(0, c.lastActive.Load())) < idle) {
				continue // traffic or work since the deadline was armed
			}
			return 0, errIdle
		}
		return n, err
	}
}

// decode parses the request header and body. An unknown key, an undecodable body or a
// version kmsg cannot parse is an error that closes the connection, as in Kafka; a
// known key at a version Shale does not serve is decoded far enough to answer with
// UNSUPPORTED_VERSION.
func (c *conn) decode(body []byte) (*Request, error) {
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("malformed request header: %w", err)
	}
	req := &Request{Key: key, Version: version, Correlation: corr, Remote: c.nc.RemoteAddr(), Received: time.Now(), Listener: c.ln.name(), conn: c}
	if clientID != nil {
		req.ClientID = *clientID
	}
	kreq := kmsg.RequestForKey(key)
	if kreq == nil {
		return nil, fmt.Errorf("%w %d (correlation %d)", errUnknownKey, key, corr)
	}
	req.Kreq = kreq
	if key == kmsg.ApiVersions.Int16() && version > kreq.MaxVersion() {
		// KIP-511: a too-new ApiVersions is answered at v0; its body is not parsed,
		// except for the client software fields every version from v3 begins with,
		// which KIP-714's client matching needs (franz-go asks at v5 and never again).
		c.peekClientSoftware(rd, version)
		return req, nil
	}
	if version < 0 || version > kreq.MaxVersion() {
		return nil, fmt.Errorf("%s version %d cannot be parsed (correlation %d)", describeKey(key), version, corr)
	}
	kreq.SetVersion(version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("malformed %s v%d header tags: %w", describeKey(key), version, err)
	}
	if err := kreq.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("malformed %s v%d request: %w", describeKey(key), version, err)
	}
	return req, nil
}

func (c *conn) process(ctx context.Context, reqs <-chan *Request, resps chan<- pending) {
	for req := range reqs {
		start := time.Now()
		res := c.dispatch(ctx, req)
		req.handlerTime = time.Since(start)
		c.releaseRequest(req)
		select {
		case resps <- pending{req: req, res: res}:
		case <-ctx.Done():
			c.inFlight.Add(-1)
			if res.Release != nil {
				res.Release()
			}
		}
	}
}

func (c *conn) dispatch(ctx context.Context, req *Request) (res Result) {
	req.Principal = c.principal
	if h := c.s.cfg.principalHook; h != nil {
		if p := h(req); p != "" {
			req.Principal = p
		}
	}
	m := c.s.cfg.Metrics
	m.Requests.WithLabelValues(describeKey(req.Key)).Inc()
	defer func() {
		if p := recover(); p != nil {
			c.lg.Error("handler panicked", "api", describeKey(req.Key), "version", req.Version, "panic", p, "stack", string(debug.Stack()))
			m.HandlerPanics.Inc()
			res = Result{NoResponse: true, CloseConn: true}
			if resp := errorResponse(req.Kreq, codeUnknownServerError); resp != nil {
				res = Result{Resp: resp}
			}
		}
	}()
	ctx, gated, stop := c.gate(ctx, req)
	if stop {
		return gated
	}
	if req.Key == kmsg.ApiVersions.Int16() {
		return c.s.handleApiVersions(ctx, req)
	}
	h, ok := c.s.handlers[req.Key]
	if !ok || req.Version < h.min || req.Version > h.max {
		if resp := errorResponse(req.Kreq, codeUnsupportedVersion); resp != nil {
			return Result{Resp: resp}
		}
		c.lg.Debug("closing connection on an API Shale does not serve", "api", describeKey(req.Key), "version", req.Version)
		return Result{NoResponse: true, CloseConn: true}
	}
	return h.fn(ctx, req)
}

func (c *conn) write(ctx context.Context, resps <-chan pending) {
	bw := bufio.NewWriterSize(deadlineWriter{c}, 64<<10)
	var hdr []byte
	failed := false
	m := c.s.cfg.Metrics
	for p := range resps {
		res := p.res
		for res.Wait != nil && !failed {
			wait := res.Wait
			res = wait(ctx)
		}
		c.inFlight.Add(-1)
		if t := c.chargeQuotas(p.req, &res, p.req.handlerTime); t > 0 {
			c.throttle(t)
			m.Throttles.Inc()
			m.ThrottleSeconds.Add(t.Seconds())
		}
		if failed {
			if res.Release != nil {
				res.Release()
			}
			continue
		}
		if !res.NoResponse {
			if err := c.writeOne(bw, &hdr, p.req, res); err != nil {
				c.lg.Debug("write failed", "err", err)
				failed = true
			} else if len(resps) == 0 {
				// Nothing queued behind this response: send now rather than wait to
				// fill the buffer.
				if err := bw.Flush(); err != nil {
					c.lg.Debug("write failed", "err", err)
					failed = true
				}
			}
		}
		if res.Release != nil {
			res.Release()
		}
		if p.req.body != nil {
			// Written (or dropped): nothing refers to the request's bytes any more.
			putBody(p.req.body)
			p.req.body = nil
		}
		m.Latency.WithLabelValues(describeKey(p.req.Key)).Observe(time.Since(p.req.Received).Seconds())
		if res.CloseConn {
			bw.Flush()
			failed = true
			c.nc.Close()
		}
		if failed {
			// A client that takes no bytes must not keep what it pinned (fetch views of
			// segments, queued responses) or keep sending requests.
			c.nc.Close()
		}
	}
	if !failed {
		bw.Flush()
	}
}

// writeChunk is the most written to the socket under one write deadline, so that the
// deadline bounds a stall rather than the time a large response takes.
const writeChunk = 1 << 20

// deadlineWriter writes to the connection under the write deadline
// (connections.max.idle.ms): a client that accepts no bytes for that long is gone.
type deadlineWriter struct{ c *conn }

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.c.armWrite()
	n, err := w.c.nc.Write(p)
	if n > 0 {
		w.c.touch()
	}
	return n, err
}

func (c *conn) armWrite() {
	if d := c.s.cfg.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}
}

// nextChunk splits off the leading buffers of bufs that together stay within writeChunk
// (at least one), so that each system call runs under a deadline of its own.
func nextChunk(bufs net.Buffers) (chunk, rest net.Buffers, total int) {
	n := 0
	for n < len(bufs) && (n == 0 || total+len(bufs[n]) <= writeChunk) {
		total += len(bufs[n])
		n++
	}
	return bufs[:n:n], bufs[n:], total
}

// writeBuffers writes bufs with writev, a chunk at a time, each under a fresh deadline.
func (c *conn) writeBuffers(bufs net.Buffers) error {
	for len(bufs) > 0 {
		var chunk net.Buffers
		chunk, bufs, _ = nextChunk(bufs)
		c.armWrite()
		if _, err := chunk.WriteTo(c.nc); err != nil {
			return err
		}
		c.touch()
	}
	return nil
}

// writeOne frames one response: size, correlation id, header tags (flexible responses
// other than ApiVersions, whose header is always v0), body.
func (c *conn) writeOne(bw *bufio.Writer, hdr *[]byte, req *Request, res Result) error {
	if req.rawSASL {
		return writeRawSASL(bw, res)
	}
	var body []byte
	var bodyLen int
	flexible := res.Flexible
	if res.Resp != nil {
		body = res.Resp.AppendTo(nil)
		bodyLen = len(body)
		flexible = res.Resp.IsFlexible()
	} else {
		for _, b := range res.Encoded {
			bodyLen += len(b)
		}
	}
	h := (*hdr)[:0]
	h = append(h, 0, 0, 0, 0)
	h = binary.BigEndian.AppendUint32(h, uint32(req.Correlation))
	if flexible && req.Key != kmsg.ApiVersions.Int16() {
		h = append(h, 0)
	}
	binary.BigEndian.PutUint32(h, uint32(len(h)-4+bodyLen))
	*hdr = h
	c.s.cfg.Metrics.BytesOut.Add(float64(len(h) + bodyLen))
	if res.Resp == nil && len(h)+bodyLen > bw.Available() {
		// Large chunks (record batches in the log) go straight to the socket, with the
		// frame header in the same system call, rather than through the buffer: with
		// sendfile from the segment files where the connection can, else with writev
		// from their mappings.
		if bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		bufs := make(net.Buffers, 0, 1+len(res.Encoded))
		bufs = append(append(bufs, h), res.Encoded...)
		if c.files != nil && res.Sections != nil {
			secs := make([]shalelog.Section, 0, len(bufs))
			secs = append(append(secs, shalelog.Section{}), res.Sections...)
			return c.writeSections(bufs, secs)
		}
		return c.writeBuffers(bufs)
	}
	if _, err := bw.Write(h); err != nil {
		return err
	}
	if res.Resp != nil {
		_, err := bw.Write(body)
		return err
	}
	for _, b := range res.Encoded {
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return nil
}
