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

	"github.com/twmb/franz-go/pkg/kerr"

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

// watchStallTimeout is how long a WatchMetadata stream may stay silent (controllers send
// progress every watchProgressInterval) before the broker reconnects.
const watchStallTimeout = 4 * watchProgressInterval

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

type imageWatcher struct{ ch chan *metadata.Image }

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
	for !c.LeaseValid() {
		c.mu.Lock()
		ch := c.leaseCh
		c.mu.Unlock()
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

// listenersPB lists the advertised listeners, the inter-broker one first: brokers
// replicate from, and older code reads, the first.
func (c *BrokerClient) listenersPB() []*pb.Listener {
	proto := c.cfg.SecurityProtocol
	if proto == "" {
		proto = "PLAINTEXT"
	}
	out := []*pb.Listener{{Name: c.cfg.ListenerName, Host: c.cfg.Host, Port: c.cfg.Port, SecurityProtocol: proto}}
	for _, e := range c.cfg.OtherListeners {
		out = append(out, &pb.Listener{Name: e.Name, Host: e.Host, Port: e.Port, SecurityProtocol: e.SecurityProtocol})
	}
	return out
}

// register registers this process, retrying while another process's session for the
// same id is still alive.
func (c *BrokerClient) register(ctx context.Context) error {
	req := &pb.RegisterBrokerRequest{
		BrokerId:    c.cfg.NodeID,
		Incarnation: c.incarnation,
		Listeners:   c.listenersPB(),
		Rack:        c.cfg.Rack,
	}
	backoff := 100 * time.Millisecond
	for {
		resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.RegisterBroker, req)
		if err != nil {
			return fmt.Errorf("controller client: register broker %d: %w", c.cfg.NodeID, err)
		}
		err = fromPBError(resp.Error)
		if err == nil {
			c.mu.Lock()
			c.epoch, c.fenced, c.leaseUntil = resp.BrokerEpoch, true, time.Time{}
			c.signalLeaseLocked()
			c.mu.Unlock()
			c.log.Info("broker registered with the controller quorum", "epoch", resp.BrokerEpoch, "cluster_id", resp.ClusterId)
			return nil
		}
		if !errors.Is(err, kerr.DuplicateBrokerRegistration) {
			return fmt.Errorf("controller client: register broker %d: %w", c.cfg.NodeID, err)
		}
		c.log.Info("waiting for the previous registration of this broker id to expire", "err", err)
		if !sleepCtx(ctx, backoff) {
			return fmt.Errorf("controller client: register broker %d: %w (%v)", c.cfg.NodeID, ctx.Err(), err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (c *BrokerClient) signalLeaseLocked() {
	close(c.leaseCh)
	c.leaseCh = make(chan struct{})
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

// ControlledShutdown is the broker's side of Kafka's controlled shutdown: it heartbeats
// with want_shutdown (keeping its lease alive meanwhile) so that the controller moves
// every leadership it can to another in-sync replica and takes this broker out of the
// ISRs, until the controller answers should_shut_down; it then waits until the metadata
// cache shows the result, so that whatever follows the cache has seen its leadership go,
// and returns. The broker stays registered and unfenced until Close (or until its
// heartbeats stop), still leading the partitions nobody else could take. It returns
// ctx's error when ctx ends first.
func (c *BrokerClient) ControlledShutdown(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return errors.New("controller client: closed")
	}
	started := time.Now()
	c.shuttingDown.Store(true)
	c.kickHeartbeat()
	// Ask again briskly rather than at the heartbeat interval: the answer usually comes
	// with the first heartbeat, and a node waiting to stop should not wait seconds more.
	poll := time.NewTicker(min(c.cfg.HeartbeatInterval, 100*time.Millisecond))
	defer poll.Stop()
	for {
		c.mu.Lock()
		ok, off, ch := c.shutdownOK, c.shutdownOffset, c.leaseCh
		c.mu.Unlock()
		if ok {
			if err := c.WaitForOffset(ctx, off); err != nil {
				return fmt.Errorf("controller client: controlled shutdown of broker %d: metadata offset %d: %w", c.cfg.NodeID, off, err)
			}
			c.log.Info("controlled shutdown complete", "metadata_offset", off, "took", time.Since(started))
			return nil
		}
		select {
		case <-ch:
		case <-poll.C:
			c.kickHeartbeat()
		case <-ctx.Done():
			return fmt.Errorf("controller client: controlled shutdown of broker %d: %w", c.cfg.NodeID, ctx.Err())
		case <-c.ctx.Done():
			return errors.New("controller client: closed")
		}
	}
}

// Current returns the latest image the broker has received. Never nil.
func (c *BrokerClient) Current() *metadata.Image { return c.img.Load() }

// Watch returns a channel that receives the current image at once and then each new
// one, coalesced so that a slow reader sees the newest. It is closed when ctx is done or
// the client closes.
func (c *BrokerClient) Watch(ctx context.Context) <-chan *metadata.Image {
	w := &imageWatcher{ch: make(chan *metadata.Image, 1)}
	c.imgMu.Lock()
	if c.ctx.Err() != nil {
		c.imgMu.Unlock()
		close(w.ch)
		return w.ch
	}
	c.watchers[w] = struct{}{}
	w.ch <- c.img.Load()
	c.imgMu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		c.imgMu.Lock()
		if _, ok := c.watchers[w]; ok {
			delete(c.watchers, w)
			close(w.ch)
		}
		c.imgMu.Unlock()
	}()
	return w.ch
}

// publish makes im the cache, unless it is not newer than the cache: metadata is
// applied strictly in increasing offset order, and a broker never acts on an older image.
func (c *BrokerClient) publish(im *metadata.Image) bool {
	c.imgMu.Lock()
	defer c.imgMu.Unlock()
	if im.Offset <= c.img.Load().Offset {
		return false
	}
	c.img.Store(im)
	close(c.imgCh)
	c.imgCh = make(chan struct{})
	for w := range c.watchers {
		select {
		case w.ch <- im:
			continue
		default:
		}
		select {
		case <-w.ch: // drop the older image the reader has not taken
		default:
		}
		select {
		case w.ch <- im:
		default:
		}
	}
	return true
}

// WaitForOffset blocks until the cache reflects metadata offset off or later.
func (c *BrokerClient) WaitForOffset(ctx context.Context, off uint64) error {
	for {
		c.imgMu.Lock()
		im, ch := c.img.Load(), c.imgCh
		c.imgMu.Unlock()
		if im.Offset >= off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return errors.New("controller client closed")
		}
	}
}

// LeaseValid reports whether the broker is registered, the controller last said it is
// unfenced, and the lease that answer gave has not run out by this broker's clock.
func (c *BrokerClient) LeaseValid() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch >= 0 && !c.fenced && !c.closing && time.Now().Before(c.leaseUntil)
}

// Fenced reports whether the last answer of the controller said this broker is fenced,
// or it has no registration (metadata.Store).
func (c *BrokerClient) Fenced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch < 0 || c.fenced || c.closing
}

// BrokerEpoch is the epoch of the current registration, -1 before one.
func (c *BrokerClient) BrokerEpoch() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// Incarnation identifies this process's registration.
func (c *BrokerClient) Incarnation() string { return c.incarnation }

func (c *BrokerClient) isFenced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fenced
}

func (c *BrokerClient) kickHeartbeat() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *BrokerClient) heartbeatLoop() {
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		c.heartbeat()
		select {
		case <-t.C:
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *BrokerClient) heartbeat() {
	if c.heartbeatsPaused.Load() {
		return
	}
	epoch := c.BrokerEpoch()
	req := &pb.BrokerHeartbeatRequest{BrokerId: c.cfg.NodeID, BrokerEpoch: epoch, MetadataOffset: c.Current().Offset,
		WantShutdown: c.shuttingDown.Load()}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	resp, err := send(ctx, c.q, c.cfg.HeartbeatInterval, pb.ControllerClient.BrokerHeartbeat, req)
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Debug("heartbeat failed", "err", err)
		}
		return
	}
	if err := fromPBError(resp.Error); err != nil {
		if errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, kerr.BrokerIDNotRegistered) {
			c.log.Warn("registration lost; registering again", "err", err)
			c.mu.Lock()
			c.fenced, c.leaseUntil = true, time.Time{}
			c.signalLeaseLocked()
			c.mu.Unlock()
			if err := c.register(c.ctx); err != nil {
				if c.ctx.Err() == nil {
					c.log.Warn("re-registration failed; retrying at the next heartbeat", "err", err)
				}
				return
			}
			c.kickHeartbeat()
			return
		}
		c.log.Warn("heartbeat refused", "err", err)
		return
	}
	lease := c.cfg.SessionTimeout
	if ms := time.Duration(resp.SessionTimeoutMs) * time.Millisecond; ms > 0 && ms < lease {
		lease = ms
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if req.WantShutdown && resp.ShouldShutDown && !c.shutdownOK {
		c.shutdownOK, c.shutdownOffset = true, resp.MetadataOffset
		c.signalLeaseLocked()
	}
	was := !c.fenced && time.Now().Before(c.leaseUntil)
	c.fenced = resp.Fenced
	if resp.Fenced {
		c.leaseUntil = time.Time{}
	} else {
		c.leaseUntil = sent.Add(lease)
	}
	if now := !c.fenced && time.Now().Before(c.leaseUntil); now != was {
		c.signalLeaseLocked()
		if now {
			c.log.Info("broker lease granted")
		} else {
			c.log.Warn("broker is fenced by the controller")
		}
	}
}

func (c *BrokerClient) watchLoop() {
	backoff := 20 * time.Millisecond
	wantImage := false
	for c.ctx.Err() == nil {
		addr, client, err := c.q.current()
		if err != nil {
			return
		}
		got, err := c.watchOnce(client, wantImage)
		wantImage = errors.Is(err, errBadDelta)
		if c.ctx.Err() != nil {
			return
		}
		if got {
			backoff = 20 * time.Millisecond
		}
		if hint, ok := notLeaderHint(err); ok && hint != "" && hint != addr {
			c.q.moveTo(hint)
			continue
		}
		c.log.Debug("metadata watch ended; reconnecting", "controller", addr, "err", err)
		c.q.next(addr)
		if !sleepCtx(c.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

var (
	errBadDelta   = errors.New("metadata delta does not apply to the cache")
	errStaleImage = errors.New("controller sent a metadata image older than the cache")
)

// watchOnce follows one WatchMetadata stream until it fails or stalls. got reports
// whether anything arrived.
func (c *BrokerClient) watchOnce(client pb.ControllerClient, wantImage bool) (got bool, err error) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stall := time.AfterFunc(watchStallTimeout, cancel)
	defer stall.Stop()
	cur := c.Current()
	stream, err := client.WatchMetadata(ctx, &pb.WatchMetadataRequest{
		BrokerId: c.cfg.NodeID, FromOffset: cur.Offset, ClusterId: cur.ClusterID, WantImage: wantImage})
	if err != nil {
		return false, err
	}
	var asm imageAssembler
	for {
		upd, err := stream.Recv()
		if err != nil {
			return got, err
		}
		got = true
		stall.Reset(watchStallTimeout)
		switch u := upd.Update.(type) {
		case *pb.MetadataUpdate_Delta:
			cur := c.Current()
			// applyDelta refuses a delta that does not follow the cache or does not move
			// it forward.
			next, err := applyDelta(cur, u.Delta)
			if err == nil && !c.publish(next) {
				err = fmt.Errorf("cache moved to offset %d meanwhile", c.Current().Offset)
			}
			if err != nil {
				c.log.Warn("metadata delta does not apply; asking for a complete image", "err", err)
				return got, fmt.Errorf("%w: %w", errBadDelta, err)
			}
		case *pb.MetadataUpdate_Image:
			im, err := asm.add(u.Image)
			if err != nil {
				return got, fmt.Errorf("%w: %w", errBadDelta, err)
			}
			if im == nil {
				break
			}
			old := c.Current()
			switch {
			case im.Offset == old.Offset:
				// The cache already holds this offset (a reconnect that asked for an
				// image): nothing to apply.
				c.log.Debug("metadata image at the cache's offset ignored", "offset", im.Offset)
			case im.Offset < old.Offset || !c.publish(im):
				c.log.Error("metadata image older than the cache refused", "image", im.Offset, "cache", old.Offset,
					"image_cluster_id", im.ClusterID, "cache_cluster_id", old.ClusterID)
				return got, fmt.Errorf("%w: image at offset %d, cache at %d", errStaleImage, im.Offset, old.Offset)
			}
		case *pb.MetadataUpdate_Progress:
		}
		if c.isFenced() {
			c.kickHeartbeat()
		}
	}
}
