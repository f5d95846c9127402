package controller

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// BrokerConfig configures a broker's client of the controller quorum.
type BrokerConfig struct {
	NodeID int32
	// Host and Port are the advertised Kafka listener.
	Host string
	Port int32
	// Rack is broker.rack, "" when unset.
	Rack string
	// ListenerName names the advertised listener. Default PLAINTEXT.
	ListenerName string
	// SecurityProtocol is that listener's (default PLAINTEXT).
	SecurityProtocol string
	// OtherListeners are the broker's other advertised listeners: Metadata gives a client
	// the addresses of the listener it arrived on.
	OtherListeners []metadata.Endpoint
	// TLS, when set, secures the gRPC connections to the controllers (a controller
	// listener mapped to SSL).
	TLS *tls.Config
	// ControllerAddrs are the voters' addresses.
	ControllerAddrs []string
	// HeartbeatInterval is broker.heartbeat.interval.ms. Default 2s.
	HeartbeatInterval time.Duration
	// SessionTimeout must match the controllers' broker.session.timeout.ms: the broker's
	// own lease lapses this long after the last acknowledged heartbeat was sent, before
	// the controller (which counts from receipt) fences it. Default 9s.
	SessionTimeout time.Duration
	// RequestTimeout bounds one attempt of a call to a controller. Default 10s.
	RequestTimeout time.Duration
	// VoterRefreshInterval is how often the broker asks the quorum for its current
	// voters, whose addresses it then dials instead of ControllerAddrs. Default 5s.
	VoterRefreshInterval time.Duration
	Logger               *slog.Logger
}

// BrokerClient is a broker's metadata.Store: it keeps the broker registered and its lease
// alive with heartbeats, follows the metadata deltas into a local cache, and forwards
// every change to the active controller, following leadership changes.
type BrokerClient struct {
	cfg         BrokerConfig
	log         *slog.Logger
	incarnation string
	q           *quorumConns

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // asks for a heartbeat now

	mu         sync.Mutex
	epoch      int64
	fenced     bool
	leaseUntil time.Time
	closing    bool
	leaseCh    chan struct{} // closed and replaced whenever the lease or shutdown state changes
	// shutdownOK is set once the controller answered a controlled-shutdown heartbeat with
	// should_shut_down, at metadata offset shutdownOffset.
	shutdownOK     bool
	shutdownOffset uint64

	// shuttingDown makes every heartbeat ask for a controlled shutdown.
	shuttingDown atomic.Bool

	img      atomic.Pointer[metadata.Image]
	imgMu    sync.Mutex
	watchers map[*imageWatcher]struct{}
	imgCh    chan struct{} // closed and replaced on every new image

	closeOnce sync.Once

	// Test hooks: heartbeatsPaused stops heartbeats as a stopped process would;
	// silentClose skips the shutdown notice as a killed process would.
	heartbeatsPaused atomic.Bool
	silentClose      atomic.Bool
}

var _ metadata.Store = (*BrokerClient)(nil)

// NewBrokerClient registers the broker (retrying until ctx is done), starts heartbeats
// and the metadata watch, and returns once the broker's cache has caught up with its
// registration and the controller has unfenced it, i.e. once LeaseValid holds.
func NewBrokerClient(ctx context.Context, cfg BrokerConfig) (*BrokerClient, error) {
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("controller client: node.id %d is negative", cfg.NodeID)
	}
	if len(cfg.ControllerAddrs) == 0 {
		return nil, errors.New("controller client: no controller addresses")
	}
	if cfg.Host == "" || cfg.Port <= 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("controller client: bad advertised listener %s:%d", cfg.Host, cfg.Port)
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.HeartbeatInterval >= cfg.SessionTimeout {
		return nil, fmt.Errorf("controller client: heartbeat interval %v must be shorter than the session timeout %v",
			cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.ListenerName == "" {
		cfg.ListenerName = "PLAINTEXT"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var inc [16]byte
	_, _ = rand.Read(inc[:])
	c := &BrokerClient{
		cfg:         cfg,
		log:         cfg.Logger.With("component", "controller-client", "node.id", cfg.NodeID),
		incarnation: hex.EncodeToString(inc[:]),
		q:           newQuorumConns(cfg.ControllerAddrs, cfg.TLS),
		kick:        make(chan struct{}, 1),
		epoch:       -1,
		leaseCh:     make(chan struct{}),
		watchers:    map[*imageWatcher]struct{}{},
		imgCh:       make(chan struct{}),
	}
	c.img.Store(emptyImage())
	c.ctx, c.cancel = context.WithCancel(context.Background())

	if err := c.register(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.wg.Add(3)
	go func() {
		defer c.wg.Done()
		c.watchLoop()
	}()
	go func() {
		defer c.wg.Done()
		c.voterLoop()
	}()
	go func() {
		defer c.wg.Done()
		c.heartbeatLoop()
	}()
	for {
		// The lease and its channel are read under one lock: a heartbeat that grants the
		// lease between the two reads would signal the old channel, and the wait on the
		// new one would last until the lease next changes, which it need not ever do.
		c.mu.Lock()
		valid, ch := c.leaseValidLocked(), c.leaseCh
		c.mu.Unlock()
		if valid {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("controller client: broker %d registered but not unfenced: %w", cfg.NodeID, ctx.Err())
		}
	}
	// The lease comes from a heartbeat answer; the cache may not yet hold the record that
	// unfenced this broker. Wait for it too, so that the first image the broker serves
	// lists it as live.
	for {
		c.imgMu.Lock()
		im, ch := c.img.Load(), c.imgCh
		c.imgMu.Unlock()
		if b, ok := im.Brokers[cfg.NodeID]; ok && !b.Fenced {
			return c, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("controller client: broker %d unfenced but its metadata cache never showed it: %w", cfg.NodeID, ctx.Err())
		}
	}
}

// Close tells the controller the broker is going away (so that its leaderships move at
// once rather than after the session timeout), then stops everything.
func (c *BrokerClient) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.mu.Lock()
		epoch, wasUnfenced := c.epoch, !c.fenced
		c.closing, c.fenced, c.leaseUntil = true, true, time.Time{}
		c.signalLeaseLocked()
		c.mu.Unlock()
		if epoch >= 0 && wasUnfenced && !c.silentClose.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), min(2*time.Second, c.cfg.SessionTimeout))
			_, err := send(ctx, c.q, min(time.Second, c.cfg.SessionTimeout), pb.ControllerClient.BrokerHeartbeat,
				&pb.BrokerHeartbeatRequest{BrokerId: c.cfg.NodeID, BrokerEpoch: epoch, WantShutdown: true, Stopping: true})
			cancel()
			if err != nil {
				c.log.Warn("could not tell the controller about the shutdown; its session will expire instead", "err", err)
			}
		}
		c.q.close()
		c.imgMu.Lock()
		for w := range c.watchers {
			close(w.ch)
			delete(c.watchers, w)
		}
		c.imgMu.Unlock()
	})
	return nil
}
