// Package controllertest runs the real controller in tests of the packages above it: one
// controller.Server as the single voter of its quorum, and controller.BrokerClient
// registrations against it, on loopback. Protocol, group and broker tests use it so that
// they exercise the metadata rules production runs (topic placement, configs, leader and
// partition epochs, fencing, offset commits through Raft, persistence across restarts)
// rather than a second implementation of them.
//
// The controller is the production one, tuned for tests: Raft runs on hashicorp/raft's
// in-memory log, stable store, snapshot store and transport (the gRPC service brokers
// call still listens on loopback), with short timeouts so that a lone voter elects itself
// within tens of milliseconds, and brokers have a short session. Node.Restart starts a new
// controller on the old one's Raft state, as a restarted process reads its data dir.
package controllertest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/metadata"
)

// Timings of the test quorum. The session is long enough that a loaded machine running
// the race detector does not fence a live broker, short enough that a test can wait out
// an expiry.
const (
	SessionTimeout    = 3 * time.Second
	HeartbeatInterval = 150 * time.Millisecond
	raftTimeout       = 10 * time.Millisecond
	startTimeout      = 30 * time.Second
)

// BrokerID is the id of the broker Start registers (and of the controller voter).
const BrokerID int32 = 1

type settings struct {
	dir               string
	raft              *raftState
	controllerAddr    string
	host              string
	port              int32
	defaultPartitions int32
	logger            *slog.Logger
	tune              func(*controller.Config)
}

// Option shapes Start.
type Option func(*settings)

// WithControllerAddr binds the controller's listener to addr (host:port) instead of a
// free loopback port.
func WithControllerAddr(addr string) Option { return func(s *settings) { s.controllerAddr = addr } }

// WithAdvertised sets the Kafka listener broker 1 registers. Default 127.0.0.1:9092.
func WithAdvertised(host string, port int) Option {
	return func(s *settings) { s.host, s.port = host, int32(port) }
}

// WithDefaultPartitions sets the controller's num.partitions.
func WithDefaultPartitions(n int32) Option { return func(s *settings) { s.defaultPartitions = n } }

// WithLogger sends the controller's and the broker clients' logs to l. Default: discarded.
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.logger = l } }

// WithConfig adjusts the controller's Config after the test defaults are set.
func WithConfig(fn func(*controller.Config)) Option { return func(s *settings) { s.tune = fn } }

// Node is a running single-voter controller quorum and the broker clients registered
// with it.
type Node struct {
	t   testing.TB
	set settings

	// Controller is the quorum's only voter.
	Controller *controller.Server
	// Broker is broker 1's client of the quorum: the metadata.Store a broker uses.
	Broker *controller.BrokerClient
	// Dir is the controller's data directory (meta.properties; Raft state is in memory).
	Dir string

	mu     sync.Mutex
	others []*controller.BrokerClient
	closed bool
}

// raftState is a quorum's in-memory Raft log, stable store and snapshots; a restart
// hands them to the new controller as a restarted process finds its data dir.
type raftState struct {
	store *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

// Start runs a controller and registers broker 1 with it, returning once broker 1 is
// unfenced and its metadata cache shows it. Everything stops at t's cleanup, or at Close.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	set := settings{host: "127.0.0.1", port: 9092}
	for _, o := range opts {
		o(&set)
	}
	if set.dir == "" {
		set.dir = t.TempDir()
	}
	if set.logger == nil {
		set.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if set.raft == nil {
		set.raft = &raftState{store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
	}
	n := &Node{t: t, set: set, Dir: set.dir}
	ln := listen(t, set.controllerAddr)
	addr := ln.Addr().String()
	n.set.controllerAddr = addr
	_, trans := raft.NewInmemTransport(raft.ServerAddress(addr))
	cfg := controller.Config{
		NodeID:             BrokerID,
		Voters:             []controller.Voter{{ID: BrokerID, Addr: addr}},
		Listener:           ln,
		DataDir:            filepath.Clean(set.dir),
		Raft:               &controller.RaftStorage{Logs: set.raft.store, Stable: set.raft.store, Snapshots: set.raft.snaps, Transport: trans},
		SessionTimeout:     SessionTimeout,
		DefaultPartitions:  set.defaultPartitions,
		HeartbeatTimeout:   raftTimeout,
		ElectionTimeout:    raftTimeout,
		LeaderLeaseTimeout: raftTimeout,
		Logger:             set.logger,
	}
	if set.tune != nil {
		set.tune(&cfg)
	}
	srv, err := controller.NewServer(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("controllertest: %v", err)
	}
	if err := srv.Start(context.Background()); err != nil {
		ln.Close()
		srv.Close()
		t.Fatalf("controllertest: %v", err)
	}
	n.Controller = srv
	t.Cleanup(func() { n.Close() })
	// Registering before the voter has elected itself would meet NOT_CONTROLLER and the
	// client's growing backoff; waiting here keeps a test's start to tens of milliseconds.
	deadline := time.Now().Add(startTimeout)
	for !srv.IsActive() {
		if time.Now().After(deadline) {
			t.Fatalf("controllertest: the controller did not become active in %v", startTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	n.Broker = n.register(BrokerID, set.host, set.port)
	return n
}

// listen binds addr, or a free loopback port when addr is empty. A restart asks for the
// port the quorum had, which the previous listener may hold for a moment longer; when
// another process has taken it, a new port works too, the stored voter address notwithstanding:
// a lone voter never dials itself.
func listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	if addr != "" {
		deadline := time.Now().Add(2 * time.Second)
		for {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				return ln
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("controllertest: %v", err)
	}
	return ln
}

// Store is broker 1's metadata.Store.
func (n *Node) Store() metadata.Store { return n.Broker }

// ControllerAddr is the address of the controller's listener.
func (n *Node) ControllerAddr() string { return n.set.controllerAddr }

// AddBroker registers another broker advertising host:port, returning once it is
// unfenced. Closing the client is a controlled shutdown: the controller fences the broker
// and moves its leaderships at once.
func (n *Node) AddBroker(id int32, host string, port int) *controller.BrokerClient {
	n.t.Helper()
	c := n.register(id, host, int32(port))
	n.mu.Lock()
	n.others = append(n.others, c)
	n.mu.Unlock()
	return c
}

func (n *Node) register(id int32, host string, port int32) *controller.BrokerClient {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := controller.NewBrokerClient(ctx, controller.BrokerConfig{
		NodeID: id, Host: host, Port: port,
		ControllerAddrs:   []string{n.set.controllerAddr},
		HeartbeatInterval: HeartbeatInterval,
		SessionTimeout:    SessionTimeout,
		Logger:            n.set.logger,
	})
	if err != nil {
		n.t.Fatalf("controllertest: register broker %d: %v", id, err)
	}
	return c
}

// Close stops the broker clients (each a controlled shutdown) and then the controller.
// It is safe to call more than once.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	others := n.others
	n.others = nil
	n.mu.Unlock()
	var errs []error
	for _, c := range others {
		errs = append(errs, c.Close())
	}
	if n.Broker != nil {
		errs = append(errs, n.Broker.Close())
	}
	errs = append(errs, n.Controller.Close())
	return errors.Join(errs...)
}

// Restart stops the node (if it is running) and starts it again on the same Raft state,
// data directory and controller address, so that the new controller holds everything the
// old one committed; broker 1 registers anew, as a restarted broker process does. opts
// apply on top of the node's own settings (a new advertised port, say).
func (n *Node) Restart(opts ...Option) *Node {
	n.t.Helper()
	if err := n.Close(); err != nil {
		n.t.Fatalf("controllertest: stop for restart: %v", err)
	}
	set := n.set
	base := []Option{func(s *settings) { *s = set }}
	return Start(n.t, append(base, opts...)...)
}

// WaitFor waits until store's image satisfies cond, failing the test after 10 seconds.
// Metadata reaches a broker asynchronously, as in Kafka: an admin call returns once the
// controller has committed the change, not once every broker's cache shows it.
func WaitFor(t testing.TB, store metadata.Store, what string, cond func(*metadata.Image) bool) *metadata.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if im := store.Current(); cond(im) {
		return im
	}
	ch := store.Watch(ctx)
	for im := range ch {
		if cond(im) {
			return im
		}
	}
	if im := store.Current(); cond(im) {
		return im
	}
	t.Fatalf("controllertest: timed out waiting for %s", what)
	return nil
}
