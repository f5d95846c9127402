package group

import "github.com/twmb/franz-go/pkg/kerr"

// HeartbeatRequest is one Heartbeat.
type HeartbeatRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
}

// Heartbeat keeps a member's session alive. It fails with REBALANCE_IN_PROGRESS only
// while the group is preparing a rebalance, which is how members learn to rejoin.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	// A consumer group with classic members that this broker took over is loaded
	// from the quorum first, so that they go on without rejoining.
	if err := c.loadConsumerGroupNow(req.Group); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
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
		return c.classicHeartbeatConsumer(g, req)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return kerr.UnknownMemberID
	case PreparingRebalance:
		c.heartbeat(g, m)
		return kerr.RebalanceInProgress
	default:
		// CompletingRebalance too: consumers may heartbeat right after their JoinGroup.
		c.heartbeat(g, m)
		return nil
	}
}

// heartbeat restarts the member's session timer.
func (c *Coordinator) heartbeat(g *group, m *member) {
	c.timers.Arm(&m.expiry, m.sessionTimeout, func() { c.expireMember(g, m) })
}

func (c *Coordinator) expireMember(g *group, m *member) {
	if c.groups[g.id] != g || g.members[m.id] != m || m.awaitingRebalance() {
		return
	}
	c.lg.Info("group member session expired", "group", g.id, "member", m.id, "state", g.state.String())
	c.removeMemberAndUpdate(g, m)
}

// removeMemberAndUpdate removes a member and moves the group on: a rebalance without
// it, or the completion of one that waited for it.
func (c *Coordinator) removeMemberAndUpdate(g *group, m *member) {
	if m.join != nil {
		// UNKNOWN_MEMBER_ID makes a still-running client join again as a new member.
		m.join.complete(JoinResult{Err: kerr.UnknownMemberID, Generation: -1})
		m.join = nil
	}
	if m.sync != nil {
		m.sync.complete(SyncResult{Err: kerr.UnknownMemberID})
		m.sync = nil
	}
	g.remove(m)
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareRebalance(g)
	case PreparingRebalance:
		c.tryCompleteJoin(g)
	}
}

// LeavingMember is one member of a LeaveGroup: by member id, or (v3+, admin removal)
// by group instance id with an empty member id.
type LeavingMember struct {
	MemberID   string
	InstanceID string
	Reason     string
}

// Leave removes members from a group. The error is for the whole request (coordinator
// errors); otherwise the slice has each member's outcome.
func (c *Coordinator) Leave(groupID string, members []LeavingMember) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if groupID == "" {
		return nil, kerr.InvalidGroupID
	}
	if err := c.owns(groupID); err != nil {
		return nil, err
	}
	out := make([]error, len(members))
	g := c.groups[groupID]
	if g == nil {
		for i := range out {
			out[i] = kerr.UnknownMemberID
		}
		return out, nil
	}
	if g.state == Dead {
		return nil, kerr.CoordinatorNotAvailable
	}
	if g.cg != nil {
		return c.classicLeaveConsumer(g, members), nil
	}
	return c.leaveClassic(g, members)
}

// leaveClassic is Leave for a classic group; callers hold c.mu.
func (c *Coordinator) leaveClassic(g *group, members []LeavingMember) ([]error, error) {
	out := make([]error, len(members))
	for i, lm := range members {
		switch {
		case lm.MemberID == "":
			id, ok := g.static[lm.InstanceID]
			if lm.InstanceID == "" || !ok {
				out[i] = kerr.UnknownMemberID
				continue
			}
			c.lg.Info("static member removed from group", "group", g.id, "instance", lm.InstanceID, "reason", lm.Reason)
			c.removeMemberAndUpdate(g, g.members[id])
		case g.pending[lm.MemberID] != nil:
			g.pending[lm.MemberID].Stop()
			delete(g.pending, lm.MemberID)
			c.tryCompleteJoin(g)
		default:
			if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
				out[i] = err
				continue
			}
			c.lg.Debug("member left group", "group", g.id, "member", lm.MemberID, "reason", lm.Reason)
			c.removeMemberAndUpdate(g, g.members[lm.MemberID])
		}
	}
	return out, nil
}
