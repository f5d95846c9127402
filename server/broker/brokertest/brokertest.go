// Package brokertest runs a real broker in tests: the assembly production runs
// (broker.New) on a real controller quorum of one in-memory voter (controllertest), on
// loopback. Protocol, replication and fuzz tests use it instead of wiring the replica
// manager, the coordinators and the protocol server themselves, so that they test the
// broker a node runs, built in the node's order and stopped in its order.
//
// Start runs a quorum and broker 1 on it; AddBroker adds brokers to the same quorum.
// Everything stops at the test's cleanup (brokers before the quorum they registered
// with); Close, Reopen and Restart stop and start a broker within a test.
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/server/broker"
)

// ShutdownGrace is how long a test broker's Close lets in-flight requests finish.
const ShutdownGrace = 2 * time.Second

type settings struct {
	dir   string
	ln    net.Listener
	tune  []func(*broker.Options)
	ctl   []controllertest.Option
	quiet *slog.Logger
}

// Option shapes a broker.
type Option func(*settings)

// WithLogDir puts the broker's logs in dir instead of a fresh temporary directory (the
// controller's data directory stays its own).
func WithLogDir(dir string) Option { return func(s *settings) { s.dir = dir } }

// WithListener serves Kafka clients on ln instead of a fresh loopback port.
func WithListener(ln net.Listener) Option { return func(s *settings) { s.ln = ln } }

// WithOptions adjusts the broker's Options after the test defaults (a quiet logger, no
// coordinators, one PLAINTEXT listener); options given later run later. NodeID,
// Replication.LogDir and Listeners are the test's and are set before fn runs.
func WithOptions(fn func(*broker.Options)) Option {
	return func(s *settings) { s.tune = append(s.tune, fn) }
}

// WithController passes options to controllertest.Start (Start only; a restart keeps the
// quorum's own).
func WithController(opts ...controllertest.Option) Option {
	return func(s *settings) { s.ctl = append(s.ctl, opts...) }
}

// Broker is one running test broker.
type Broker struct {
	*broker.Broker
	// ID is its node id.
	ID int32
	// Addr is host:port of its Kafka listener.
	Addr string
	// Dir is its log directory.
	Dir string
	// Store is its registration with the quorum, which outlives Close.
	Store broker.Store
	// Node is the controller quorum it registered with, shared by the brokers of a
	// cluster.
	Node *controllertest.Node

	t   testing.TB
	set settings

	mu     sync.Mutex
	closed bool
}

// Start runs a controller quorum and broker 1 registered with it, returning once the
// broker serves.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	set := newSettings(t, opts)
	ln := set.listener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ctl := append([]controllertest.Option{controllertest.WithAdvertised("127.0.0.1", port)}, set.ctl...)
	node := controllertest.Start(t, ctl...)
	return build(t, controllertest.BrokerID, node, node.Broker, set)
}

// AddBroker starts broker id on b's quorum, registered (unfenced) before it serves.
func (b *Broker) AddBroker(id int32, opts ...Option) *Broker {
	b.t.Helper()
	set := newSettings(b.t, opts)
	ln := set.listener(b.t)
	store := b.Node.AddBroker(id, "127.0.0.1", ln.Addr().(*net.TCPAddr).Port)
	return build(b.t, id, b.Node, store, set)
}

func newSettings(t testing.TB, opts []Option) settings {
	set := settings{quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&set)
	}
	if set.dir == "" {
		set.dir = t.TempDir()
	}
	return set
}

// listener is the settings' listener, or a fresh loopback one.
func (s *settings) listener(t testing.TB) net.Listener {
	t.Helper()
	if s.ln == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("brokertest: %v", err)
		}
		s.ln = ln
	}
	return s.ln
}

// build runs broker id over store, serving on set.ln, and stops it at t's cleanup.
func build(t testing.TB, id int32, node *controllertest.Node, store broker.Store, set settings) *Broker {
	t.Helper()
	ln := set.ln
	set.ln = nil // a restart binds again
	opts := broker.Options{
		NodeID:        id,
		Replication:   replication.Config{LogDir: set.dir},
		Listeners:     []broker.Listener{{Listener: ln, Config: protocol.Listener{SecurityProtocol: protocol.ProtocolPlaintext}}},
		Logger:        set.quiet,
		ShutdownGrace: ShutdownGrace,
	}
	for _, fn := range set.tune {
		fn(&opts)
	}
	opts.NodeID, opts.Replication.LogDir = id, set.dir
	bk, err := broker.New(store, opts)
	if err != nil {
		ln.Close()
		t.Fatalf("brokertest: broker %d: %v", id, err)
	}
	bk.Serve(context.Background())
	b := &Broker{Broker: bk, ID: id, Addr: ln.Addr().String(), Dir: set.dir, Store: store, Node: node, t: t, set: set}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("brokertest: close broker %d: %v", id, err)
		}
	})
	return b
}

// Close stops the broker; its registration with the quorum and the quorum stay (a
// broker whose process stalls, as far as the controller can tell, until the session
// expires). It is safe to call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	return b.Broker.Close()
}

// Reopen starts the broker again after Close (closing it first if need be), on the
// same log directory, registration and address: bound again, the old socket may linger
// for a moment, unless an option gives a listener. opts apply on top of the broker's
// own.
func (b *Broker) Reopen(opts ...Option) *Broker {
	b.t.Helper()
	if err := b.Close(); err != nil {
		b.t.Errorf("brokertest: close broker %d: %v", b.ID, err)
	}
	set := b.set
	set.tune = append([]func(*broker.Options){}, set.tune...)
	for _, o := range opts {
		o(&set)
	}
	if set.ln == nil {
		set.ln = listenRetrying(b.t, b.Addr)
	}
	return build(b.t, b.ID, b.Node, b.Store, set)
}

// Restart stops broker 1 and its quorum and starts both again on the same directories,
// as a restarted single-node process does; the broker serves on a new port. opts apply
// on top of the broker's own (WithOptions after the earlier ones). b must not be used
// afterwards.
func (b *Broker) Restart(opts ...Option) *Broker {
	b.t.Helper()
	if b.ID != controllertest.BrokerID {
		b.t.Fatalf("brokertest: Restart restarts the quorum with broker %d, not broker %d", controllertest.BrokerID, b.ID)
	}
	if err := b.Close(); err != nil {
		b.t.Errorf("brokertest: close broker %d: %v", b.ID, err)
	}
	set := b.set
	set.tune = append([]func(*broker.Options){}, set.tune...)
	for _, o := range opts {
		o(&set)
	}
	ln := set.listener(b.t)
	node := b.Node.Restart(controllertest.WithAdvertised("127.0.0.1", ln.Addr().(*net.TCPAddr).Port))
	return build(b.t, b.ID, node, node.Broker, set)
}

// listenRetrying binds addr, retrying for a second while the old listener lets go.
func listenRetrying(t testing.TB, addr string) net.Listener {
	t.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("brokertest: %v", err)
	return nil
}

// Client returns a client seeded with the broker, closed at the test's cleanup.
func (b *Broker) Client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.RetryTimeout(5 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.t.Fatalf("brokertest: %v", err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

// WaitApplied waits until the broker's replica manager has applied an image for which
// cond holds, failing the test after 10 seconds: an admin call returns once the
// controller has committed a change, and the broker learns of it a moment later, as in
// Kafka.
func (b *Broker) WaitApplied(what string, cond func(*metadata.Image) bool) *metadata.Image {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !b.Replicas().WaitApplied(ctx, cond) {
		b.t.Fatalf("brokertest: timed out waiting for %s", what)
	}
	return b.Replicas().Image()
}
