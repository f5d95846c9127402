// Package server assembles a Shale node from its configuration: the controller (a voter
// of the Raft quorum) and the broker's client of it, the replica manager, the Kafka
// protocol listener and the HTTP listener for metrics and health, and shuts them down
// in order. The broker side (replicas, coordinators, protocol server) is built by
// server/broker, which the tests build too; the node translates its configuration into
// broker.Options and owns what only a process has (listeners, controlled shutdown).
//
// It is a top-level directory because node assembly is the one place that knows every
// layer: it imports the controller, the data plane, the coordinators and the protocol
// handlers, and nothing but cmd imports it (internal/layering enforces both directions).
// What only a running node needs lives beneath it: its settings (config), the lock on
// its data directory (datadir), the cluster-wide metrics series (exporter), and the
// HTTP services every broker serves beside the Kafka listener (schemaregistry and
// restproxy).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/protocol/telemetry"
	"github.com/shalelog/shale/replication"
	"github.com/shalelog/shale/replication/share"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/config"
	"github.com/shalelog/shale/server/console"
	"github.com/shalelog/shale/server/datadir"
	"github.com/shalelog/shale/server/exporter"
	"github.com/shalelog/shale/server/restproxy"
	"github.com/shalelog/shale/server/schemaregistry"
	"github.com/shalelog/shale/tiered/remotelog"
)

// shutdownGrace is how long in-flight requests may take to finish on SIGTERM.
const shutdownGrace = 10 * time.Second

// Run starts a node and blocks until ctx is cancelled, then shuts it down cleanly:
// stop accepting, finish in-flight requests, close every log with its clean marker.
func Run(ctx context.Context, cfg *config.Config) error {
	lg := slog.Default()
	for _, w := range cfg.Warnings {
		lg.Warn("configuration", "warning", w)
	}
	// Every port first: a port in use fails the start at once, before the data
	// directory is created, locked or bootstrapped as a new quorum.
	lns, err := bind(cfg, lg)
	if err != nil {
		return err
	}
	defer lns.close() // those not handed over
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	// Before anything opens a file in the directory: a second process would otherwise
	// block for ever on the Raft store's lock, silently.
	lock, err := datadir.Acquire(cfg.LogDir)
	if err != nil {
		return err
	}
	defer lock.Release()
	sec, err := newNodeSecurity(cfg, lg)
	if err != nil {
		return err
	}
	n := &node{cfg: cfg, lg: lg, reg: prometheus.NewRegistry(), sec: sec}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	defer n.close()
	if err := n.start(ctx, lns); err != nil {
		return err
	}
	<-ctx.Done()
	lg.Info("shutting down")
	return n.close()
}

type node struct {
	cfg *config.Config
	lg  *slog.Logger
	reg *prometheus.Registry
	sec *nodeSecurity

	controller *controller.Server
	store      metadata.Store
	// registered is store once the broker has registered: /readyz reads it from HTTP
	// goroutines that start before the broker does.
	registered atomic.Pointer[controller.BrokerClient]
	// broker is the broker side: replicas, coordinators and the Kafka listeners.
	broker *broker.Broker
	// remoteCache is tiered storage's read cache, closed after the broker.
	remoteCache *remotelog.ChunkCache
	// probed is the broker's replica manager for /readyz, whose handler runs before
	// startBroker sets broker.
	probed atomic.Pointer[replication.Manager]
	http   *http.Server
	// console is the web console on the HTTP listener (nil when off).
	console *console.Console
	// registryDone is closed once the schema registry's listener has shut down.
	registryDone chan struct{}
	// stopProxy stops the REST proxy, whose Kafka client needs the Kafka listener
	// still up to finish its requests; proxyDone is closed once it has stopped.
	stopProxy context.CancelFunc
	proxyDone chan struct{}

	cancel context.CancelFunc
	closed bool
}

// listeners are a node's bound sockets, until start hands each to what serves it.
type listeners struct {
	kafka, controller, http net.Listener
	// registry is schema.registry.listener's, on brokers.
	registry net.Listener
	// proxy is rest.proxy.listener's, on brokers.
	proxy net.Listener
	// others are the broker listeners besides the inter-broker one (kafka), by name.
	others map[string]net.Listener
}

// bind binds every listener the node serves, and records the ports that port-0
// listeners got before they are advertised or registered with the quorum.
func bind(cfg *config.Config, lg *slog.Logger) (*listeners, error) {
	lns := &listeners{}
	listen := func(what, addr string) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			lns.close()
			return nil, fmt.Errorf("listen %s: %w", what, err)
		}
		return ln, nil
	}
	var err error
	if cfg.IsBroker() {
		host, port := cfg.KafkaListener()
		if lns.kafka, err = listen("for Kafka clients", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return nil, err
		}
		cfg.SetBoundPort(cfg.InterBrokerListenerName, lns.kafka.Addr().(*net.TCPAddr).Port)
		for _, l := range cfg.BrokerListeners() {
			if l.Name == cfg.InterBrokerListenerName {
				continue
			}
			ln, err := listen("on listener "+l.Name, l.Addr())
			if err != nil {
				return nil, err
			}
			if lns.others == nil {
				lns.others = map[string]net.Listener{}
			}
			lns.others[l.Name] = ln
			cfg.SetBoundPort(l.Name, ln.Addr().(*net.TCPAddr).Port)
		}
	}
	if cfg.IsController() {
		host, port := cfg.ControllerListener()
		if lns.controller, err = listen("on the controller listener", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return nil, err
		}
		name := cfg.ControllerListenerNames[0]
		cfg.SetBoundPort(name, lns.controller.Addr().(*net.TCPAddr).Port)
		if cfg.DerivedControllerListener() {
			lg.Info("no controller listener configured and this node alone is the quorum: using a loopback one",
				"listener", name+"://"+lns.controller.Addr().String())
		}
	}
	if cfg.HTTPListener != "" {
		if lns.http, err = listen("on http.listener", cfg.HTTPListener); err != nil {
			return nil, err
		}
	}
	if cfg.IsBroker() && cfg.SchemaRegistryListener != "" {
		if lns.registry, err = listen("on schema.registry.listener", cfg.SchemaRegistryListener); err != nil {
			return nil, err
		}
	}
	if cfg.IsBroker() && cfg.RESTProxyListener != "" {
		if lns.proxy, err = listen("on rest.proxy.listener", cfg.RESTProxyListener); err != nil {
			return nil, err
		}
	}
	return lns, nil
}

// close closes the listeners not yet handed over.
func (l *listeners) close() {
	for _, ln := range []*net.Listener{&l.kafka, &l.controller, &l.http, &l.registry, &l.proxy} {
		if *ln != nil {
			(*ln).Close()
			*ln = nil
		}
	}
	for name, ln := range l.others {
		ln.Close()
		delete(l.others, name)
	}
}

func (n *node) start(parent context.Context, lns *listeners) error {
	ctx, cancel := context.WithCancel(parent)
	n.cancel = cancel
	cfg := n.cfg
	if lns.controller != nil {
		ln := lns.controller
		lns.controller = nil
		if err := n.startController(ctx, ln); err != nil {
			return err
		}
	}
	if lns.http != nil {
		ln := lns.http
		lns.http = nil
		if err := n.startHTTP(ctx, ln); err != nil {
			return err
		}
	}
	if !cfg.IsBroker() {
		return nil
	}
	if err := n.startBroker(ctx, lns.kafka, lns.others); err != nil {
		return err // lns.kafka is still set: Run closes it
	}
	lns.kafka, lns.others = nil, nil
	if lns.registry != nil {
		ln := lns.registry
		if err := n.startRegistry(ctx, ln); err != nil {
			return err // ln is still set: Run closes it
		}
		lns.registry = nil
	}
	if lns.proxy != nil {
		ln := lns.proxy
		lns.proxy = nil
		if err := n.startRESTProxy(ctx, ln); err != nil {
			return err
		}
	}
	return nil
}

// startController starts the controller on ln and owns it from then on.
func (n *node) startController(ctx context.Context, ln net.Listener) error {
	cfg := n.cfg
	var voters []controller.Voter
	for _, v := range cfg.Voters() {
		voters = append(voters, controller.Voter{ID: v.ID, Addr: v.Addr()})
	}
	// controller.Config takes 0 for its default and a negative value for Kafka's 0.
	imbalancePct := cfg.LeaderImbalancePerBrokerPercentage
	if imbalancePct == 0 {
		imbalancePct = -1
	}
	c, err := controller.NewServer(controller.Config{
		NodeID:                             cfg.NodeID,
		Voters:                             voters,
		BootstrapServers:                   cfg.ControllerQuorumBootstrapServers,
		BootstrapTLS:                       n.sec.controllerClientTLS(),
		Address:                            joiningAddress(cfg, ln),
		Listener:                           ln,
		GRPCTLS:                            n.sec.controllerServerTLS(),
		ServeKafkaClients:                  cfg.IsBroker() && plaintextListener(cfg) != "",
		DataDir:                            filepath.Join(cfg.LogDir, "__cluster_metadata"),
		SessionTimeout:                     cfg.BrokerSessionTimeout(),
		DefaultPartitions:                  cfg.NumPartitions,
		DefaultReplicationFactor:           cfg.DefaultReplicationFactor,
		UncleanLeaderElection:              cfg.UncleanLeaderElectionEnable,
		RemoteLogStorageSystemEnable:       cfg.RemoteStorage.SystemEnable,
		TopicDefaults:                      cfg.TopicDefaults(),
		OffsetsTopicNumPartitions:          cfg.OffsetsTopicNumPartitions,
		DisableAutoLeaderRebalance:         !cfg.AutoLeaderRebalanceEnable,
		LeaderImbalanceCheckInterval:       time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second,
		LeaderImbalancePerBrokerPercentage: imbalancePct,
		Logger:                             n.lg,
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("controller: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		ln.Close() // Close leaves a listener that Start did not take over
		return fmt.Errorf("start controller: %w", err)
	}
	n.controller = c
	n.reg.MustRegister(c.Collector(), exporter.ControllerCollector(c))
	n.lg.Info("controller started", "listener", ln.Addr().String(), "voters", len(voters))
	return nil
}

func (n *node) startBroker(ctx context.Context, ln net.Listener, others map[string]net.Listener) error {
	cfg := n.cfg
	ipOverrides, err := protocol.ParseConnectionOverrides(cfg.MaxConnectionsPerIPOverrides)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	host, port := cfg.AdvertisedKafka()
	// controller.quorum.bootstrap.servers come first, as in Kafka; the broker follows the
	// voters the quorum reports from then on.
	addrs := slices.Clone(cfg.ControllerQuorumBootstrapServers)
	for _, v := range cfg.Voters() {
		if !slices.Contains(addrs, v.Addr()) {
			addrs = append(addrs, v.Addr())
		}
	}
	n.lg.Info("registering with the controller quorum", "controllers", addrs)
	store, err := controller.NewBrokerClient(ctx, controller.BrokerConfig{
		NodeID:            cfg.NodeID,
		Host:              host,
		Port:              int32(port),
		Rack:              cfg.BrokerRack,
		ListenerName:      cfg.InterBrokerListenerName,
		SecurityProtocol:  cfg.SecurityProtocol(cfg.InterBrokerListenerName),
		OtherListeners:    otherEndpoints(cfg),
		TLS:               n.sec.controllerClientTLS(),
		ControllerAddrs:   addrs,
		HeartbeatInterval: cfg.BrokerHeartbeatInterval(),
		SessionTimeout:    cfg.BrokerSessionTimeout(),
		Logger:            n.lg,
	})
	if err != nil {
		return fmt.Errorf("register broker: %w", err)
	}
	n.store = store
	n.registered.Store(store)

	selector, err := replication.ParseReplicaSelector(cfg.ReplicaSelectorClass)
	if err != nil {
		return fmt.Errorf("replica.selector.class: %w", err)
	}

	brokerConfigs := map[string]string{}
	for _, s := range cfg.Settings() {
		brokerConfigs[s.Key] = s.Value
	}
	lns := []broker.Listener{{Listener: ln, Config: n.sec.listener(cfg.InterBrokerListenerName)}}
	for name, l := range others {
		lns = append(lns, broker.Listener{Listener: l, Config: n.sec.listener(name)})
	}
	// A client given the controller's address is served too, as if it had come in on a
	// PLAINTEXT listener (only when there is one, so that the controller port is no way
	// around authentication): the Metadata answer moves it to that listener.
	if n.controller != nil {
		if cln := n.controller.KafkaListener(); cln != nil {
			lns = append(lns, broker.Listener{Listener: cln, Config: n.sec.listener(plaintextListener(cfg))})
		}
	}
	rcfg := replicationConfig(cfg, selector)
	remoteStore, remoteCache, err := n.remoteStorage(cfg)
	if err != nil {
		return fmt.Errorf("tiered storage: %w", err)
	}
	if remoteStore != nil {
		rcfg.RemoteStore, rcfg.RemoteSource = remoteStore, remoteCache
		n.remoteCache = remoteCache
	}
	b, err := broker.New(store, broker.Options{
		NodeID:      cfg.NodeID,
		Replication: rcfg,
		Protocol: protocol.Config{
			TransactionVersion:           cfg.TransactionVersion,
			MaxRequestBytes:              cfg.SocketRequestMaxBytes,
			QueuedMaxRequests:            int(cfg.QueuedMaxRequests),
			QueuedMaxRequestBytes:        cfg.QueuedMaxRequestBytes,
			ConnectionsMaxIdle:           time.Duration(cfg.ConnectionsMaxIdleMs) * time.Millisecond,
			DisableSendfile:              !cfg.FetchSendfileEnable,
			MaxConnections:               int(cfg.MaxConnections),
			MaxConnectionsPerIP:          int(cfg.MaxConnectionsPerIP),
			MaxConnectionsPerIPOverrides: ipOverrides,
			QuotaWindowNum:               int(cfg.QuotaWindowNum),
			QuotaWindowSize:              time.Duration(cfg.QuotaWindowSizeSeconds) * time.Second,
			AutoCreateTopics:             cfg.AutoCreateTopicsEnable,
			DeleteTopicEnable:            cfg.DeleteTopicEnable,
			FetchSessionSlots:            fetchSessionSlots(cfg.MaxIncrementalFetchSessionCacheSlots),
			DefaultPartitions:            cfg.NumPartitions,
			DefaultReplicationFactor:     cfg.DefaultReplicationFactor,
			TopicDefaults:                cfg.TopicDefaults(),
			BrokerConfigs:                brokerConfigs,
			Authorizer:                   cfg.Authorizer(),
			Auth:                         n.sec.auth(),
			Telemetry: telemetry.New(telemetry.Config{MaxBytes: cfg.TelemetryMaxBytes, MaxSeries: telemetryMaxSeries(cfg.TelemetryMaxSeries),
				Logger: n.lg}, n.reg),
		},
		Groups: &group.Config{
			InitialRebalanceDelay:     cfg.GroupInitialRebalanceDelay(),
			MinSessionTimeout:         time.Duration(cfg.GroupMinSessionTimeoutMs) * time.Millisecond,
			MaxSessionTimeout:         time.Duration(cfg.GroupMaxSessionTimeoutMs) * time.Millisecond,
			OffsetsRetention:          cfg.OffsetsRetention(),
			OffsetMetadataMaxBytes:    int(cfg.OffsetMetadataMaxBytes),
			ConsumerAssignors:         cfg.GroupConsumerAssignors,
			ConsumerSessionTimeout:    time.Duration(cfg.GroupConsumerSessionTimeoutMs) * time.Millisecond,
			ConsumerHeartbeatInterval: time.Duration(cfg.GroupConsumerHeartbeatIntervalMs) * time.Millisecond,
			ConsumerMaxGroupSize:      int(cfg.GroupConsumerMaxSize),
			ConsumerMigrationPolicy:   cfg.GroupConsumerMigrationPolicy,
		},
		ShareGroups: &sharegroup.Config{
			SessionTimeout:    time.Duration(cfg.GroupShareSessionTimeoutMs) * time.Millisecond,
			HeartbeatInterval: time.Duration(cfg.GroupShareHeartbeatIntervalMs) * time.Millisecond,
			MaxGroupSize:      int(cfg.GroupShareMaxSize),
		},
		Txn: &txn.Config{
			MaxTimeout:            time.Duration(cfg.TransactionMaxTimeoutMs) * time.Millisecond,
			IDExpiration:          time.Duration(cfg.TransactionalIDExpirationMs) * time.Millisecond,
			AbortTimedOutInterval: time.Duration(cfg.TransactionAbortTimedOutTransactionCleanupIntervalMs) * time.Millisecond,
			RemoveExpiredInterval: time.Duration(cfg.TransactionRemoveExpiredTransactionCleanupIntervalMs) * time.Millisecond,
		},
		Shares: &share.Config{
			Limits: share.Limits{
				LockDuration:   time.Duration(cfg.GroupShareRecordLockDurationMs) * time.Millisecond,
				DeliveryLimit:  int(cfg.GroupShareDeliveryCountLimit),
				MaxRecordLocks: int(cfg.GroupSharePartitionMaxRecordLocks),
			},
			AutoOffsetReset: cfg.ShareAutoOffsetReset,
		},
		InterBroker:   n.sec.fetcherOpts(),
		Listeners:     lns,
		Registry:      n.reg,
		Logger:        n.lg,
		ShutdownGrace: shutdownGrace,
	})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	n.broker = b
	n.probed.Store(b.Replicas())
	b.Serve(ctx)
	n.lg.Info("serving Kafka clients", "listener", ln.Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(port)), "node_id", cfg.NodeID, "log_dir", cfg.LogDir)
	return nil
}

// replicationConfig is the replica manager's part of cfg. The node id, logger, registry
// and inter-broker client options are set by broker.New from its Options.
func replicationConfig(cfg *config.Config, selector replication.ReplicaSelector) replication.Config {
	return replication.Config{
		LogDir:                 cfg.LogDir,
		TopicDefaults:          cfg.TopicDefaults(),
		RetentionCheckInterval: cfg.LogRetentionCheckInterval(),
		ReplicaLagTimeMax:      time.Duration(cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		NumReplicaFetchers:     int(cfg.NumReplicaFetchers),
		RecoveryThreads:        int(cfg.NumRecoveryThreadsPerDataDir),
		MaxMappedSegments:      int(cfg.LogMappedSegmentsMax),
		ReplicaFetchWaitMax:    time.Duration(cfg.ReplicaFetchWaitMaxMs) * time.Millisecond,
		ReplicaFetchBackoff:    time.Duration(cfg.ReplicaFetchBackoffMs) * time.Millisecond,
		ReplicaFetchMaxBytes:   cfg.ReplicaFetchMaxBytes,
		HWCheckpointInterval:   time.Duration(cfg.ReplicaHighWatermarkCheckpointIntervalMs) * time.Millisecond,
		// Schema ID validation's record name strategies name records as the registry
		// parses schemas; the registry's state itself comes from this broker's image.
		RecordNamer: schemaregistry.NewRecordNames(),

		CleanerDisabled:            !cfg.LogCleanerEnable,
		CleanerThreads:             int(cfg.LogCleanerThreads),
		CleanerDedupeBufferSize:    cfg.LogCleanerDedupeBufferSize,
		CleanerIOMaxBytesPerSecond: cfg.LogCleanerIOMaxBytesPerSecond,
		CleanerBackoff:             time.Duration(cfg.LogCleanerBackoffMs) * time.Millisecond,

		ProducerIDExpiration:              time.Duration(cfg.ProducerIDExpirationMs) * time.Millisecond,
		ProducerIDExpirationCheckInterval: time.Duration(cfg.ProducerIDExpirationCheckIntervalMs) * time.Millisecond,

		ReplicaSelector: selector,

		LeaderReplicationThrottledRate:   cfg.LeaderReplicationThrottledRate,
		FollowerReplicationThrottledRate: cfg.FollowerReplicationThrottledRate,

		// Tiered storage's timing; RemoteStore (the S3 store of remote.storage.s3.*) is
		// set where the store is built, when remote.log.storage.system.enable is on.
		RemoteTaskInterval:   time.Duration(cfg.RemoteStorage.TaskIntervalMs) * time.Millisecond,
		RemoteRequestTimeout: time.Duration(cfg.RemoteStorage.RequestTimeoutMs) * time.Millisecond,
		// KIP-405's remote log reader pool.
		RemoteLogReaderThreads:         int(cfg.RemoteStorage.ReaderThreads),
		RemoteLogReaderMaxPendingTasks: int(cfg.RemoteStorage.ReaderMaxPendingTasks),
		RemoteFetchMaxWait:             time.Duration(cfg.RemoteStorage.FetchMaxWaitMs) * time.Millisecond,
	}
}

// plaintextListener names the broker listener the controller port's Kafka clients are
// served as: the inter-broker one when it is PLAINTEXT, else the first PLAINTEXT one;
// "" when every broker listener is secured.
func plaintextListener(cfg *config.Config) string {
	if cfg.SecurityProtocol(cfg.InterBrokerListenerName) == protocol.ProtocolPlaintext {
		return cfg.InterBrokerListenerName
	}
	for _, l := range cfg.BrokerListeners() {
		if cfg.SecurityProtocol(l.Name) == protocol.ProtocolPlaintext {
			return l.Name
		}
	}
	return ""
}

func (n *node) startHTTP(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	c, err := n.newConsole()
	if err != nil {
		ln.Close()
		return err
	}
	if c != nil {
		n.console = c
		mux.Handle("/", c)
		go c.Run(ctx)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))
	// Profiles for diagnosing the produce and fetch paths; http.listener is loopback by
	// default, so this is not exposed unless the operator chooses to.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !n.cfg.IsBroker() {
			if n.controller == nil {
				http.Error(w, "controller not started", http.StatusServiceUnavailable)
				return
			}
			select {
			case <-n.controller.Removed():
				http.Error(w, "this controller was removed from the quorum", http.StatusServiceUnavailable)
				return
			default:
			}
		} else if bc := n.registered.Load(); bc == nil || !bc.LeaseValid() {
			http.Error(w, "not registered with the controller", http.StatusServiceUnavailable)
			return
		} else if r := n.probed.Load(); r == nil {
			http.Error(w, "replica manager not started", http.StatusServiceUnavailable)
			return
		} else if ok, why := r.InSync(); !ok {
			// Ready only back in every ISR: a rolling restart that waits for this never
			// stops a second in-sync replica of a partition.
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	n.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := n.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.lg.Error("HTTP listener stopped", "err", err)
		}
	}()
	n.lg.Info("serving metrics and health", "listener", ln.Addr().String(), "console", c != nil)
	return nil
}

// controlledShutdownTimeout bounds how long a stopping broker waits for the controller to
// move its leaderships away before it stops anyway.
const controlledShutdownTimeout = 30 * time.Second

// controlledShutdown moves this broker's leaderships to other in-sync replicas before the
// listener closes (Kafka's controlled shutdown), so that producers are told
// NOT_LEADER_OR_FOLLOWER and move on at once instead of timing out on a dead broker: a
// rolling restart keeps every RF>1 partition writable.
// startRegistry serves the schema registry on ln: reads from this broker's metadata
// cache, writes forwarded to the active controller, over HTTPS and with the node's users
// and ACLs as schema.registry.* say. It stops when ctx is cancelled.
func (n *node) startRegistry(ctx context.Context, ln net.Listener) error {
	bc := n.registered.Load()
	lg := n.lg.With("component", "schema-registry")
	sec := n.cfg.SchemaRegistrySecurity
	auth, err := n.sec.httpAuthenticator("schema-registry", sec, bc, "application/vnd.schemaregistry.v1+json", lg)
	if err != nil {
		return fmt.Errorf("schema registry: %w", err)
	}
	if ln, err = n.sec.httpListener(ln, sec); err != nil {
		return fmt.Errorf("schema registry: %w", err)
	}
	srv := schemaregistry.New(schemaregistry.Options{Images: bc, Store: bc, Log: lg,
		Authorizer: n.cfg.Authorizer(), Middleware: auth.Wrap, Metrics: schemaregistry.NewMetrics(n.reg, bc)})
	n.registryDone = make(chan struct{})
	go func() {
		defer close(n.registryDone)
		if err := srv.Serve(ctx, ln); err != nil {
			n.lg.Error("schema registry listener stopped", "err", err)
		}
	}()
	n.lg.Info("serving the schema registry", "listener", ln.Addr().String(), "https", sec.SSLEnable,
		"authentication", sec.AuthenticationMethod)
	return nil
}

// startRESTProxy serves the HTTP proxy on ln, over HTTPS and with the node's users as
// rest.proxy.* say. Its Kafka client dials this node's inter-broker listener as the
// broker itself does (TLS and SASL login included); the HTTP caller is authorized by the
// proxy with the cluster's ACLs. It stops when ctx is
// cancelled or close stops it.
func (n *node) startRESTProxy(ctx context.Context, ln net.Listener) error {
	host, port := n.cfg.KafkaListener()
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	kopts := append([]kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(host, strconv.Itoa(port)))}, n.sec.fetcherOpts()...)
	bc := n.registered.Load()
	lg := n.lg.With("component", "rest-proxy")
	sec := n.cfg.RESTProxySecurity
	auth, err := n.sec.httpAuthenticator("rest-proxy", sec, bc, "application/json", lg)
	if err != nil {
		ln.Close()
		return fmt.Errorf("rest proxy: %w", err)
	}
	tln, err := n.sec.httpListener(ln, sec)
	if err != nil {
		ln.Close()
		return fmt.Errorf("rest proxy: %w", err)
	}
	ln = tln
	srv, err := restproxy.New(restproxy.Options{Images: bc, Kafka: kopts, Authorizer: n.cfg.Authorizer(),
		Registerer: n.reg, Log: lg, Wrap: auth.Wrap, Links: bc})
	if err != nil {
		ln.Close()
		return err
	}
	pctx, stop := context.WithCancel(ctx)
	n.stopProxy = stop
	n.proxyDone = make(chan struct{})
	go func() {
		defer close(n.proxyDone)
		if err := srv.Serve(pctx, ln); err != nil {
			n.lg.Error("rest proxy listener stopped", "err", err)
		}
	}()
	n.lg.Info("serving the REST proxy", "listener", ln.Addr().String(), "https", sec.SSLEnable,
		"authentication", sec.AuthenticationMethod)
	return nil
}

func (n *node) controlledShutdown() {
	bc, ok := n.store.(*controller.BrokerClient)
	if !ok || n.broker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlledShutdownTimeout)
	defer cancel()
	start := time.Now()
	if err := bc.ControlledShutdown(ctx); err != nil {
		n.lg.Warn("controlled shutdown did not finish; stopping anyway", "err", err)
		return
	}
	want := bc.Current().Offset
	n.broker.Replicas().WaitApplied(ctx, func(im *metadata.Image) bool { return im.Offset >= want })
	n.lg.Info("controlled shutdown: leadership moved away", "took", time.Since(start).Round(time.Millisecond))
}

// close shuts everything down in dependency order; safe to call twice.
func (n *node) close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	if n.http != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n.http.Shutdown(sctx)
		cancel()
	}
	if n.stopProxy != nil {
		// Before the Kafka listener closes: requests in flight finish through it.
		n.stopProxy()
		<-n.proxyDone
	}
	if n.console != nil {
		n.console.Close()
	}
	n.controlledShutdown()
	if n.broker != nil {
		// broker.Broker.Close owns the broker's order: coordinators, then the Kafka
		// listeners (in-flight requests finish within the grace), then the replicas.
		errs = append(errs, n.broker.Close())
	}
	if n.remoteCache != nil {
		errs = append(errs, n.remoteCache.Close())
	}
	if n.cancel != nil {
		n.cancel()
	}
	if n.registryDone != nil {
		<-n.registryDone
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if n.controller != nil {
		errs = append(errs, n.controller.Close())
	}
	return errors.Join(errs...)
}

// joiningAddress is the address a controller outside controller.quorum.voters is reached
// at once added: its controller listener, with loopback for a wildcard host (as for a
// single node's derived voter). "" for a voter, unless controller.quorum.bootstrap.servers
// may report a quorum without it.
func joiningAddress(cfg *config.Config, ln net.Listener) string {
	for _, v := range cfg.Voters() {
		if v.ID == cfg.NodeID && len(cfg.ControllerQuorumBootstrapServers) == 0 {
			return ""
		}
	}
	host, _ := cfg.ControllerListener()
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}

// fetchSessionSlots maps Kafka's 0 (no sessions) to the listener's -1.
// telemetryMaxSeries maps telemetry.max.series onto telemetry.Config: 0 exports none.
func telemetryMaxSeries(n int32) int {
	if n == 0 {
		return -1
	}
	return int(n)
}

func fetchSessionSlots(n int32) int {
	if n == 0 {
		return -1
	}
	return int(n)
}
