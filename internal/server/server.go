// Package server assembles a Shale node from its configuration: the metadata store (the
// controller quorum, or its single-node stand-in), the broker's partitions, the Kafka
// protocol listener and the HTTP listener for metrics and health, and shuts them down
// in order.
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
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shalelog/shale/controller"
	"github.com/shalelog/shale/internal/config"
	"github.com/shalelog/shale/internal/datadir"
	"github.com/shalelog/shale/internal/group"
	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/producerid"
	"github.com/shalelog/shale/partition"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/replication"
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
	n := &node{cfg: cfg, lg: lg, reg: prometheus.NewRegistry()}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	defer n.close()
	if err := n.start(ctx); err != nil {
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

	controller *controller.Server
	store      metadata.Store
	replicas   *replication.Manager
	groups     *group.Coordinator
	kafka      *protocol.Server
	http       *http.Server

	cancel       context.CancelFunc
	stopReplicas context.CancelFunc
	serving      chan struct{}
	closed       bool
}

func (n *node) start(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	n.cancel = cancel
	cfg := n.cfg

	// Bind first, so that port-0 listeners are known before they are advertised or
	// registered with the quorum.
	var kafkaLn net.Listener
	if cfg.IsBroker() {
		host, port := cfg.KafkaListener()
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("listen for Kafka clients: %w", err)
		}
		kafkaLn = ln
		cfg.SetBoundPort(cfg.InterBrokerListenerName, ln.Addr().(*net.TCPAddr).Port)
	}
	if cfg.IsController() {
		if err := n.startController(ctx); err != nil {
			if kafkaLn != nil {
				kafkaLn.Close()
			}
			return err
		}
	}
	if cfg.HTTPListener != "" {
		if err := n.startHTTP(); err != nil {
			if kafkaLn != nil {
				kafkaLn.Close()
			}
			return err
		}
	}
	if !cfg.IsBroker() {
		return nil
	}
	if err := n.startBroker(ctx, kafkaLn); err != nil {
		kafkaLn.Close()
		return err
	}
	return nil
}

func (n *node) startController(ctx context.Context) error {
	cfg := n.cfg
	host, port := cfg.ControllerListener()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen on the controller listener: %w", err)
	}
	cfg.SetBoundPort(cfg.ControllerListenerNames[0], ln.Addr().(*net.TCPAddr).Port)
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
		Listener:                           ln,
		DataDir:                            filepath.Join(cfg.LogDir, "__cluster_metadata"),
		SessionTimeout:                     cfg.BrokerSessionTimeout(),
		DefaultPartitions:                  cfg.NumPartitions,
		DefaultReplicationFactor:           cfg.DefaultReplicationFactor,
		UncleanLeaderElection:              cfg.UncleanLeaderElectionEnable,
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
		return fmt.Errorf("start controller: %w", err)
	}
	n.controller = c
	n.reg.MustRegister(c.Collector())
	n.lg.Info("controller started", "listener", ln.Addr().String(), "voters", len(voters))
	return nil
}

func (n *node) startBroker(ctx context.Context, ln net.Listener) error {
	cfg := n.cfg
	host, port := cfg.AdvertisedKafka()
	var addrs []string
	for _, v := range cfg.Voters() {
		addrs = append(addrs, v.Addr())
	}
	n.lg.Info("registering with the controller quorum", "voters", addrs)
	store, err := controller.NewBrokerClient(ctx, controller.BrokerConfig{
		NodeID:            cfg.NodeID,
		Host:              host,
		Port:              int32(port),
		Rack:              cfg.BrokerRack,
		ListenerName:      cfg.InterBrokerListenerName,
		ControllerAddrs:   addrs,
		HeartbeatInterval: cfg.BrokerHeartbeatInterval(),
		SessionTimeout:    cfg.BrokerSessionTimeout(),
		Logger:            n.lg,
	})
	if err != nil {
		return fmt.Errorf("register broker: %w", err)
	}
	n.store = store

	n.replicas, err = replication.NewManager(replication.Config{
		NodeID:                 cfg.NodeID,
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
		Logger:                 n.lg,
		Registry:               n.reg,
	}, store)
	if err != nil {
		return err
	}
	// The replica manager follows metadata until close, not until the signal: a
	// controlled shutdown still needs the leadership changes it triggers applied.
	rctx, rcancel := context.WithCancel(context.Background())
	n.stopReplicas = rcancel
	go n.replicas.Run(rctx)

	brokerConfigs := map[string]string{}
	for _, s := range cfg.Settings() {
		brokerConfigs[s.Key] = s.Value
	}
	n.kafka = protocol.NewServer(protocol.Config{
		NodeID:                   cfg.NodeID,
		MaxRequestBytes:          cfg.SocketRequestMaxBytes,
		AutoCreateTopics:         cfg.AutoCreateTopicsEnable,
		DeleteTopicEnable:        cfg.DeleteTopicEnable,
		DefaultPartitions:        cfg.NumPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		TopicDefaults:            cfg.TopicDefaults(),
		BrokerConfigs:            brokerConfigs,
		Logger:                   n.lg,
		Metrics:                  protocol.NewMetrics(n.reg),
	}, protocol.Deps{
		Meta:        store,
		Replicas:    n.replicas,
		ProducerIDs: producerid.New(store),
		Groups:      n.startGroups(store),
	})
	n.serving = make(chan struct{})
	go func() {
		defer close(n.serving)
		if err := n.kafka.Serve(ctx, ln); err != nil {
			n.lg.Error("Kafka listener stopped", "err", err)
		}
	}()
	n.lg.Info("serving Kafka clients", "listener", ln.Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(port)), "node_id", cfg.NodeID, "log_dir", cfg.LogDir)
	return nil
}

// startGroups starts the consumer-group coordinator and its lag metrics.
func (n *node) startGroups(store metadata.Store) *group.Coordinator {
	cfg := n.cfg
	n.groups = group.New(group.Config{
		NodeID:                cfg.NodeID,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay(),
		MinSessionTimeout:     time.Duration(cfg.GroupMinSessionTimeoutMs) * time.Millisecond,
		MaxSessionTimeout:     time.Duration(cfg.GroupMaxSessionTimeoutMs) * time.Millisecond,
		OffsetsRetention:      cfg.OffsetsRetention(),
		Logger:                n.lg,
	}, store)
	parts := n.replicas.Partitions()
	n.reg.MustRegister(n.groups.LagCollector(func(topic string, index int32) (int64, bool) {
		// Only leaders: every (group, partition) series then comes from one broker.
		p := parts.Get(topic, index)
		if p == nil || p.Role() != partition.RoleLeader {
			return 0, false
		}
		return p.HighWatermark(), true
	}))
	return n.groups
}

func (n *node) startHTTP() error {
	ln, err := net.Listen("tcp", n.cfg.HTTPListener)
	if err != nil {
		return fmt.Errorf("listen on http.listener: %w", err)
	}
	mux := http.NewServeMux()
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
		} else if n.store == nil || !n.store.LeaseValid() {
			http.Error(w, "not registered with the controller", http.StatusServiceUnavailable)
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
	n.lg.Info("serving metrics and health", "listener", ln.Addr().String())
	return nil
}

// controlledShutdownTimeout bounds how long a stopping broker waits for the controller to
// move its leaderships away before it stops anyway.
const controlledShutdownTimeout = 30 * time.Second

// controlledShutdown moves this broker's leaderships to other in-sync replicas before the
// listener closes (Kafka's controlled shutdown), so that producers are told
// NOT_LEADER_OR_FOLLOWER and move on at once instead of timing out on a dead broker: a
// rolling restart keeps every RF>1 partition writable.
func (n *node) controlledShutdown() {
	bc, ok := n.store.(*controller.BrokerClient)
	if !ok || n.replicas == nil {
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
	n.replicas.WaitApplied(ctx, func(im *metadata.Image) bool { return im.Offset >= want })
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
	n.controlledShutdown()
	if n.groups != nil {
		// First, so that JoinGroup and SyncGroup calls waiting for a rebalance are
		// answered (NOT_COORDINATOR: clients move to the next coordinator) instead of
		// holding their connections past the shutdown grace.
		errs = append(errs, n.groups.Close())
	}
	if n.kafka != nil {
		n.kafka.Close(shutdownGrace)
		<-n.serving
	}
	if n.cancel != nil {
		n.cancel()
	}
	if n.stopReplicas != nil {
		n.stopReplicas()
	}
	if n.replicas != nil {
		errs = append(errs, n.replicas.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if n.controller != nil {
		errs = append(errs, n.controller.Close())
	}
	return errors.Join(errs...)
}
