package controller

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/shalelog/shale/controller/proto"
)

// leaderSession is what the active controller keeps in memory for one term of
// leadership: when each broker last heartbeated (leases are not in the log; a new leader
// starts every lease afresh), and at what offset it fenced each broker.
type leaderSession struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once the log is applied and the leader-change committed
	done   chan struct{} // closed when run returns

	// mu orders heartbeats against lease expiry: a heartbeat that arrives while a fence is
	// being committed sees the fence, never a stale unfenced state.
	mu       sync.Mutex
	start    time.Time
	lastSeen map[int32]time.Time
	fencedAt map[int32]uint64
	// brokerOffsets is how far each broker's metadata cache was at its last heartbeat,
	// for DescribeQuorum's observers.
	brokerOffsets map[int32]brokerOffset
}

func (s *Server) session() *leaderSession {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	return s.sess
}

// followLeadership starts a session whenever this controller becomes leader and stops
// it when it is not any more.
func (s *Server) followLeadership() {
	check := time.NewTicker(s.cfg.HeartbeatTimeout)
	defer check.Stop()
	for {
		select {
		case <-s.ctx.Done():
			s.stopSession()
			return
		case isLeader := <-s.raft.LeaderCh():
			// Notifications may be coalesced: a true may hide a loss in between, so a
			// new session starts either way.
			s.stopSession()
			if isLeader {
				s.startSession()
			}
		case <-check.C:
			if s.checkMembership() {
				return
			}
			isLeader := s.raft.State() == raft.Leader
			switch ls := s.session(); {
			case ls != nil && !isLeader:
				s.stopSession()
			case isLeader && ls != nil && ls.ended():
				// runSession gives up before the session is ready when its barrier or
				// leader-change record is not enqueued in time (raft.ErrEnqueueTimeout, on
				// a loaded machine) or not committed. Raft stays leader and sends nothing
				// on LeaderCh, so without a new session here the quorum would have no
				// active controller until leadership moved, which need never happen.
				s.log.Warn("controller session ended while this controller is still the Raft leader; starting a new one")
				s.stopSession()
				s.startSession()
			case ls == nil && isLeader:
				s.startSession()
			}
		}
	}
}

// ended reports whether the session's run has returned.
func (ls *leaderSession) ended() bool {
	select {
	case <-ls.done:
		return true
	default:
		return false
	}
}

func (s *Server) startSession() {
	ctx, cancel := context.WithCancel(s.ctx)
	ls := &leaderSession{ctx: ctx, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{}),
		lastSeen: map[int32]time.Time{}, fencedAt: map[int32]uint64{}, brokerOffsets: map[int32]brokerOffset{}}
	s.sessMu.Lock()
	s.sess = ls
	s.sessMu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(ls.done)
		s.runSession(ls)
	}()
}

func (s *Server) stopSession() {
	s.sessMu.Lock()
	ls := s.sess
	s.sess = nil
	s.sessMu.Unlock()
	if ls != nil {
		ls.cancel()
		<-ls.done
	}
}

func (s *Server) runSession(ls *leaderSession) {
	// Apply everything earlier leaders committed before serving from the FSM.
	for {
		err := s.raft.Barrier(s.cfg.ElectionTimeout * 5).Error()
		if err == nil {
			break
		}
		if ls.ctx.Err() != nil || isLeadershipError(err) {
			return
		}
		s.log.Warn("controller leader barrier failed; retrying", "err", err)
		if !sleepCtx(ls.ctx, 50*time.Millisecond) {
			return
		}
	}
	s.updateMovedAddress()
	im := s.fsm.image()
	clusterID := im.ClusterID
	if clusterID == "" {
		clusterID = newClusterID()
	}
	rec := &pb.Record{Record: &pb.Record_LeaderChange{LeaderChange: &pb.LeaderChangeRecord{
		LeaderId: s.cfg.NodeID, ClusterId: clusterID, UncleanLeaderElection: s.cfg.UncleanLeaderElection,
		OffsetsTopicNumPartitions: s.cfg.OffsetsTopicNumPartitions}}}
	if _, _, err := s.propose(ls.ctx, rec); err != nil {
		if ls.ctx.Err() == nil {
			s.log.Warn("controller could not commit its leader-change record", "err", err)
		}
		return
	}
	im = s.fsm.image()
	ls.mu.Lock()
	ls.start = time.Now()
	for id, b := range im.Brokers {
		if b.Fenced {
			// Fenced by an earlier leader at an offset this one does not know: the
			// broker must catch up to here before it is unfenced.
			ls.fencedAt[id] = im.Offset
		}
	}
	ls.mu.Unlock()
	close(ls.ready)
	s.log.Info("controller is active", "metadata_offset", im.Offset, "cluster_id", im.ClusterID, "brokers", len(im.Brokers))

	tick := min(max(s.cfg.SessionTimeout/10, 20*time.Millisecond), 500*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	// The imbalance check runs on its own clock (leader.imbalance.check.interval.seconds),
	// as Kafka's does: moving leaders costs clients a metadata refresh each, so it is
	// done in batches and only past leader.imbalance.per.broker.percentage.
	var rebalance <-chan time.Time
	if !s.cfg.DisableAutoLeaderRebalance {
		rt := time.NewTicker(s.cfg.LeaderImbalanceCheckInterval)
		defer rt.Stop()
		rebalance = rt.C
	}
	for {
		select {
		case <-ls.ctx.Done():
			return
		case <-rebalance:
			s.rebalanceLeaders(ls)
			continue
		case <-t.C:
		}
		if err := s.expireLeases(ls); err != nil && ls.ctx.Err() == nil && !isLeadershipError(err) {
			s.log.Warn("fencing brokers failed", "err", err)
		}
		if s.fsm.electionNeeded(false) {
			rec := &pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: &pb.ElectLeadersRecord{Type: pb.ElectionType_ELECTION_TYPE_LEADERLESS}}}
			if _, _, err := s.propose(ls.ctx, rec); err != nil && ls.ctx.Err() == nil && !isLeadershipError(err) {
				s.log.Warn("leader election failed", "err", err)
			}
		}
	}
}

// rebalanceLeaders elects preferred leaders where a broker's leader imbalance is above
// leader.imbalance.per.broker.percentage.
func (s *Server) rebalanceLeaders(ls *leaderSession) {
	parts := s.fsm.imbalancedPartitions(s.cfg.LeaderImbalancePerBrokerPercentage)
	if len(parts) == 0 {
		return
	}
	n := 0
	for _, ps := range parts {
		n += len(ps)
	}
	rec := &pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: &pb.ElectLeadersRecord{
		Type: pb.ElectionType_ELECTION_TYPE_PREFERRED, Partitions: topicPartitionsPB(parts)}}}
	res, _, err := s.propose(ls.ctx, rec)
	if err != nil {
		if ls.ctx.Err() == nil && !isLeadershipError(err) {
			s.log.Warn("preferred leader election failed", "err", err)
		}
		return
	}
	moved := 0
	results, _ := res.value.(electionResults)
	for _, ps := range results {
		for _, err := range ps {
			if err == nil {
				moved++
			}
		}
	}
	s.log.Info("leader imbalance: preferred leaders elected", "candidates", n, "moved", moved,
		"threshold_percent", s.cfg.LeaderImbalancePerBrokerPercentage)
}

// expireLeases fences every unfenced broker whose last heartbeat is older than the
// session timeout. Brokers that have not heartbeated to this leader yet count from the
// start of its term.
func (s *Server) expireLeases(ls *leaderSession) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	im := s.fsm.image()
	rec := &pb.FenceBrokersRecord{Reason: "session expired"}
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		b := im.Brokers[id]
		if b.Fenced {
			continue
		}
		seen, ok := ls.lastSeen[id]
		if !ok {
			seen = ls.start
		}
		if now.Sub(seen) > s.cfg.SessionTimeout {
			rec.BrokerIds = append(rec.BrokerIds, id)
			rec.BrokerEpochs = append(rec.BrokerEpochs, b.Epoch)
		}
	}
	if len(rec.BrokerIds) == 0 {
		return nil
	}
	s.log.Warn("fencing brokers whose session expired", "brokers", rec.BrokerIds, "session_timeout", s.cfg.SessionTimeout)
	return s.fenceLocked(ls, rec)
}

// ReadyToUnfence is the one rule for unfencing a broker: its applied metadata (offset
// metadataOffset, from its heartbeat) has reached its registration (brokerEpoch is the
// registration record's offset) and the record that last fenced it (fencedAt; 0 when not
// known). Until it has, the broker may still believe it leads partitions that were moved
// away when it was fenced, and would serve them as a zombie leader once its lease is
// back: stale reads, and records purged by DeleteRecords served again.
func ReadyToUnfence(brokerEpoch int64, fencedAt, metadataOffset uint64) bool {
	return metadataOffset >= max(uint64(brokerEpoch), fencedAt)
}

// fenceLocked commits a fence and remembers where; ls.mu is held.
func (s *Server) fenceLocked(ls *leaderSession, rec *pb.FenceBrokersRecord) error {
	_, index, err := s.propose(ls.ctx, &pb.Record{Record: &pb.Record_FenceBrokers{FenceBrokers: rec}})
	if err != nil {
		return err
	}
	for _, id := range rec.BrokerIds {
		ls.fencedAt[id] = index
	}
	return nil
}

// awaitSession returns the active session once it is ready, or errNotLeader.
func (s *Server) awaitSession(ctx context.Context) (*leaderSession, error) {
	ls := s.session()
	if ls == nil {
		return nil, errNotLeader
	}
	select {
	case <-ls.ready:
		return ls, nil
	case <-ls.done:
		return nil, errNotLeader
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// verifyLeader confirms with a majority that this controller still leads, so that a read
// served from its FSM is not stale.
func (s *Server) verifyLeader(ctx context.Context) error {
	done := make(chan error, 1)
	f := s.raft.VerifyLeader()
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
