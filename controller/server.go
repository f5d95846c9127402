package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

const (
	// maxMessageSize bounds gRPC messages both ways; a full image is sent in chunks well
	// below it, but one delta (a fence touching every partition) can be large.
	maxMessageSize = 64 << 20
	// raftIOTimeout bounds one Raft RPC, so that a stopped peer does not hold a
	// replication stream for long.
	raftIOTimeout = 5 * time.Second
	// enqueueTimeout bounds how long a proposal waits to enter Raft's queue.
	enqueueTimeout = 5 * time.Second
	// retainedSnapshots is how many snapshots stay on disk.
	retainedSnapshots = 2
)

// Server is one controller: Raft, the metadata FSM, and the gRPC service on one port.
type Server struct {
	cfg Config
	log *slog.Logger

	fsm    *fsm
	store  *raftboltdb.BoltStore // nil with Config.Raft
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore

	mu        sync.Mutex // guards the fields below until Start has run
	started   bool
	raft      *raft.Raft
	trans     raft.Transport
	mux       *connMux
	grpc      *grpc.Server
	committer *offsetCommitter

	// adminMu serialises topic and config changes on the leader, so that each is
	// validated against the state the previous one left.
	adminMu sync.Mutex

	sessMu sync.Mutex
	sess   *leaderSession

	// quorumMu lets one controller quorum change run at a time (quorum.go).
	quorumMu sync.Mutex
	progress *progress
	// member is set once this controller has seen itself in the quorum's configuration;
	// retired once it was removed from it and stopped; removedCh is closed then.
	member    atomic.Bool
	retired   atomic.Bool
	removedCh chan struct{}

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewServer opens the controller's data directory: the Raft log and stable store and the
// snapshots. Nothing listens until Start.
func NewServer(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := c.Logger.With("component", "controller", "node.id", c.NodeID)
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: data directory: %w", err)
	}
	if err := checkNodeID(c.DataDir, c.NodeID); err != nil {
		return nil, err
	}
	if err := checkNotRemoved(c.DataDir, c.NodeID); err != nil {
		return nil, err
	}
	s := &Server{cfg: c, log: log, fsm: newFSM(log), progress: newProgress(), removedCh: make(chan struct{})}
	if rs := c.Raft; rs != nil {
		s.logs, s.stable, s.snaps = rs.Logs, rs.Stable, rs.Snapshots
	} else {
		store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(c.DataDir, "raft.db")})
		if err != nil {
			return nil, fmt.Errorf("controller: open raft log: %w", err)
		}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(c.DataDir, retainedSnapshots, newRaftLogger(log).Named("snapshot"))
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("controller: open snapshot store: %w", err)
		}
		s.store, s.logs, s.stable, s.snaps = store, store, store, snaps
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// checkNodeID refuses a data directory that another node id created.
func checkNodeID(dir string, id int32) error {
	path := filepath.Join(dir, "meta.properties")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		content := fmt.Sprintf("# Written by the Shale controller; do not edit.\nversion=1\nnode.id=%d\n", id)
		if err := writeFileDurable(path, []byte(content)); err != nil {
			return fmt.Errorf("controller: write %s: %w", path, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("controller: read %s: %w", path, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "node.id="); ok {
			if v != strconv.Itoa(int(id)) {
				return fmt.Errorf("controller: %s belongs to node.id %s, not %d", dir, v, id)
			}
			return nil
		}
	}
	return fmt.Errorf("controller: %s has no node.id", path)
}

// writeFileDurable writes path through a synced temporary file renamed into place, and
// syncs the directory: a power cut right after start-up must leave the whole file or none
// (an empty meta.properties stops the node for good), not a name without its data.
func writeFileDurable(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Start binds the CONTROLLER listener and starts Raft and the gRPC service in the
// background. A node without Raft state bootstraps the quorum from Voters: every voter
// does so with the same configuration, which Raft accepts, so a new quorum forms whichever
// voters come up first; a node with state never bootstraps again. ctx bounds start-up
// only; Close stops the server.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("controller: already started")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.ctx.Err() != nil {
		return errors.New("controller: closed")
	}
	s.useBootstrapServers(ctx)
	if s.cfg.joining() && s.cfg.selfAddr() == "" {
		return fmt.Errorf("controller: node.id %d is not among the quorum's voters %s, so it joins the running quorum, "+
			"but it has no address for its peers to dial", s.cfg.NodeID, FormatVoters(s.cfg.Voters))
	}
	ln := s.cfg.Listener
	if ln == nil {
		addr := s.cfg.ListenAddr
		if addr == "" {
			addr = s.cfg.selfAddr()
		}
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", addr); err != nil {
			return fmt.Errorf("controller: listen: %w", err)
		}
	}
	hlog := newRaftLogger(s.log)
	mux := newConnMux(ln, staticAddr(s.cfg.selfAddr()), s.log)
	mux.kafkaHint = s.brokerListeners
	mux.grpcTLS = s.cfg.GRPCTLS
	if s.cfg.ServeKafkaClients {
		mux.kafka = newSubListener(mux, ln.Addr())
	}
	var trans raft.Transport
	if s.cfg.Raft != nil {
		trans = s.cfg.Raft.Transport
	} else {
		trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  raftStreamLayer{mux.raft},
			MaxPool: 3,
			Timeout: raftIOTimeout,
			Logger:  hlog.Named("net"),
		})
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(s.cfg.NodeID)))
	rc.HeartbeatTimeout = s.cfg.HeartbeatTimeout
	rc.ElectionTimeout = s.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = s.cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.SnapshotInterval = s.cfg.SnapshotInterval
	rc.TrailingLogs = s.cfg.TrailingLogs
	rc.Logger = hlog
	rc.NoLegacyTelemetry = true

	hasState, err := raft.HasExistingState(s.logs, s.stable, s.snaps)
	if err != nil {
		closeTransport(trans)
		mux.close()
		return fmt.Errorf("controller: inspect raft state: %w", err)
	}
	r, err := raft.NewRaft(rc, s.fsm, s.logs, s.stable, s.snaps, s.progress.wrap(trans))
	if err != nil {
		closeTransport(trans)
		mux.close()
		return fmt.Errorf("controller: start raft: %w", err)
	}
	switch {
	case !hasState && s.cfg.joining():
		s.log.Info("this controller is not in controller.quorum.voters: it joins the running quorum and waits to be added "+
			"(shale controller add --node N --address host:port)", "node.id", s.cfg.NodeID, "address", s.cfg.selfAddr(),
			"voters", FormatVoters(s.cfg.Voters))
	case !hasState:
		var servers []raft.Server
		for _, v := range s.cfg.Voters {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.ID))), Address: raft.ServerAddress(v.Addr)})
		}
		s.log.Info("bootstrapping a new controller quorum", "voters", FormatVoters(s.cfg.Voters))
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			r.Shutdown()
			closeTransport(trans)
			mux.close()
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	default:
		s.warnOnVoterMismatch(r)
	}

	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMessageSize),
		grpc.MaxSendMsgSize(maxMessageSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
	)
	pb.RegisterControllerServer(gs, &service{s: s})

	s.raft, s.trans, s.mux, s.grpc = r, trans, mux, gs
	commitIndex := r.CommitIndex
	s.progress.commitIndex.Store(&commitIndex)
	s.committer = newOffsetCommitter(s, s.cfg.OffsetCommitBatch)
	s.started = true
	mux.start()
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		if err := gs.Serve(mux.grpc); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("controller gRPC server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.followLeadership()
	}()
	go func() {
		defer s.wg.Done()
		s.committer.run(s.ctx)
	}()
	s.log.Info("controller started", "listen", ln.Addr().String(), "voters", FormatVoters(s.cfg.Voters), "existing_state", hasState)
	return nil
}

func (s *Server) warnOnVoterMismatch(r *raft.Raft) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	var have []string
	for _, srv := range f.Configuration().Servers {
		have = append(have, string(srv.ID)+"@"+string(srv.Address))
	}
	slices.Sort(have)
	var want []string
	for _, v := range s.cfg.Voters {
		want = append(want, strconv.Itoa(int(v.ID))+"@"+v.Addr)
	}
	slices.Sort(want)
	if s.movedAlone(f.Configuration()) {
		s.log.Info("this single-node quorum's controller moved; its stored address is updated once it leads",
			"stored", strings.Join(have, ","), "configured", strings.Join(want, ","))
		return
	}
	if !slices.Equal(have, want) {
		s.log.Warn("controller.quorum.voters differs from the quorum stored in the raft log; the stored one is used",
			"stored", strings.Join(have, ","), "configured", strings.Join(want, ","))
	}
}

// KafkaListener returns the connections of Kafka clients that reached the controller
// listener, when Config.ServeKafkaClients is set and the server has started; nil
// otherwise.
func (s *Server) KafkaListener() net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mux == nil || s.mux.kafka == nil {
		return nil
	}
	return s.mux.kafka
}

// brokerListeners lists the unfenced brokers' advertised Kafka listeners, for the hint
// logged when a Kafka client reaches the controller listener.
func (s *Server) brokerListeners() string {
	im := s.fsm.image()
	var addrs []string
	for _, b := range im.Brokers {
		if !b.Fenced {
			addrs = append(addrs, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

// movedAlone reports whether the quorum in stored is this node alone, as configured, at
// an address other than the configured one: a single node whose controller listener
// has a new port (port 0, or a loopback listener chosen because none was configured).
// Nothing else dials that address, so the stored one is safe to update.
func (s *Server) movedAlone(stored raft.Configuration) bool {
	self := strconv.Itoa(int(s.cfg.NodeID))
	return len(s.cfg.Voters) == 1 && s.cfg.Voters[0].ID == s.cfg.NodeID &&
		len(stored.Servers) == 1 && string(stored.Servers[0].ID) == self &&
		stored.Servers[0].Suffrage == raft.Voter && string(stored.Servers[0].Address) != s.cfg.selfAddr()
}

// updateMovedAddress rewrites the stored address of a single-node quorum whose
// controller moved (see movedAlone); Raft hints that address to callers of a
// follower, and a later voter added to the quorum would dial it.
func (s *Server) updateMovedAddress() {
	f := s.raft.GetConfiguration()
	if f.Error() != nil || !s.movedAlone(f.Configuration()) {
		return
	}
	addr := s.cfg.selfAddr()
	if err := s.raft.AddVoter(raft.ServerID(strconv.Itoa(int(s.cfg.NodeID))), raft.ServerAddress(addr), f.Index(), enqueueTimeout).Error(); err != nil {
		s.log.Warn("could not update this controller's stored address", "address", addr, "err", err)
		return
	}
	s.log.Info("updated this controller's stored address", "address", addr)
}

// Close stops the gRPC service, Raft and the stores. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if started {
			s.stopSession()
			s.grpc.Stop()
			// A snapshot of everything applied makes the next start restore it and
			// replay nothing, however long the log has grown. A removed controller's
			// Raft is already shut down, and its log is of no further use.
			if !s.retired.Load() {
				if err := s.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
					s.log.Warn("snapshot on shutdown failed", "err", err)
				}
			}
			if err := s.raft.Shutdown().Error(); err != nil {
				s.closeErr = errors.Join(s.closeErr, fmt.Errorf("raft shutdown: %w", err))
			}
			closeTransport(s.trans)
			s.mux.close()
		}
		s.wg.Wait()
		s.stopSession()
		if s.store != nil {
			if err := s.store.Close(); err != nil {
				s.closeErr = errors.Join(s.closeErr, fmt.Errorf("close raft log: %w", err))
			}
		}
		s.log.Info("controller stopped")
	})
	return s.closeErr
}

// closeTransport closes a Raft transport: a NetworkTransport's pooled streams first, so
// that no replication stream outlives it.
func closeTransport(t raft.Transport) {
	if nt, ok := t.(*raft.NetworkTransport); ok {
		nt.CloseStreams()
	}
	if c, ok := t.(raft.WithClose); ok {
		c.Close()
	}
}

// Addr is the address the CONTROLLER listener is bound to (after Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mux == nil {
		return ""
	}
	return s.mux.ln.Addr().String()
}

// Leader returns the Raft leader's node id and address as this controller knows them,
// (-1, "") when it knows none.
func (s *Server) Leader() (int32, string) {
	s.mu.Lock()
	r := s.raft
	s.mu.Unlock()
	if r == nil {
		return -1, ""
	}
	addr, id := r.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil || addr == "" {
		return -1, ""
	}
	return int32(n), string(addr)
}

// IsActive reports whether this controller is the Raft leader and ready to serve.
func (s *Server) IsActive() bool {
	ls := s.session()
	if ls == nil {
		return false
	}
	select {
	case <-ls.ready:
		return true
	default:
		return false
	}
}

// Image returns the metadata this controller has applied.
func (s *Server) Image() *metadata.Image { return s.fsm.image() }

// Snapshot takes a snapshot now and compacts the log behind it.
func (s *Server) Snapshot() error {
	s.mu.Lock()
	r := s.raft
	s.mu.Unlock()
	if r == nil {
		return errors.New("controller: not started")
	}
	return r.Snapshot().Error()
}

// AppliedIndex is the Raft index of the last record this controller applied.
func (s *Server) AppliedIndex() uint64 {
	s.fsm.mu.RLock()
	defer s.fsm.mu.RUnlock()
	return s.fsm.lastApplied
}

// propose commits a record through Raft and returns what the FSM made of it. It must be
// called on the leader; errors that mean "ask the new leader" wrap raft's sentinel errors.
func (s *Server) propose(ctx context.Context, rec *pb.Record) (applyResult, uint64, error) {
	fut, err := s.enqueue(rec)
	if err != nil {
		return applyResult{}, 0, err
	}
	return s.waitApplied(ctx, fut)
}

func (s *Server) enqueue(rec *pb.Record) (raft.ApplyFuture, error) {
	data, err := proto.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode metadata record: %w", err)
	}
	return s.raft.Apply(data, enqueueTimeout), nil
}

func (s *Server) waitApplied(ctx context.Context, fut raft.ApplyFuture) (applyResult, uint64, error) {
	done := make(chan error, 1)
	go func() { done <- fut.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return applyResult{}, 0, err
		}
		res, _ := fut.Response().(applyResult)
		return res, fut.Index(), nil
	case <-ctx.Done():
		return applyResult{}, 0, ctx.Err()
	}
}

// isLeadershipError reports whether err means the caller should find the new leader.
func isLeadershipError(err error) bool {
	return errors.Is(err, errNotLeader) || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, raft.ErrEnqueueTimeout) ||
		errors.Is(err, raft.ErrAbortedByRestore) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func newTopicID() []byte {
	var b [16]byte
	for b == [16]byte{} {
		_, _ = rand.Read(b[:])
	}
	return b[:]
}

func randomSeed() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
