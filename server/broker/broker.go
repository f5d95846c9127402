// Package broker assembles the broker side of a Shale node: the replica manager,
// producer-id allocation, the share-partition manager, the group coordinator (which also
// coordinates share groups), the transaction coordinator with its KIP-890 verifier
// installed in the replica manager, and the Kafka protocol server over all of them.
//
// It exists so that there is one assembly. The node (package server) and the test
// harnesses of protocol, replication and the fuzz targets used to each wire these
// layers by hand, in their own order, and each copy drifted: a harness that forgot the
// verifier, or closed the replica manager before the listener had drained, tested a
// broker production never runs. New builds them in one order and Close stops them in the
// reverse one; what differs between the node and a test (settings, listeners, logger,
// metrics registry, which coordinators run) is an Option, never a second wiring.
//
// The package knows nothing of the controller or of the node: it takes the broker's
// client of the quorum as a Store, and the node translates its configuration into
// Options (internal/layering enforces both). brokertest runs it on a real in-memory
// controller for tests.
package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/coordinator/txn/producerid"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/replication/share"
)

// Store is what a broker needs from the controller quorum: the metadata store, the
// transaction state, the share-partition state and the remote logs of tiered storage
// (controller.BrokerClient).
type Store interface {
	metadata.Store
	metadata.TxnStore
	share.AdminStore
	metadata.RemoteLogStore
}

// DefaultShutdownGrace is how long Close lets in-flight requests finish when
// Options.ShutdownGrace is zero.
const DefaultShutdownGrace = 10 * time.Second

// Listener is one socket the broker serves Kafka clients on, with its listener settings
// (name, security protocol, TLS).
type Listener struct {
	Listener net.Listener
	Config   protocol.Listener
}

// Options are what differs between one broker and another: the node fills them from its
// configuration, a test from what it exercises.
type Options struct {
	// NodeID is the broker's node.id. A component config below that names another
	// (non-zero) node is an error; one that names none gets this one.
	NodeID int32
	// Replication configures the replica manager (LogDir is required).
	Replication replication.Config
	// Protocol configures the Kafka protocol server. Metrics default to Registry's.
	Protocol protocol.Config
	// Groups configures the group coordinator; nil runs none (the group APIs are then
	// not advertised).
	Groups *group.Config
	// ShareGroups configures the share-group coordinator (KIP-932), which runs beside the
	// group coordinator (one namespace of group ids) whenever Groups is set; nil gives it
	// Kafka's defaults. With Shares set, its States and MemberRemoved default to the
	// share-partition manager's.
	ShareGroups *sharegroup.Config
	// Txn configures the transaction coordinator; nil runs none (the transaction APIs
	// are then not advertised).
	Txn *txn.Config
	// Shares configures the share-partition manager; nil runs none (ShareFetch and
	// ShareAcknowledge are then not advertised).
	Shares *share.Config
	// InterBroker are the client options (TLS, SASL) for connections to other brokers:
	// the follower fetchers' (unless Replication.FetcherOpts is set) and the transaction
	// coordinator's, which writes markers and asks leaders.
	InterBroker []kgo.Opt
	// Listeners are served by Serve, and owned by the broker from New's success on.
	Listeners []Listener
	// Registry, when set, receives the replica manager's (unless Replication.Registry
	// is set), the protocol server's (unless Protocol.Metrics is set) and the group
	// coordinator's lag metrics.
	Registry prometheus.Registerer
	// Logger defaults each component's logger. Nil discards.
	Logger *slog.Logger
	// ShutdownGrace bounds how long Close lets in-flight requests finish.
	ShutdownGrace time.Duration
}

// Broker is a running broker: its replicas, coordinators and protocol server.
type Broker struct {
	opts Options
	lg   *slog.Logger

	replicas   *replication.Manager
	pids       *producerid.Allocator
	shares     *share.Manager
	groups     *group.Coordinator
	shareGroup *sharegroup.Coordinator
	txn        *txn.Coordinator
	txnClients *txn.BrokerClients
	// txnVerifier is the KIP-890 verifier over txn, nil without it.
	txnVerifier *txn.Verifier
	kafka       *protocol.Server

	// stopRun ends the replica manager's metadata loop; ran is closed once it returned.
	stopRun context.CancelFunc
	ran     chan struct{}

	mu      sync.Mutex
	served  bool
	closed  bool
	serving sync.WaitGroup
}

// New builds a broker over store and starts its background work: the replica manager
// follows metadata from here on, and the coordinators follow the images they need. It
// does not serve the listeners yet (Serve does). On error nothing is left running and
// the caller still owns opts.Listeners; store is never closed by the broker, whose
// caller owns it (a node ends its registration after the broker has stopped; a test may
// keep it across a restart of the broker).
func New(store Store, opts Options) (_ *Broker, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if err := opts.setNodeID(); err != nil {
		return nil, err
	}
	lg := opts.Logger
	b := &Broker{opts: opts, lg: lg}
	defer func() {
		if err != nil {
			b.shutdown()
		}
	}()

	rcfg := opts.Replication
	if rcfg.Logger == nil {
		rcfg.Logger = lg
	}
	if rcfg.Registry == nil {
		rcfg.Registry = opts.Registry
	}
	if rcfg.FetcherOpts == nil {
		rcfg.FetcherOpts = opts.InterBroker
	}
	if rcfg.RemoteStore != nil && rcfg.RemoteLogs == nil {
		// Tiered storage's remote logs are recorded through the controller quorum.
		rcfg.RemoteLogs = store
	}
	if b.replicas, err = replication.NewManager(rcfg, store); err != nil {
		return nil, fmt.Errorf("replica manager: %w", err)
	}
	// The replica manager follows metadata until Close, not until whatever stops the
	// listeners: a controlled shutdown still needs the leadership changes it triggers
	// applied.
	rctx, stop := context.WithCancel(context.Background())
	b.stopRun, b.ran = stop, make(chan struct{})
	go func() {
		defer close(b.ran)
		b.replicas.Run(rctx)
	}()

	b.pids = producerid.New(store)
	if opts.Shares != nil {
		scfg := *opts.Shares
		if scfg.Logger == nil {
			scfg.Logger = lg.With("component", "share")
		}
		// Share-group state is committed through the controller quorum.
		b.shares = share.NewManager(scfg, store, b.replicas)
	}
	if opts.Groups != nil {
		gcfg := *opts.Groups
		if gcfg.Logger == nil {
			gcfg.Logger = lg
		}
		b.groups = group.New(gcfg, store)
		var sgcfg sharegroup.Config
		if opts.ShareGroups != nil {
			sgcfg = *opts.ShareGroups
		}
		sgcfg.NodeID = opts.NodeID
		if sgcfg.Logger == nil {
			sgcfg.Logger = lg
		}
		if b.shares != nil {
			// The share-group admin APIs read what the share partitions hold, and a
			// member leaving releases its acquired records.
			if sgcfg.States == nil {
				sgcfg.States = share.NewStates(b.shares, store)
			}
			if sgcfg.MemberRemoved == nil {
				sgcfg.MemberRemoved = b.shares.MemberRemoved
			}
		}
		// The two coordinators ask each other before a group takes an id.
		sgcfg.Classic = b.groups
		b.shareGroup = sharegroup.New(sgcfg, store)
		b.groups.SetShareGroups(b.shareGroup)
		if opts.Registry != nil {
			if err := opts.Registry.Register(b.shareGroup.Collector()); err != nil {
				return nil, fmt.Errorf("share-group metrics: %w", err)
			}
		}
		if opts.Registry != nil {
			parts := b.replicas.Partitions()
			lag := b.groups.LagCollector(func(topic string, index int32) (int64, bool) {
				// Only leaders: every (group, partition) series then comes from one broker.
				p := parts.Get(topic, index)
				if p == nil || p.Role() != partition.RoleLeader {
					return 0, false
				}
				return p.HighWatermark(), true
			})
			if err := opts.Registry.Register(lag); err != nil {
				return nil, fmt.Errorf("group lag metrics: %w", err)
			}
		}
	}
	if opts.Txn != nil {
		tcfg := *opts.Txn
		if tcfg.Logger == nil {
			tcfg.Logger = lg
		}
		b.txnClients = txn.NewBrokerClients(opts.NodeID, opts.InterBroker...)
		b.txn = txn.New(tcfg, store, b.pids, b.txnClients)
		// Partition leaders check a producer's first transactional write with it
		// (KIP-890), and with transactions v2 add through it, as group coordinators add
		// groups for TxnOffsetCommit v5.
		b.txnVerifier = &txn.Verifier{Coordinator: b.txn, Remote: b.txnClients}
		b.replicas.SetTxnVerifier(b.txnVerifier)
	}

	pcfg := opts.Protocol
	if pcfg.Logger == nil {
		pcfg.Logger = lg
	}
	if pcfg.Metrics == nil && opts.Registry != nil {
		pcfg.Metrics = protocol.NewMetrics(opts.Registry)
	}
	b.kafka = protocol.NewServer(pcfg, protocol.Deps{
		Meta:        store,
		Replicas:    b.replicas,
		ProducerIDs: b.pids,
		Shares:      b.shares,
		Groups:      b.groups,
		ShareGroups: b.shareGroup,
		Txn:         b.txn,
		TxnVerifier: b.txnVerifier,
	})
	return b, nil
}

// setNodeID gives every component config the broker's node id.
func (o *Options) setNodeID() error {
	ids := []*int32{&o.Replication.NodeID, &o.Protocol.NodeID}
	if o.Groups != nil {
		g := *o.Groups
		o.Groups = &g
		ids = append(ids, &g.NodeID)
	}
	if o.Txn != nil {
		t := *o.Txn
		o.Txn = &t
		ids = append(ids, &t.NodeID)
	}
	for _, id := range ids {
		if *id != 0 && *id != o.NodeID {
			return fmt.Errorf("broker: a component is configured as node %d, the broker is node %d", *id, o.NodeID)
		}
		*id = o.NodeID
	}
	return nil
}

// Serve accepts Kafka clients on the Options' listeners, each until ctx is done or the
// broker closes. It returns at once; a listener that fails is logged.
func (b *Broker) Serve(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.served || b.closed {
		return
	}
	b.served = true
	for _, l := range b.opts.Listeners {
		b.serving.Add(1)
		go func() {
			defer b.serving.Done()
			if err := b.kafka.ServeListener(ctx, l.Listener, l.Config); err != nil && !errors.Is(err, net.ErrClosed) {
				b.lg.Error("Kafka listener stopped", "listener", l.Config.Name, "err", err)
			}
			// A listener the server refused (closing already, or a bad TLS setting) is
			// still open.
			l.Listener.Close()
		}()
	}
}

// Replicas is the replica manager.
func (b *Broker) Replicas() *replication.Manager { return b.replicas }

// ProducerIDs is the producer-id allocator.
func (b *Broker) ProducerIDs() *producerid.Allocator { return b.pids }

// Shares is the share-partition manager, nil without Options.Shares.
func (b *Broker) Shares() *share.Manager { return b.shares }

// Groups is the group coordinator, nil without Options.Groups.
func (b *Broker) Groups() *group.Coordinator { return b.groups }

// ShareGroups is the share-group coordinator, nil without Options.Groups.
func (b *Broker) ShareGroups() *sharegroup.Coordinator { return b.shareGroup }

// Txn is the transaction coordinator, nil without Options.Txn.
func (b *Broker) Txn() *txn.Coordinator { return b.txn }

// Protocol is the Kafka protocol server.
func (b *Broker) Protocol() *protocol.Server { return b.kafka }

// Close stops the broker in the reverse of New's order; it is safe to call more than
// once. The order matters because each layer is used by the ones built after it:
//
//  1. The group coordinator first, so that JoinGroup and SyncGroup calls parked for a
//     rebalance are answered (NOT_COORDINATOR: clients move to the next coordinator)
//     instead of holding their connections past the shutdown grace.
//  2. The transaction coordinator, then its connections to other brokers, which it
//     writes markers over while it runs. Transactions left half-way are completed by
//     the next coordinator.
//  3. The protocol server: it stops accepting and lets in-flight requests finish within
//     the grace. They still use the share partitions and the replicas.
//  4. The share-partition manager, which reads and appends through the replica manager.
//  5. The replica manager last: it stops following metadata, stops its fetchers and
//     closes every log with its clean-shutdown marker, once nothing above can append.
//
// The Store is not closed (see New). A node's controlled shutdown, which needs the
// replica manager running, comes before Close.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	served := b.served
	b.mu.Unlock()
	if !served {
		// Never handed to the protocol server, which closes only those it serves.
		for _, l := range b.opts.Listeners {
			l.Listener.Close()
		}
	}
	return b.shutdown()
}

// shutdown is Close without the listeners Serve never took; New calls it on a partial
// broker.
func (b *Broker) shutdown() error {
	var errs []error
	if b.shareGroup != nil {
		errs = append(errs, b.shareGroup.Close())
	}
	if b.groups != nil {
		errs = append(errs, b.groups.Close())
	}
	if b.txn != nil {
		errs = append(errs, b.txn.Close())
	}
	if b.txnClients != nil {
		b.txnClients.Close()
	}
	if b.kafka != nil {
		b.kafka.Close(b.opts.ShutdownGrace)
	}
	b.serving.Wait()
	if b.shares != nil {
		errs = append(errs, b.shares.Close())
	}
	if b.replicas != nil {
		b.stopRun()
		errs = append(errs, b.replicas.Close())
		<-b.ran
	}
	return errors.Join(errs...)
}
