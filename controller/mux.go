package controller

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// One port per controller carries both Raft and gRPC. Every Raft connection is opened by
// raftStreamLayer.Dial, which writes raftStreamTag before anything else; every gRPC
// connection starts with the HTTP/2 client preface ("PRI * HTTP/2.0...", first byte 'P').
// The mux reads the first byte of each accepted connection and hands it to the Raft
// transport or to the gRPC server, replaying the byte for gRPC. A single byte cannot be
// mistaken: the preface never starts with 0x01, and anything else goes to gRPC, which
// rejects what is not HTTP/2.
//
// A Kafka client given the controller's address by mistake sends a request whose 4-byte
// big-endian size starts with 0x00 (any request under 16 MiB, and a client's first
// request is a small ApiVersions or Metadata). gRPC would drop it and the client retry
// until its timeout with no hint of why; the mux hands it to the co-located broker
// instead (Server.KafkaListener), whose Metadata answer moves the client to the broker
// listener, or closes it at once and logs where the brokers listen.
const (
	raftStreamTag  byte = 0x01
	kafkaFirstByte byte = 0x00
)

// kafkaHintEvery bounds how often a client retrying against the controller port is
// logged.
const kafkaHintEvery = 10 * time.Second

// classifyTimeout bounds how long a new connection may take to send its first byte, so
// that idle sockets do not pile up in the mux.
const classifyTimeout = 10 * time.Second

// connMux accepts on the controller port and routes each connection by its first byte.
type connMux struct {
	ln   net.Listener
	log  *slog.Logger
	raft *subListener
	grpc *subListener
	// kafka, when set, receives Kafka clients' connections; kafkaHint says where the
	// brokers listen, for the log line.
	kafka     *subListener
	kafkaHint func() string
	// grpcTLS, when set, makes gRPC TLS-only: a connection whose first byte opens a TLS
	// handshake goes to gRPC through TLS, and a plaintext HTTP/2 one is closed.
	grpcTLS       *tls.Config
	kafkaLoggedAt atomic.Int64 // unix nanoseconds

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	// raftConns are the inbound Raft connections: hashicorp/raft's transport does not
	// close them when it shuts down, so the mux does.
	connMu    sync.Mutex
	raftConns map[*trackedConn]struct{}
}

func newConnMux(ln net.Listener, advertise net.Addr, log *slog.Logger) *connMux {
	m := &connMux{ln: ln, log: log, done: make(chan struct{}), raftConns: map[*trackedConn]struct{}{}}
	m.raft = newSubListener(m, advertise)
	m.grpc = newSubListener(m, ln.Addr())
	return m
}

func (m *connMux) start() {
	m.wg.Add(1)
	go m.acceptLoop()
}

func (m *connMux) acceptLoop() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("controller listener accept failed", "err", err)
			select {
			case <-time.After(backoff):
			case <-m.done:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		m.wg.Add(1)
		go m.classify(c)
	}
}

func (m *connMux) classify(c net.Conn) {
	defer m.wg.Done()
	var first [1]byte
	_ = c.SetReadDeadline(time.Now().Add(classifyTimeout))
	if _, err := c.Read(first[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if first[0] == raftStreamTag {
		tc := &trackedConn{Conn: c, mux: m}
		m.connMu.Lock()
		select {
		case <-m.done:
			m.connMu.Unlock()
			c.Close()
			return
		default:
		}
		m.raftConns[tc] = struct{}{}
		m.connMu.Unlock()
		m.raft.deliver(tc)
		return
	}
	if first[0] == kafkaFirstByte {
		m.kafkaClient(&prefixConn{Conn: c, prefix: first[:]})
		return
	}
	if m.grpcTLS != nil {
		if first[0] != tlsHandshakeByte {
			m.log.Debug("closing a plaintext connection to the TLS controller listener", "remote", c.RemoteAddr().String())
			c.Close()
			return
		}
		m.grpc.deliver(tls.Server(&prefixConn{Conn: c, prefix: first[:]}, m.grpcTLS))
		return
	}
	m.grpc.deliver(&prefixConn{Conn: c, prefix: first[:]})
}

// tlsHandshakeByte opens every TLS connection (a handshake record).
const tlsHandshakeByte byte = 0x16

// kafkaClient serves or closes a Kafka client's connection, with a log line (at most
// one per kafkaHintEvery) naming the listeners it should use.
func (m *connMux) kafkaClient(c net.Conn) {
	now := time.Now().UnixNano()
	last := m.kafkaLoggedAt.Load()
	logIt := now-last >= int64(kafkaHintEvery) && m.kafkaLoggedAt.CompareAndSwap(last, now)
	hint := "none registered yet"
	if logIt && m.kafkaHint != nil {
		if h := m.kafkaHint(); h != "" {
			hint = h
		}
	}
	if m.kafka != nil {
		if logIt {
			m.log.Info("a Kafka client connected to the controller listener; this node's broker answers it, but point it at a broker listener",
				"remote", c.RemoteAddr().String(), "broker_listeners", hint)
		}
		m.kafka.deliver(c)
		return
	}
	if logIt {
		m.log.Warn("a Kafka client connected to the controller listener, which serves only controllers and brokers; closed it: point it at a broker listener",
			"remote", c.RemoteAddr().String(), "broker_listeners", hint)
	}
	c.Close()
}

// close stops accepting and closes the sub-listeners; connections already handed out
// belong to Raft, gRPC and the broker, which close them themselves.
func (m *connMux) close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.raft.Close()
		m.grpc.Close()
		if m.kafka != nil {
			m.kafka.Close()
		}
	})
	m.wg.Wait()
	m.connMu.Lock()
	for c := range m.raftConns {
		c.Conn.Close()
		delete(m.raftConns, c)
	}
	m.connMu.Unlock()
	return err
}

// trackedConn forgets itself in the mux when closed.
type trackedConn struct {
	net.Conn
	mux  *connMux
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.mux.connMu.Lock()
		delete(c.mux.raftConns, c)
		c.mux.connMu.Unlock()
	})
	return c.Conn.Close()
}

// subListener is the net.Listener the Raft transport or the gRPC server accepts from.
type subListener struct {
	mux       *connMux
	addr      net.Addr
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newSubListener(m *connMux, addr net.Addr) *subListener {
	return &subListener{mux: m, addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *subListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	case <-l.mux.done:
		c.Close()
	}
}

func (l *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.mux.done:
		return nil, net.ErrClosed
	}
}

func (l *subListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *subListener) Addr() net.Addr { return l.addr }

// prefixConn replays bytes the mux already read.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// raftStreamLayer is the hashicorp/raft StreamLayer over the shared port.
type raftStreamLayer struct {
	*subListener
}

var _ raft.StreamLayer = raftStreamLayer{}

func (s raftStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{raftStreamTag}); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft dial %s: %w", address, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// staticAddr is the address this controller advertises to its peers.
type staticAddr string

func (a staticAddr) Network() string { return "tcp" }
func (a staticAddr) String() string  { return string(a) }
