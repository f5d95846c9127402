package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/coordinator/txn/producerid"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
	"github.com/shalelog/shale/protocol/telemetry"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/replication/share"
	"github.com/shalelog/shale/security/acl"
)

// Config configures the Kafka listener.
type Config struct {
	NodeID int32
	// TransactionVersion is the transaction.version feature level finalized in
	// ApiVersions (0-2). At 2 the broker serves transactions v2 (KIP-890 part 2: Produce
	// v12, EndTxn v5 and AddPartitionsToTxn v5), which clients such as franz-go and the
	// Java client use when the finalized level is 2; below 2 those versions are not
	// advertised and transactions work as before. Zero is level 0.
	TransactionVersion int16
	// MaxRequestBytes is socket.request.max.bytes: larger requests close the connection
	// before any allocation. Default 100 MiB.
	MaxRequestBytes int32
	// MaxInFlight bounds the requests read ahead on one connection while earlier ones are
	// still being answered. Default 64.
	MaxInFlight int
	// QueuedMaxRequests is queued.max.requests: requests read but not yet handled across
	// the broker; a reader that would exceed it waits (its connection is muted). Default 500.
	QueuedMaxRequests int
	// QueuedMaxRequestBytes is queued.max.request.bytes: request bytes held across the
	// broker; a connection reserves a request's size before reading its body and is muted
	// while the pool is exhausted. Kafka's default is -1 (no limit); Shale's is
	// DefaultQueuedMaxRequestBytes. -1 means no limit.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection with nothing in flight
	// that moves no bytes for this long is closed. Default 10 minutes; negative disables.
	ConnectionsMaxIdle time.Duration
	// DisableSendfile makes plaintext connections write fetch responses' record bytes
	// from the segments' mappings with writev instead of sending them from the segment
	// files with sendfile (fetch.sendfile.enable=false, Shale). TLS connections always
	// write from the mappings.
	DisableSendfile bool
	// WriteTimeout closes a connection whose client accepts no response bytes for this
	// long, releasing what its responses pin. Default ConnectionsMaxIdle.
	WriteTimeout time.Duration
	// QuotaWindowNum and QuotaWindowSize are quota.window.num (default 11) and
	// quota.window.size.seconds (default 1s): client quotas measure rates over that many
	// samples of that length.
	QuotaWindowNum  int
	QuotaWindowSize time.Duration
	// MaxConnections is max.connections: past it the broker stops accepting until a
	// connection closes, as Kafka's acceptor does. 0 or less: no limit.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip, and MaxConnectionsPerIPOverrides
	// (max.connections.per.ip.overrides) its exceptions by address: a connection past
	// its address's limit is closed at once. 0 or less: no limit.
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[string]int
	// AutoCreateTopics is auto.create.topics.enable (default true in Kafka).
	AutoCreateTopics bool
	// DeleteTopicEnable is delete.topic.enable (default true).
	DeleteTopicEnable bool
	// DefaultPartitions and DefaultReplicationFactor are num.partitions and
	// default.replication.factor, used by Metadata's auto-creation.
	DefaultPartitions        int32
	DefaultReplicationFactor int16
	// TopicDefaults are the broker-level overrides of topic config defaults.
	TopicDefaults topicconfig.BrokerDefaults
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots (default 1000; -1
	// keeps no fetch sessions).
	FetchSessionSlots int
	// BrokerConfigs is what DescribeConfigs reports for this broker (name -> value).
	BrokerConfigs map[string]string
	// Authorizer checks every request against the image's ACLs (authorizer.class.name,
	// super.users, allow.everyone.if.no.acl.found); nil allows everything.
	Authorizer *acl.Authorizer
	// Auth is how SSL and SASL listeners authenticate clients (auth.go).
	Auth    AuthConfig
	Logger  *slog.Logger
	Metrics *Metrics
	// Telemetry, when set, is the broker's KIP-714 client telemetry, which exports what
	// clients push on the broker's /metrics; without it GetTelemetrySubscriptions and
	// PushTelemetry are not advertised.
	Telemetry *telemetry.Manager

	// principalHook, set only by tests (export_test.go), stands in for authentication:
	// a request's principal is what it names, unless it names none.
	principalHook func(*Request) string
}

// DefaultQueuedMaxRequestBytes is Shale's queued.max.request.bytes: Kafka leaves the
// pool unbounded (-1), which lets many clients each send a large request at once and
// exhaust the heap. 256 MiB holds two full-size requests (socket.request.max.bytes)
// or hundreds of ordinary produce batches; request buffers then stay below this plus one
// request.
const DefaultQueuedMaxRequestBytes = 256 << 20

// Deps are the broker services handlers use.
type Deps struct {
	Meta metadata.Store
	// Replicas is the replica manager: the only way to this broker's partitions.
	// Handlers answer metadata questions from the image it has applied, so that a client
	// is never told of a leader that does not yet take requests.
	Replicas *replication.Manager
	// ProducerIDs hands out idempotent producer ids.
	ProducerIDs *producerid.Allocator
	// Groups, when set, is the consumer-group coordinator; without it the group APIs are
	// not advertised.
	Groups *group.Coordinator
	// ShareGroups, when set with Groups, is the share-group coordinator (KIP-932);
	// without it the share-group APIs are not advertised.
	ShareGroups *sharegroup.Coordinator
	// Txn, when set, is the transaction coordinator; without it the transaction APIs
	// are not advertised and transactional producers are refused.
	Txn *txn.Coordinator
	// TxnVerifier, when set with Txn, lets TxnOffsetCommit v5 (transactions v2) add the
	// group to the transaction, on whichever broker coordinates it.
	TxnVerifier *txn.Verifier
	// Shares, when set, holds the share partitions this broker leads (KIP-932); without
	// it ShareFetch and ShareAcknowledge are not advertised.
	Shares *share.Manager
}

// image is the metadata handlers answer from.
func (s *Server) image() *metadata.Image { return s.deps.Replicas.Image() }

// waitApplied waits, bounded by ctx, until the broker has applied what ready asks for.
func (s *Server) waitApplied(ctx context.Context, ready func(*metadata.Image) bool) {
	s.deps.Replicas.WaitApplied(ctx, ready)
}

// Handler answers one decoded request.
type Handler func(ctx context.Context, r *Request) Result

type handlerEntry struct {
	min, max int16
	fn       Handler
}

// Server accepts Kafka client connections.
type Server struct {
	cfg      Config
	deps     Deps
	lg       *slog.Logger
	handlers map[int16]handlerEntry
	sentinel [sentinelLen]byte
	sessions *fetchSessionCache
	// shareSessions are the share sessions of share-group members (share_session.go).
	shareSessions *shareSessionCache
	pool          *memoryPool
	quotas        *quotaManager
	slots         requestSlots
	// scram, when the metadata store keeps SCRAM credentials.
	scram metadata.ScramStore

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[*conn]struct{}
	perIP     map[string]int
	// connSlots holds a token per open connection under max.connections (nil: no limit).
	connSlots chan struct{}
	closed    chan struct{}
	closing   bool
	wg        sync.WaitGroup
	// graceOver ends the context of every request still in flight once Close's grace
	// has run out. Closing the sockets alone does not end a request that waits on its
	// context (an acks=all produce, a long poll, a handler waiting on another
	// component), and Close waits for every request.
	graceOver context.Context
	endGrace  context.CancelFunc
}

// NewServer builds a server with every built-in API handler registered.
func NewServer(cfg Config, deps Deps) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.QueuedMaxRequests <= 0 {
		cfg.QueuedMaxRequests = 500
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = 10 * time.Minute
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = cfg.ConnectionsMaxIdle
	}
	if cfg.QuotaWindowNum <= 0 {
		cfg.QuotaWindowNum = 11
	}
	if cfg.QuotaWindowSize <= 0 {
		cfg.QuotaWindowSize = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FetchSessionSlots == 0 {
		cfg.FetchSessionSlots = defaultFetchSessionSlots
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	s := &Server{cfg: cfg, deps: deps, lg: cfg.Logger, handlers: map[int16]handlerEntry{}, conns: map[*conn]struct{}{}, sentinel: newSentinel(),
		perIP: map[string]int{}, closed: make(chan struct{}),
		sessions: newFetchSessionCache(cfg.FetchSessionSlots), shareSessions: newShareSessionCache(), pool: newMemoryPool(cfg.QueuedMaxRequestBytes, cfg.Metrics.RequestPoolBytes),
		slots: make(requestSlots, cfg.QueuedMaxRequests), quotas: newQuotaManager(cfg.QuotaWindowNum, cfg.QuotaWindowSize)}
	if cfg.MaxConnections > 0 && cfg.MaxConnections < math.MaxInt32 {
		s.connSlots = make(chan struct{}, cfg.MaxConnections)
	}
	s.graceOver, s.endGrace = context.WithCancel(context.Background())
	s.initAuth()
	s.registerAPIs()
	return s
}

// Register adds (or replaces) the handler of an API key; ApiVersions then advertises
// [min, max].
func (s *Server) Register(key kmsg.Key, min, max int16, fn Handler) {
	s.handlers[key.Int16()] = handlerEntry{min: min, max: max, fn: fn}
}

// supportedKeys returns the advertised APIs sorted by key.
func (s *Server) supportedKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(s.handlers))
	for k, h := range s.handlers {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: h.min, MaxVersion: h.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// Serve accepts PLAINTEXT connections on ln until ctx is done or the server is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeListener(ctx, ln, Listener{SecurityProtocol: ProtocolPlaintext})
}

// ServeListener accepts connections on ln with the listener's security protocol until
// ctx is done or the server is closed.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener, lc Listener) error {
	switch lc.SecurityProtocol {
	case "", ProtocolPlaintext, ProtocolSASLPlaintext:
		lc.TLS = nil
	case ProtocolSSL, ProtocolSASLSSL:
		if lc.TLS == nil {
			return fmt.Errorf("listener %s: %s needs a TLS configuration", lc.Name, lc.SecurityProtocol)
		}
	default:
		return fmt.Errorf("listener %s: unknown security protocol %q", lc.Name, lc.SecurityProtocol)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		// At max.connections, accept nothing until a connection closes: new clients
		// wait in the listen backlog.
		if s.connSlots != nil {
			select {
			case s.connSlots <- struct{}{}:
			case <-ctx.Done():
				return nil
			case <-s.closed:
				return nil
			}
		}
		nc, err := ln.Accept()
		if err != nil && s.connSlots != nil {
			<-s.connSlots
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			// Out of file descriptors and the like: back off rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.lg.Warn("accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		c := newConn(s, nc, &lc)
		ip := remoteIP(nc)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			s.releaseConnSlot()
			return nil
		}
		if limit := s.ipLimit(ip); limit >= 0 && s.perIP[ip] >= limit {
			s.mu.Unlock()
			s.lg.Warn("closing connection over max.connections.per.ip", "remote", nc.RemoteAddr().String(), "limit", limit)
			nc.Close()
			s.releaseConnSlot()
			continue
		}
		s.perIP[ip]++
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.cfg.Metrics.Connections.Inc()
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			if s.perIP[ip]--; s.perIP[ip] <= 0 {
				delete(s.perIP, ip)
			}
			s.mu.Unlock()
			s.releaseConnSlot()
			s.cfg.Metrics.Connections.Dec()
		}()
	}
}

// Close stops accepting, lets in-flight requests finish for up to grace, then ends
// their contexts and closes every connection.
func (s *Server) Close(grace time.Duration) error {
	s.mu.Lock()
	if !s.closing {
		close(s.closed)
	}
	s.closing = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.stopReading()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.endGrace()
		for _, c := range conns {
			c.nc.Close()
		}
		<-done
	}
	s.endGrace()
	return nil
}

func (s *Server) releaseConnSlot() {
	if s.connSlots != nil {
		<-s.connSlots
	}
}

// ipLimit is the max.connections.per.ip that applies to ip, -1 for none. An override
// of 0 refuses the address outright, as in Kafka.
func (s *Server) ipLimit(ip string) int {
	if n, ok := s.cfg.MaxConnectionsPerIPOverrides[ip]; ok {
		return n
	}
	if n := s.cfg.MaxConnectionsPerIP; n > 0 && n < math.MaxInt32 {
		return n
	}
	return -1
}

func remoteIP(nc net.Conn) string {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides: "host:count,..."
// where host is an address or a name resolved now, as Kafka resolves it at start-up.
func ParseConnectionOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides entry %q is not host:count", item)
		}
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides entry %q: count must be a non-negative integer", item)
		}
		host := strings.Trim(item[:i], "[]")
		if ip := net.ParseIP(host); ip != nil {
			out[ip.String()] = n
			continue
		}
		addrs, err := net.LookupIP(host)
		if err != nil {
			return nil, fmt.Errorf("max.connections.per.ip.overrides host %q: %w", host, err)
		}
		for _, a := range addrs {
			out[a.String()] = n
		}
	}
	return out, nil
}

// errUnknownKey closes the connection, as Kafka does for an API key it does not know.
var errUnknownKey = errors.New("unknown API key")

func describeKey(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return fmt.Sprintf("key %d", key)
}
