package group

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer"
)

// JoinRequest is one JoinGroup.
type JoinRequest struct {
	Group string
	// MemberID is "" for a member joining for the first time.
	MemberID string
	// InstanceID is group.instance.id, "" for a dynamic member.
	InstanceID       string
	ClientID         string
	ClientHost       string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol
	// RequireKnownMemberID (JoinGroup v4+): a new dynamic member first gets
	// MEMBER_ID_REQUIRED with its id and must join again with it.
	RequireKnownMemberID bool
	// SupportsSkipAssignment (JoinGroup v9+, KIP-814): a restarted static leader gets the
	// member list but is told not to compute a new assignment.
	SupportsSkipAssignment bool
	Reason                 string
}

// Member is one member as the leader's JoinGroup response lists it.
type Member struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

// JoinResult is the answer to a JoinGroup. Err is a *kerr.Error (possibly wrapped) or,
// when the waiting caller gave up, its context's error.
type JoinResult struct {
	Err            error
	MemberID       string
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	Members        []Member // only in the leader's result
	SkipAssignment bool
}

// JoinCall is a JoinGroup that may have to wait for the rebalance to complete.
type JoinCall struct {
	c     *Coordinator
	done  chan struct{}
	fired bool // under c.mu
	res   JoinResult
	g     *group
	m     *member
	// staged is the answer to a classic member's join of a consumer group, given once
	// the group's state is written (JoinContext).
	staged *JoinResult
}

func (c *Coordinator) newJoinCall() *JoinCall { return &JoinCall{c: c, done: make(chan struct{})} }

// complete answers the call once; the caller holds c.mu.
func (j *JoinCall) complete(res JoinResult) {
	if j.fired {
		return
	}
	j.fired = true
	j.res = res
	close(j.done)
}

// Done is closed once the result is ready.
func (j *JoinCall) Done() <-chan struct{} { return j.done }

// Wait returns the result, or gives up when ctx ends (the client's connection closed):
// the member then no longer counts as joining, and a new member is dropped at once.
func (j *JoinCall) Wait(ctx context.Context) JoinResult {
	select {
	case <-j.done:
		return j.res
	case <-ctx.Done():
	}
	c := j.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if j.fired {
		return j.res
	}
	j.complete(JoinResult{Err: ctx.Err(), MemberID: "", Generation: -1})
	g, m := j.g, j.m
	if g == nil || c.groups[g.id] != g || g.members[m.id] != m || m.join != j {
		return j.res
	}
	m.join = nil
	if m.isNew {
		c.removeMemberAndUpdate(g, m)
	} else {
		c.heartbeat(g, m)
	}
	return j.res
}

// Join handles a JoinGroup. The returned call is often already complete (errors, a
// member id to retry with, a rejoin that changes nothing); otherwise it completes when
// the rebalance does.
func (c *Coordinator) Join(req JoinRequest) *JoinCall {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
	defer cancel()
	return c.JoinContext(ctx, req)
}

func (c *Coordinator) join(req JoinRequest, call *JoinCall) {
	fail := func(err error) { call.complete(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}) }
	if req.Group == "" {
		fail(kerr.InvalidGroupID)
		return
	}
	if err := c.owns(req.Group); err != nil {
		fail(err)
		return
	}
	if c.isShareGroup(req.Group) {
		// Kafka's answer to a classic join of a group of another type.
		fail(fmt.Errorf("%w: group %s is a share group", kerr.InconsistentGroupProtocol, req.Group))
		return
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout)
		return
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	g := c.groups[req.Group]
	if g != nil && g.cg != nil {
		if g.state == Dead {
			fail(kerr.CoordinatorNotAvailable)
			return
		}
		if len(g.cg.members) > 0 {
			c.classicJoinConsumer(g, req, call)
			return
		}
		// An empty consumer group becomes a classic one (Kafka's downgrade of an
		// empty group).
		c.lg.Info("empty consumer group converted to a classic group", "group", g.id)
		g.cg.stopTimers()
		g.cg, g.protocolType = nil, ""
	}
	created := false
	if g == nil {
		if req.MemberID != "" {
			fail(kerr.UnknownMemberID)
			return
		}
		g = c.newGroup(req.Group)
		created = true
	}
	switch {
	case g.state == Dead:
		// Being deleted; the client retries (and finds the new group).
		fail(kerr.CoordinatorNotAvailable)
	case c.cfg.MaxGroupSize > 0 && g.members[req.MemberID] == nil && len(g.members)+len(g.pending) >= c.cfg.MaxGroupSize && g.pending[req.MemberID] == nil:
		fail(kerr.GroupMaxSizeReached)
	case !g.supports(req.ProtocolType, req.Protocols):
		fail(kerr.InconsistentGroupProtocol)
	case req.MemberID == "":
		c.joinNewMember(g, req, call)
	default:
		c.joinKnownMember(g, req, call)
	}
	if g.state == PreparingRebalance {
		c.tryCompleteJoin(g)
	}
	if created && len(g.members) == 0 && len(g.pending) == 0 && g.state == Empty {
		delete(c.groups, g.id)
	}
}

func (c *Coordinator) joinNewMember(g *group, req JoinRequest, call *JoinCall) {
	if req.InstanceID != "" {
		id := newMemberID(req.InstanceID)
		if old, ok := g.static[req.InstanceID]; ok {
			c.replaceStaticMember(g, g.members[old], id, req, call)
			return
		}
		c.addMemberAndRebalance(g, id, req, call)
		return
	}
	id := newMemberID(req.ClientID)
	if req.RequireKnownMemberID {
		// The member learns its id first, so that a JoinGroup lost to a timeout
		// cannot leave a member behind that nobody will ever heartbeat for.
		slot := &timer.Slot{}
		g.pending[id] = slot
		c.timers.Arm(slot, req.SessionTimeout, func() { c.expirePending(g, id) })
		call.complete(JoinResult{Err: kerr.MemberIDRequired, MemberID: id, Generation: -1})
		return
	}
	c.addMemberAndRebalance(g, id, req, call)
}

func (c *Coordinator) joinKnownMember(g *group, req JoinRequest, call *JoinCall) {
	fail := func(err error) { call.complete(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}) }
	if slot, ok := g.pending[req.MemberID]; ok {
		if req.InstanceID != "" {
			// Static members never get MEMBER_ID_REQUIRED.
			fail(kerr.UnknownMemberID)
			return
		}
		slot.Stop()
		delete(g.pending, req.MemberID)
		c.addMemberAndRebalance(g, req.MemberID, req, call)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		fail(err)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		c.updateMemberAndRebalance(g, m, req, call)
	case CompletingRebalance:
		if !m.matches(req.Protocols) {
			c.updateMemberAndRebalance(g, m, req, call)
			return
		}
		// The member lost its JoinGroup response: hand it the current generation again.
		res := c.generationResult(g, m)
		if m.id == g.leader {
			res.Members = g.memberList()
		}
		call.complete(res)
	case Stable:
		if m.id == g.leader || !m.matches(req.Protocols) {
			// A leader's rejoin forces a rebalance: it is how a leader reacts to changes
			// (topic metadata) that its members' metadata does not show.
			c.updateMemberAndRebalance(g, m, req, call)
			return
		}
		call.complete(c.generationResult(g, m))
	default:
		fail(kerr.UnknownMemberID)
	}
}

func (c *Coordinator) generationResult(g *group, m *member) JoinResult {
	return JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
}

func (c *Coordinator) addMemberAndRebalance(g *group, id string, req JoinRequest, call *JoinCall) {
	m := &member{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		sessionTimeout:   req.SessionTimeout,
		rebalanceTimeout: req.RebalanceTimeout,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		isNew:            true,
	}
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m)
	m.join = call
	call.g, call.m = g, m
	// A new member cannot heartbeat before it learns its generation; bound its wait.
	c.timers.Arm(&m.expiry, c.cfg.NewMemberJoinTimeout, func() { c.expireMember(g, m) })
	c.maybePrepareRebalance(g)
}

func (c *Coordinator) updateMemberAndRebalance(g *group, m *member, req JoinRequest, call *JoinCall) {
	c.setJoin(g, m, req, call)
	c.maybePrepareRebalance(g)
}

func (c *Coordinator) setJoin(g *group, m *member, req JoinRequest, call *JoinCall) {
	if m.join != nil && m.join != call {
		// An earlier JoinGroup the client has given up on (it sent another).
		m.join.complete(JoinResult{Err: kerr.RebalanceInProgress, MemberID: m.id, Generation: -1})
	}
	m.protocols = req.Protocols
	m.sessionTimeout = req.SessionTimeout
	m.rebalanceTimeout = req.RebalanceTimeout
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.join = call
	call.g, call.m = g, m
}

// replaceStaticMember: a static member restarted and joins with its instance id but no
// member id. It takes over the old member (which is fenced) and, when nothing about the
// group's protocol changes, keeps its assignment without a rebalance.
func (c *Coordinator) replaceStaticMember(g *group, old *member, newID string, req JoinRequest, call *JoinCall) {
	oldID := old.id
	prevLeader := g.leader
	if old.join != nil {
		old.join.complete(JoinResult{Err: kerr.FencedInstanceID, MemberID: oldID, Generation: -1})
		old.join = nil
	}
	if old.sync != nil {
		old.sync.complete(SyncResult{Err: kerr.FencedInstanceID})
		old.sync = nil
	}
	delete(g.members, oldID)
	old.id = newID
	g.members[newID] = old
	g.static[req.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	c.setJoin(g, old, req, call)
	c.heartbeat(g, old)

	switch g.state {
	case Stable:
		if g.selectProtocol() != g.protocol {
			c.maybePrepareRebalance(g)
			return
		}
		old.join = nil
		res := c.generationResult(g, old)
		res.Leader = prevLeader
		if req.SupportsSkipAssignment {
			res.Leader = g.leader
			if old.id == g.leader {
				res.Members = g.memberList()
				res.SkipAssignment = true
			}
		}
		call.complete(res)
	case CompletingRebalance:
		// The leader may already be assigning to the old member id: start over so that
		// the new id gets an assignment.
		c.prepareRebalance(g)
	case PreparingRebalance:
		// It simply counts as rejoined.
	}
}

func (c *Coordinator) maybePrepareRebalance(g *group) {
	switch g.state {
	case Stable, CompletingRebalance, Empty:
		c.prepareRebalance(g)
	}
}

func (c *Coordinator) prepareRebalance(g *group) {
	if g.state == CompletingRebalance {
		c.resetAssignments(g, kerr.RebalanceInProgress)
	}
	g.syncTimer.Stop()
	clear(g.pendingSync)
	wasEmpty := g.state == Empty
	g.transition(PreparingRebalance, c.cfg.Now())
	rt := g.rebalanceTimeout()
	if wasEmpty {
		delay := c.cfg.InitialRebalanceDelay
		c.armInitialJoin(g, delay, max(rt-delay, 0))
		return
	}
	g.initialJoin = false
	c.timers.Arm(&g.joinTimer, rt, func() { c.completeJoin(g) })
	c.tryCompleteJoin(g)
}

// armInitialJoin is Kafka's InitialDelayedJoin: the first rebalance of an empty group
// waits delay, and again (up to the rebalance timeout) while new members keep coming.
func (c *Coordinator) armInitialJoin(g *group, delay, remaining time.Duration) {
	g.initialJoin = true
	c.timers.Arm(&g.joinTimer, delay, func() {
		if g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			next := min(c.cfg.InitialRebalanceDelay, remaining)
			c.armInitialJoin(g, next, max(remaining-delay, 0))
			return
		}
		g.initialJoin = false
		c.completeJoin(g)
	})
}

func (c *Coordinator) tryCompleteJoin(g *group) {
	if g.state == PreparingRebalance && !g.initialJoin && g.hasAllMembersJoined() {
		c.completeJoin(g)
	}
}

// completeJoin forms the next generation from the members that rejoined.
func (c *Coordinator) completeJoin(g *group) {
	if g.state != PreparingRebalance || c.groups[g.id] != g {
		return
	}
	g.joinTimer.Stop()
	g.initialJoin = false
	g.newMemberAdded = false
	// Dynamic members that did not rejoin are gone; static ones keep their place until
	// their session times out, so that a restart does not reshuffle the group.
	for _, m := range g.sortedMembers() {
		if m.join == nil && m.instanceID == "" {
			g.remove(m)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left: wait for them (or for
		// their sessions to expire).
		c.timers.Arm(&g.joinTimer, g.rebalanceTimeout(), func() { c.completeJoin(g) })
		return
	}
	g.generation++
	c.rebalances.Add(1)
	now := c.cfg.Now()
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscribed = nil
		g.transition(Empty, now)
		c.lg.Debug("group is empty", "group", g.id, "generation", g.generation)
		return
	}
	g.protocol = g.selectProtocol()
	g.computeSubscribed()
	g.transition(CompletingRebalance, now)
	c.lg.Debug("group rebalanced", "group", g.id, "generation", g.generation, "members", len(g.members), "protocol", g.protocol, "leader", g.leader)
	for _, m := range g.sortedMembers() {
		res := c.generationResult(g, m)
		if m.id == g.leader {
			res.Members = g.memberList()
		}
		if m.join != nil {
			m.join.complete(res)
			m.join = nil
		}
		m.isNew = false
		c.heartbeat(g, m)
		g.pendingSync[m.id] = struct{}{}
	}
	gen := g.generation
	c.timers.Arm(&g.syncTimer, g.rebalanceTimeout(), func() { c.expirePendingSync(g, gen) })
}

// expirePendingSync drops the members of generation gen that never sent SyncGroup
// within the rebalance timeout, and rebalances without them.
func (c *Coordinator) expirePendingSync(g *group, gen int32) {
	if c.groups[g.id] != g || g.generation != gen || len(g.pendingSync) == 0 {
		return
	}
	if g.state != CompletingRebalance && g.state != Stable {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			c.lg.Info("removing group member that did not sync", "group", g.id, "member", id)
			g.remove(m)
		}
	}
	c.prepareRebalance(g)
}

// expirePending drops a member id handed out with MEMBER_ID_REQUIRED that never joined.
func (c *Coordinator) expirePending(g *group, id string) {
	if c.groups[g.id] != g {
		return
	}
	delete(g.pending, id)
	c.tryCompleteJoin(g)
}
