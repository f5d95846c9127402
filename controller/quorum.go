package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

// Runtime changes to the controller quorum (KIP-853's idea on hashicorp/raft).
//
// A controller joins a running quorum when its node.id is not in controller.quorum.voters:
// it never bootstraps, and its Raft stays a follower without a configuration (it stands
// for no election) until the active controller adds it. Adding is two configuration
// changes: the newcomer becomes a non-voter, the leader replicates the log to it, and once
// its log end has reached the commit index the change started from, it is promoted to a
// voter. A voter that never caught up would count towards the majority without being able
// to vote for anything current: adding it straight away could stall a one- or two-node
// quorum. Only one change runs at a time, and none while the latest configuration is
// uncommitted, so that every change moves between two configurations with overlapping
// majorities.
//
// A removed controller stops serving: once its latest configuration no longer lists it
// (and it is not the leader, which hashicorp/raft shuts down itself once the removal
// commits), it stops its gRPC service and Raft, writes a `removed` marker into its data
// directory and says so in its log; started again on that directory it refuses to run.

const (
	// defaultVoterCatchUpTimeout bounds how long a new controller may take to replicate
	// the log as a non-voter before it is promoted; past it the addition is undone.
	defaultVoterCatchUpTimeout = 60 * time.Second
	// removedMarker, in a controller's data directory, records that it was removed.
	removedMarker = "removed"
)

// progress records, on the leader, what each peer's answers to AppendEntries say: its log
// end (the last index it holds) and when it answered. Heartbeats go out every tenth of
// the heartbeat timeout to every peer, voters and non-voters, and each answer carries the
// peer's last log index, so this stays current without access to Raft's internals.
type progress struct {
	mu    sync.Mutex
	peers map[raft.ServerID]*peerProgress
	// commitIndex reads the leader's commit index when a request goes out.
	commitIndex atomic.Pointer[func() uint64]
}

type peerProgress struct {
	logEnd     uint64
	lastFetch  time.Time // when its last answer arrived
	caughtUpAt time.Time // when a request it answered holding the then commit index was sent
}

func newProgress() *progress { return &progress{peers: map[raft.ServerID]*peerProgress{}} }

func (p *progress) record(id raft.ServerID, sent time.Time, commitAtSend uint64, resp *raft.AppendEntriesResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.peers[id]
	if pp == nil {
		pp = &peerProgress{}
		p.peers[id] = pp
	}
	pp.logEnd, pp.lastFetch = resp.LastLog, time.Now()
	if resp.LastLog >= commitAtSend {
		pp.caughtUpAt = sent
	}
}

func (p *progress) get(id raft.ServerID) (peerProgress, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp, ok := p.peers[id]
	if !ok {
		return peerProgress{}, false
	}
	return *pp, true
}

func (p *progress) forget(id raft.ServerID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.peers, id)
}

// wrap returns t recording every AppendEntries answer; it keeps the optional interfaces
// Raft looks for (pre-vote, close).
func (p *progress) wrap(t raft.Transport) raft.Transport {
	base := &progressTransport{Transport: t, p: p}
	if _, ok := t.(raft.WithPreVote); ok {
		return &progressPreVoteTransport{base}
	}
	return base
}

type progressTransport struct {
	raft.Transport
	p *progress
}

func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	var commit uint64
	if f := t.p.commitIndex.Load(); f != nil {
		commit = (*f)()
	}
	sent := time.Now()
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Term <= args.Term {
		t.p.record(id, sent, commit, resp)
	}
	return err
}

func (t *progressTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

type progressPreVoteTransport struct{ *progressTransport }

func (t *progressPreVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func parseServerID(id raft.ServerID) (int32, bool) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	return int32(n), err == nil
}

// beginQuorumChange takes the quorum-change slot and returns the latest configuration,
// refusing while another change runs or the latest configuration is not committed.
func (s *Server) beginQuorumChange() (raft.Configuration, uint64, error) {
	if !s.quorumMu.TryLock() {
		return raft.Configuration{}, 0, kafkaErrorf(kerr.RequestTimedOut, "another controller quorum change is in progress; retry once it is done")
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		s.quorumMu.Unlock()
		return raft.Configuration{}, 0, fmt.Errorf("read the quorum configuration: %w", err)
	}
	if commit := s.raft.CommitIndex(); f.Index() > commit {
		s.quorumMu.Unlock()
		return raft.Configuration{}, 0, kafkaErrorf(kerr.RequestTimedOut,
			"the previous quorum change (index %d) is not committed yet (commit index %d); retry once it is", f.Index(), commit)
	}
	return f.Configuration(), f.Index(), nil
}

// waitIndexFuture waits for a Raft future, or ctx.
func waitIndexFuture(ctx context.Context, f raft.IndexFuture) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// addVoter adds controller id at addr to the quorum, first as a non-voter until it has
// caught up, then as a voter. It must run on the active controller.
func (s *Server) addVoter(ctx context.Context, id int32, addr string) error {
	if id < 0 {
		return kafkaErrorf(kerr.InvalidRequest, "voter id %d is negative", id)
	}
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" || port == "0" {
		return kafkaErrorf(kerr.InvalidRequest, "voter address %q is not host:port", addr)
	}
	conf, index, err := s.beginQuorumChange()
	if err != nil {
		return err
	}
	defer s.quorumMu.Unlock()
	sid := serverID(id)
	for _, srv := range conf.Servers {
		switch {
		case srv.ID == sid && srv.Suffrage == raft.Voter:
			return kafkaErrorf(kerr.DuplicateVoter, "controller %d is already a voter (at %s)", id, srv.Address)
		case srv.ID == sid && string(srv.Address) != addr:
			return kafkaErrorf(kerr.InvalidRequest, "controller %d is being added at %s, not %s", id, srv.Address, addr)
		case srv.ID != sid && string(srv.Address) == addr:
			return kafkaErrorf(kerr.InvalidRequest, "address %s belongs to controller %s", addr, srv.ID)
		}
	}
	s.log.Info("adding a controller to the quorum: replicating to it as a non-voter first", "voter", id, "address", addr)
	if err := waitIndexFuture(ctx, s.raft.AddNonvoter(sid, raft.ServerAddress(addr), index, enqueueTimeout)); err != nil {
		return fmt.Errorf("add controller %d as a non-voter: %w", id, err)
	}
	target := s.raft.CommitIndex()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.VoterCatchUpTimeout)
	defer cancel()
	for {
		if pp, ok := s.progress.get(sid); ok && pp.logEnd >= target {
			break
		}
		if !sleepCtx(cctx, 50*time.Millisecond) {
			s.undoNonvoter(sid)
			pp, _ := s.progress.get(sid)
			return kafkaErrorf(kerr.RequestTimedOut,
				"controller %d at %s did not catch up (log end %d, commit index %d) within %v; is it running, reachable at that address, "+
					"and started with node.id %d outside controller.quorum.voters? The addition was undone",
				id, addr, pp.logEnd, target, s.cfg.VoterCatchUpTimeout, id)
		}
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the quorum configuration: %w", err)
	}
	if err := waitIndexFuture(ctx, s.raft.AddVoter(sid, raft.ServerAddress(addr), f.Index(), enqueueTimeout)); err != nil {
		return fmt.Errorf("promote controller %d to a voter: %w", id, err)
	}
	s.log.Info("controller added to the quorum as a voter", "voter", id, "address", addr)
	return nil
}

// undoNonvoter removes a non-voter that never caught up.
func (s *Server) undoNonvoter(sid raft.ServerID) {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	if err := s.raft.RemoveServer(sid, f.Index(), enqueueTimeout).Error(); err != nil {
		s.log.Warn("could not undo the addition of a controller that did not catch up", "voter", sid, "err", err)
		return
	}
	s.progress.forget(sid)
}

// removeVoter removes controller id from the quorum. Removing the active controller
// itself first hands leadership to another voter and answers NotLeader, so that the
// caller retries there and the removal is committed by a leader that stays.
func (s *Server) removeVoter(ctx context.Context, id int32) error {
	conf, index, err := s.beginQuorumChange()
	if err != nil {
		return err
	}
	defer s.quorumMu.Unlock()
	sid := serverID(id)
	i := slices.IndexFunc(conf.Servers, func(srv raft.Server) bool { return srv.ID == sid })
	if i < 0 {
		return kafkaErrorf(kerr.VoterNotFound, "controller %d is not in the quorum", id)
	}
	voters := 0
	for _, srv := range conf.Servers {
		if srv.Suffrage == raft.Voter {
			voters++
		}
	}
	if conf.Servers[i].Suffrage == raft.Voter && voters == 1 {
		return kafkaErrorf(kerr.InvalidRequest, "controller %d is the only voter; add another before removing it", id)
	}
	if id == s.cfg.NodeID {
		s.log.Info("asked to remove the active controller: handing leadership to another voter first")
		// A transfer times out after an election timeout when the target is slow to
		// win; another try usually succeeds.
		var err error
		for range 5 {
			err = waitIndexFuture(ctx, indexFuture{s.raft.LeadershipTransfer()})
			if err == nil || ctx.Err() != nil || s.raft.State() != raft.Leader {
				// A transfer reported as timed out may still have succeeded.
				break
			}
			s.log.Warn("leadership transfer failed; trying again", "err", err)
		}
		if err != nil && s.raft.State() == raft.Leader {
			return kafkaErrorf(kerr.RequestTimedOut, "could not hand leadership over before removing controller %d: %v; retry", id, err)
		}
		return errNotLeader
	}
	if err := waitIndexFuture(ctx, s.raft.RemoveServer(sid, index, enqueueTimeout)); err != nil {
		return fmt.Errorf("remove controller %d: %w", id, err)
	}
	s.progress.forget(sid)
	s.log.Info("controller removed from the quorum", "voter", id, "address", conf.Servers[i].Address)
	return nil
}

// updateVoter gives voter id a new address (KIP-853's UpdateRaftVoter): hashicorp/raft
// replaces the address of a server already in the configuration when it is added again
// under the same id and suffrage. The same address again is a success that changes
// nothing, so that a retry after a lost answer finds the change made. It must run on the
// active controller; the voter should already listen at addr, or the quorum loses it
// until it does.
func (s *Server) updateVoter(ctx context.Context, id int32, addr string) error {
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" || port == "0" {
		return kafkaErrorf(kerr.InvalidRequest, "voter address %q is not host:port", addr)
	}
	conf, index, err := s.beginQuorumChange()
	if err != nil {
		return err
	}
	defer s.quorumMu.Unlock()
	sid := serverID(id)
	i := slices.IndexFunc(conf.Servers, func(srv raft.Server) bool { return srv.ID == sid })
	if i < 0 || conf.Servers[i].Suffrage != raft.Voter {
		// A controller still being added is not a voter yet: Kafka answers the same.
		return kafkaErrorf(kerr.VoterNotFound, "controller %d is not a voter of the quorum", id)
	}
	old := string(conf.Servers[i].Address)
	if old == addr {
		return nil
	}
	for _, srv := range conf.Servers {
		if srv.ID != sid && string(srv.Address) == addr {
			return kafkaErrorf(kerr.InvalidRequest, "address %s belongs to controller %s", addr, srv.ID)
		}
	}
	if err := waitIndexFuture(ctx, s.raft.AddVoter(sid, raft.ServerAddress(addr), index, enqueueTimeout)); err != nil {
		return fmt.Errorf("update the address of controller %d: %w", id, err)
	}
	s.log.Info("controller's address updated in the quorum", "voter", id, "old_address", old, "address", addr)
	return nil
}

// indexFuture adapts a raft.Future to waitIndexFuture.
type indexFuture struct{ raft.Future }

func (indexFuture) Index() uint64 { return 0 }

// describeQuorum answers DescribeQuorum on the active controller.
func (s *Server) describeQuorum(ls *leaderSession) *pb.DescribeQuorumResponse {
	now := time.Now()
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return -1
		}
		return t.UnixMilli()
	}
	resp := &pb.DescribeQuorumResponse{
		LeaderId:      s.cfg.NodeID,
		LeaderEpoch:   int64(s.raft.CurrentTerm()),
		HighWatermark: int64(s.raft.CommitIndex()),
	}
	f := s.raft.GetConfiguration()
	var conf raft.Configuration
	if f.Error() == nil {
		conf = f.Configuration()
	}
	for _, srv := range conf.Servers {
		id, ok := parseServerID(srv.ID)
		if !ok {
			continue
		}
		r := &pb.QuorumReplica{Id: id, Address: string(srv.Address), LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1}
		if id == s.cfg.NodeID {
			r.LogEndOffset, r.LastFetchMs, r.LastCaughtUpMs = int64(s.raft.LastIndex()), now.UnixMilli(), now.UnixMilli()
		} else if pp, ok := s.progress.get(srv.ID); ok {
			r.LogEndOffset, r.LastFetchMs, r.LastCaughtUpMs = int64(pp.logEnd), ms(pp.lastFetch), ms(pp.caughtUpAt)
		}
		if srv.Suffrage == raft.Voter {
			resp.Voters = append(resp.Voters, r)
		} else {
			resp.Observers = append(resp.Observers, r)
		}
	}
	// Brokers follow the metadata log: their heartbeats say how far their caches are.
	im := s.fsm.image()
	ls.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		r := &pb.QuorumReplica{Id: id, LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1}
		if off, ok := ls.brokerOffsets[id]; ok {
			r.LogEndOffset = int64(off.offset)
			r.LastFetchMs, r.LastCaughtUpMs = ms(off.at), ms(off.caughtUpAt)
		}
		resp.Observers = append(resp.Observers, r)
	}
	ls.mu.Unlock()
	return resp
}

// brokerOffset is how far a broker's metadata cache was at its last heartbeat.
type brokerOffset struct {
	offset     uint64
	at         time.Time
	caughtUpAt time.Time // the last heartbeat whose offset had reached the controller's image
}

// noteBrokerOffset records a heartbeat's metadata offset; ls.mu is held.
func (s *Server) noteBrokerOffsetLocked(ls *leaderSession, id int32, offset uint64) {
	now := time.Now()
	bo := ls.brokerOffsets[id]
	bo.offset, bo.at = offset, now
	if offset >= s.fsm.image().Offset {
		bo.caughtUpAt = now
	}
	ls.brokerOffsets[id] = bo
}

// checkMembership follows this controller's place in the quorum: it notes when the
// controller is first part of the configuration, and retires it once it is not any
// more. It reports whether the controller retired.
func (s *Server) checkMembership() bool {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	self := serverID(s.cfg.NodeID)
	in := slices.ContainsFunc(f.Configuration().Servers, func(srv raft.Server) bool { return srv.ID == self })
	switch {
	case in:
		if !s.member.Swap(true) && s.cfg.joining() {
			s.log.Info("this controller is now part of the quorum", "address", s.cfg.selfAddr())
		}
		return false
	case !s.member.Load() || s.raft.State() == raft.Leader:
		// Not added yet; or a leader whose own removal is not committed yet (Raft shuts it
		// down once it is).
		return false
	}
	s.retire(f.Index())
	return true
}

// retire stops a controller that was removed from the quorum: no more gRPC, no more Raft.
func (s *Server) retire(index uint64) {
	s.log.Info("this controller is no longer in the quorum's configuration; stopping", "configuration_index", index)
	s.retired.Store(true)
	s.stopSession()
	s.grpc.Stop()
	if err := s.raft.Shutdown().Error(); err != nil {
		s.log.Warn("raft shutdown after removal", "err", err)
	}
	closeTransport(s.trans)
	s.mux.close()
	content := fmt.Sprintf("# Written by the Shale controller: node.id %d was removed from the quorum at %s (configuration index %d).\n",
		s.cfg.NodeID, time.Now().UTC().Format(time.RFC3339), index)
	if err := os.WriteFile(filepath.Join(s.cfg.DataDir, removedMarker), []byte(content), 0o644); err != nil {
		s.log.Warn("could not record the removal in the data directory", "err", err)
	}
	s.log.Warn("this controller was removed from the controller quorum: it has stopped serving (gRPC and Raft); "+
		"wipe its data directory before adding it again", "configuration_index", index, "data_dir", s.cfg.DataDir)
	close(s.removedCh)
}

// Removed is closed once this controller has been removed from the quorum and stopped.
func (s *Server) Removed() <-chan struct{} { return s.removedCh }

// checkNotRemoved refuses a data directory whose controller was removed from the quorum:
// its log would make it believe in a configuration the quorum has left.
func checkNotRemoved(dir string, id int32) error {
	data, err := os.ReadFile(filepath.Join(dir, removedMarker))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("controller: read %s: %w", removedMarker, err)
	}
	return fmt.Errorf("controller: node.id %d was removed from the controller quorum (%s); wipe %s to add it again",
		id, strings.TrimSpace(strings.TrimPrefix(string(data), "# Written by the Shale controller: ")), dir)
}

// Voters returns the controllers of the quorum as this controller's latest configuration
// lists them (voters only), sorted by id.
func (s *Server) Voters() []Voter {
	s.mu.Lock()
	r := s.raft
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []Voter
	for _, srv := range f.Configuration().Servers {
		if id, ok := parseServerID(srv.ID); ok && srv.Suffrage == raft.Voter {
			out = append(out, Voter{ID: id, Addr: string(srv.Address)})
		}
	}
	slices.SortFunc(out, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	return out
}
