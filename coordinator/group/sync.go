package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// SyncRequest is one SyncGroup. Assignments is the leader's plan (member id ->
// assignment), nil from followers. ProtocolType and Protocol (v5+) are checked when set.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType *string
	Protocol     *string
	Assignments  map[string][]byte
}

// SyncResult is the answer to a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// SyncCall is a SyncGroup that may wait for the leader's assignment.
type SyncCall struct {
	c     *Coordinator
	done  chan struct{}
	fired bool
	res   SyncResult
	g     *group
	m     *member
}

func (s *SyncCall) complete(res SyncResult) {
	if s.fired {
		return
	}
	s.fired = true
	s.res = res
	close(s.done)
}

// Done is closed once the result is ready.
func (s *SyncCall) Done() <-chan struct{} { return s.done }

// Wait returns the result, or gives up when ctx ends; the member is then expected to
// heartbeat again within its session timeout.
func (s *SyncCall) Wait(ctx context.Context) SyncResult {
	select {
	case <-s.done:
		return s.res
	case <-ctx.Done():
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.fired {
		return s.res
	}
	s.complete(SyncResult{Err: ctx.Err()})
	g, m := s.g, s.m
	if g != nil && c.groups[g.id] == g && g.members[m.id] == m && m.sync == s {
		m.sync = nil
		c.heartbeat(g, m)
	}
	return s.res
}

// Sync handles a SyncGroup: followers wait for the leader's assignment, the leader's
// call distributes it and makes the group Stable.
func (c *Coordinator) Sync(req SyncRequest) *SyncCall {
	call := &SyncCall{c: c, done: make(chan struct{})}
	if err := c.loadConsumerGroupNow(req.Group); err != nil {
		call.complete(SyncResult{Err: err})
		return call
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.sync(req, call); err != nil {
		call.complete(SyncResult{Err: err})
	}
	return call
}

func (c *Coordinator) sync(req SyncRequest, call *SyncCall) error {
	if req.Group == "" {
		return kerr.InvalidGroupID
	}
	if err := c.owns(req.Group); err != nil {
		return err
	}
	g := c.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if g.cg != nil {
		call.complete(c.classicSyncConsumer(g, req))
		return nil
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return kerr.InconsistentGroupProtocol
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return kerr.UnknownMemberID
	case PreparingRebalance:
		return kerr.RebalanceInProgress
	case CompletingRebalance:
		if m.sync != nil && m.sync != call {
			m.sync.complete(SyncResult{Err: kerr.RebalanceInProgress})
		}
		m.sync = call
		call.g, call.m = g, m
		c.syncReceived(g, m)
		if m.id == g.leader {
			for _, mm := range g.members {
				// Members the leader left out get an empty assignment, as in Kafka.
				mm.assignment = req.Assignments[mm.id]
			}
			c.propagateAssignments(g)
			g.transition(Stable, c.cfg.Now())
		}
		return nil
	case Stable:
		c.syncReceived(g, m)
		call.complete(SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment})
		c.heartbeat(g, m)
		return nil
	}
	return kerr.CoordinatorNotAvailable
}

func (c *Coordinator) syncReceived(g *group, m *member) {
	delete(g.pendingSync, m.id)
	if len(g.pendingSync) == 0 {
		g.syncTimer.Stop()
	}
}

// propagateAssignments answers every waiting SyncGroup with its member's assignment.
func (c *Coordinator) propagateAssignments(g *group) {
	for _, m := range g.members {
		if m.sync == nil {
			continue
		}
		m.sync.complete(SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment})
		m.sync = nil
		// Sessions were not counted while the member waited; they start again now.
		c.heartbeat(g, m)
	}
}

// resetAssignments clears the assignments and fails waiting SyncGroups with err (a new
// rebalance started before the leader's plan arrived).
func (c *Coordinator) resetAssignments(g *group, err error) {
	for _, m := range g.members {
		m.assignment = nil
		if m.sync != nil {
			m.sync.complete(SyncResult{Err: err})
			m.sync = nil
			c.heartbeat(g, m)
		}
	}
}
