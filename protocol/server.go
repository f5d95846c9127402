package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/group"
	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/producerid"
	"github.com/shalelog/shale/internal/topicconfig"
	"github.com/shalelog/shale/replication"
)

// Config configures the Kafka listener.
type Config struct {
	NodeID int32
	// MaxRequestBytes is socket.request.max.bytes: larger requests close the connection
	// before any allocation. Default 100 MiB.
	MaxRequestBytes int32
	// MaxInFlight bounds the requests read ahead on one connection while earlier ones are
	// still being answered. Default 64.
	MaxInFlight int
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
	// Auth is how SSL and SASL listeners authenticate clients (auth.go).
	Auth    AuthConfig
	Logger  *slog.Logger
	Metrics *Metrics
}

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
	// scram, when the metadata store keeps SCRAM credentials.
	scram metadata.ScramStore

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[*conn]struct{}
	closing   bool
	wg        sync.WaitGroup
}

// NewServer builds a server with every built-in API handler registered.
func NewServer(cfg Config, deps Deps) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
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
		sessions: newFetchSessionCache(cfg.FetchSessionSlots)}
	s.registerBuiltins()
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
		nc, err := ln.Accept()
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
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.cfg.Metrics.Connections.Inc()
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.cfg.Metrics.Connections.Dec()
		}()
	}
}

// Close stops accepting, lets in-flight requests finish for up to grace, then closes
// every connection.
func (s *Server) Close(grace time.Duration) error {
	s.mu.Lock()
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
		for _, c := range conns {
			c.nc.Close()
		}
		<-done
	}
	return nil
}

// errUnknownKey closes the connection, as Kafka does for an API key it does not know.
var errUnknownKey = errors.New("unknown API key")

func describeKey(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return fmt.Sprintf("key %d", key)
}
