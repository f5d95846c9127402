package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// Classic members in consumer groups, and the online conversions between the two
// protocols (Kafka 4.0's "upgrade" and "downgrade", group.consumer.migration.policy).
//
// A member speaking the classic protocol (JoinGroup, SyncGroup, Heartbeat) may join a
// live consumer group. It is a consumer-group member like the others: its subscription
// and owned partitions come from its JoinGroup metadata, the server assignor computes
// its target, and it reconciles in its JoinGroups, as Kafka's
// classicGroupJoinToConsumerGroup does. Its JoinGroup answer carries its member epoch as
// the generation and no member list (it is not asked to assign); its SyncGroup answer is
// what it may own now (without what it must revoke, and without what another member has
// not released yet); its Heartbeat gets REBALANCE_IN_PROGRESS while it is not at the
// group epoch with its whole target, which makes it join again, reporting what it owns.
// A cooperative member revokes what its SyncGroup answer left out and joins again at
// once, which is when those partitions are released: as with KIP-848 members, no
// partition is handed out before its previous owner has let it go.
//
// Upgrade: a live classic group whose members all use the consumer protocol type
// converts to a consumer group when a KIP-848 member joins it (the classic members keep
// their assignments, at the group's generation as their epoch). Downgrade: a consumer
// group whose last KIP-848 member leaves while classic members remain converts back to
// a classic group, which then rebalances. The policy allows each direction; empty groups
// convert whatever it says.
//
// A classic member's session timeout and protocols go through the quorum with the rest
// of the group's state, and its SyncGroup and Heartbeat load the group like a KIP-848
// heartbeat does, so a coordinator taking the group over continues it without a rejoin.

// Migration policies (group.consumer.migration.policy).
const (
	MigrationDisabled      = "disabled"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationBidirectional = "bidirectional"
)

func (c *Coordinator) upgradeEnabled() bool {
	p := c.cfg.ConsumerMigrationPolicy
	return p == MigrationUpgrade || p == MigrationBidirectional
}

func (c *Coordinator) downgradeEnabled() bool {
	p := c.cfg.ConsumerMigrationPolicy
	return p == MigrationDowngrade || p == MigrationBidirectional
}

// classicMember is what a consumer-group member using the classic protocol has beyond
// a KIP-848 member's state.
type classicMember struct {
	sessionTimeout time.Duration
	protocols      []Protocol
}

func (cm *classicMember) toState() *metadata.ConsumerGroupClassicMember {
	if cm == nil {
		return nil
	}
	out := &metadata.ConsumerGroupClassicMember{SessionTimeoutMs: int32(cm.sessionTimeout.Milliseconds())}
	for _, p := range cm.protocols {
		out.Protocols = append(out.Protocols, metadata.ConsumerGroupClassicProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	return out
}

func classicFromState(st *metadata.ConsumerGroupClassicMember) *classicMember {
	if st == nil {
		return nil
	}
	out := &classicMember{sessionTimeout: time.Duration(st.SessionTimeoutMs) * time.Millisecond}
	for _, p := range st.Protocols {
		out.protocols = append(out.protocols, Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return out
}

// supports reports whether the member offers the named protocol.
func (cm *classicMember) supports(name string) bool {
	return slices.ContainsFunc(cm.protocols, func(p Protocol) bool { return p.Name == name })
}

// classicProtocol is the protocol a classic member of a consumer group is told to use:
// the first it lists that every other classic member supports too, "" when none is.
func (cg *consumerGroup) classicProtocol(id string, protocols []Protocol) string {
	for _, p := range protocols {
		ok := true
		for _, m := range cg.members {
			if m.id != id && m.classic != nil && !m.classic.supports(p.Name) {
				ok = false
				break
			}
		}
		if ok {
			return p.Name
		}
	}
	return ""
}

// JoinContext is Join with the context of the request, used to load a consumer group
// from the quorum first and to write a classic member's join to it before answering.
func (c *Coordinator) JoinContext(ctx context.Context, req JoinRequest) *JoinCall {
	if err := c.loadConsumerGroup(ctx, req.Group); err != nil {
		call := c.newJoinCall()
		c.mu.Lock()
		call.complete(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1})
		c.mu.Unlock()
		return call
	}
	call := c.newJoinCall()
	c.mu.Lock()
	c.join(req, call)
	staged, g := call.staged, call.g
	var st *metadata.ConsumerGroupState
	if staged != nil {
		st = c.consumerSnapshot(g)
	}
	c.mu.Unlock()
	if staged == nil {
		return call
	}
	res := *staged
	if err := c.persistConsumer(ctx, g, st, false); err != nil {
		res = JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}
	}
	c.mu.Lock()
	call.complete(res)
	c.mu.Unlock()
	return call
}

// classicJoinConsumer is a JoinGroup to a live consumer group. The answer is staged on
// the call (JoinContext answers once the group's state is written); callers hold c.mu.
func (c *Coordinator) classicJoinConsumer(g *group, req JoinRequest, call *JoinCall) {
	fail := func(err error) { call.complete(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}) }
	cg := g.cg
	if req.ProtocolType != consumerProtocolType || len(req.Protocols) == 0 {
		fail(fmt.Errorf("%w: group %s is a consumer group; classic members must use protocol type consumer", kerr.InconsistentGroupProtocol, g.id))
		return
	}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(req.Protocols[0].Metadata); err != nil {
		fail(fmt.Errorf("%w: consumer protocol metadata: %v", kerr.InconsistentGroupProtocol, err))
		return
	}
	protocol := cg.classicProtocol(req.MemberID, req.Protocols)
	if protocol == "" {
		fail(fmt.Errorf("%w: no protocol shared with the group's other classic members", kerr.InconsistentGroupProtocol))
		return
	}
	if req.MemberID == "" {
		id := newMemberID(req.ClientID)
		if req.RequireKnownMemberID && req.InstanceID == "" {
			// As for classic groups, the member learns its id first; nothing is kept
			// until it joins with it.
			call.complete(JoinResult{Err: kerr.MemberIDRequired, MemberID: id, Generation: -1})
			return
		}
		req.MemberID = id
	}
	m := cg.members[req.MemberID]
	if m != nil && m.classic == nil {
		fail(fmt.Errorf("%w: member %s uses the consumer protocol", kerr.UnknownMemberID, req.MemberID))
		return
	}
	if m == nil {
		if max := c.cfg.ConsumerMaxGroupSize; max > 0 && len(cg.members) >= max {
			fail(fmt.Errorf("%w: consumer group %s has %d members (group.consumer.max.size)", kerr.GroupMaxSizeReached, g.id, len(cg.members)))
			return
		}
		m = &consumerMember{id: req.MemberID, assigned: assignment{}, revoking: assignment{}}
		cg.members[m.id] = m
		c.lg.Info("classic member joined a consumer group", "group", g.id, "member", m.id, "client_id", req.ClientID)
	}
	m.classic = &classicMember{sessionTimeout: req.SessionTimeout, protocols: req.Protocols}
	names := slices.Clone(meta.Topics)
	if names == nil {
		names = []string{}
	}
	hr := ConsumerHeartbeatRequest{Names: names, RebalanceTimeout: req.RebalanceTimeout, ClientID: req.ClientID, ClientHost: req.ClientHost}
	if req.InstanceID != "" {
		hr.InstanceID = &req.InstanceID
	}
	changed := c.updateConsumerMember(g, m, hr, nil)
	c.consumerUpdate(g, changed)
	c.consumerTouch(g, m)
	c.reconcile(g, m, c.ownedFromMetadata(meta))
	c.setConsumerState(g)
	call.g = g
	call.staged = &JoinResult{MemberID: m.id, Generation: m.epoch, ProtocolType: consumerProtocolType, Protocol: protocol}
}

// ownedFromMetadata is what a classic member says it owns (the metadata's owned
// partitions, v1+; an eager member owns nothing when it joins).
func (c *Coordinator) ownedFromMetadata(meta kmsg.ConsumerMemberMetadata) assignment {
	im := c.store.Current()
	out := assignment{}
	for _, tp := range meta.OwnedPartitions {
		t := im.Topic(tp.Topic)
		if t == nil {
			continue
		}
		for _, p := range tp.Partitions {
			out.add(tpKey{t.ID, p})
		}
	}
	return out
}

// classicSyncConsumer is a SyncGroup of a classic member of a consumer group: its
// answer is what the member owns now. Callers hold c.mu.
func (c *Coordinator) classicSyncConsumer(g *group, req SyncRequest) SyncResult {
	m, err := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return SyncResult{Err: err}
	}
	if (req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType) || (req.Protocol != nil && !m.classic.supports(*req.Protocol)) {
		return SyncResult{Err: kerr.InconsistentGroupProtocol}
	}
	protocol := g.cg.classicProtocol(m.id, m.classic.protocols)
	if req.Protocol != nil {
		protocol = *req.Protocol
	}
	c.consumerTouch(g, m)
	return SyncResult{ProtocolType: consumerProtocolType, Protocol: protocol, Assignment: c.encodeClassicAssignment(g, m.assigned)}
}

// classicHeartbeatConsumer is a Heartbeat of a classic member of a consumer group:
// REBALANCE_IN_PROGRESS while its assignment has to change (Kafka's
// classicGroupHeartbeatToConsumerGroup). Callers hold c.mu.
func (c *Coordinator) classicHeartbeatConsumer(g *group, req HeartbeatRequest) error {
	m, err := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return err
	}
	c.consumerTouch(g, m)
	if m.state != memberStable || m.epoch != g.cg.epoch {
		return kerr.RebalanceInProgress
	}
	return nil
}

// classicMember finds a classic member of a consumer group at its epoch.
func (g *group) classicMember(id, instanceID string, generation int32) (*consumerMember, error) {
	m := g.cg.members[id]
	if m == nil || m.classic == nil {
		return nil, kerr.UnknownMemberID
	}
	if instanceID != "" && m.instanceID != instanceID {
		return nil, kerr.FencedInstanceID
	}
	if generation != m.epoch {
		return nil, kerr.IllegalGeneration
	}
	return m, nil
}

// classicLeaveConsumer is a LeaveGroup of members of a consumer group: classic members
// by member id, any member by instance id (an admin's removal). Callers hold c.mu.
func (c *Coordinator) classicLeaveConsumer(g *group, members []LeavingMember) []error {
	out := make([]error, len(members))
	for i, lm := range members {
		var m *consumerMember
		if lm.MemberID == "" {
			for _, cm := range g.cg.members {
				if lm.InstanceID != "" && cm.instanceID == lm.InstanceID {
					m = cm
				}
			}
		} else if cm := g.cg.members[lm.MemberID]; cm != nil && cm.classic != nil {
			m = cm
			if lm.InstanceID != "" && cm.instanceID != lm.InstanceID {
				out[i] = kerr.FencedInstanceID
				continue
			}
		}
		if m == nil {
			out[i] = kerr.UnknownMemberID
			continue
		}
		c.lg.Info("member left consumer group with LeaveGroup", "group", g.id, "member", m.id, "reason", lm.Reason)
		c.removeConsumerMember(g, m)
		c.maybeDowngrade(g)
		if g.cg == nil {
			// Downgraded: the rest are classic members of a classic group now.
			rest, _ := c.leaveClassic(g, members[i+1:])
			copy(out[i+1:], rest)
			break
		}
	}
	return out
}

// encodeClassicAssignment is a ConsumerMemberAssignment of a.
func (c *Coordinator) encodeClassicAssignment(g *group, a assignment) []byte {
	out := kmsg.NewConsumerMemberAssignment()
	for _, tp := range *c.assignmentOf(g, a) {
		if tp.Topic == "" {
			continue // a topic no longer subscribed to has no name here
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = tp.Topic, tp.Partitions
		out.Topics = append(out.Topics, t)
	}
	return out.AppendTo(nil)
}

// upgradeClassicGroup converts a live classic group to a consumer group for a KIP-848
// member joining it, as Kafka's ConsumerGroup.fromClassicGroup: every classic member
// keeps the assignment of the current generation, with the generation as its member
// epoch and the group epoch. Callers hold c.mu; an error says why it may not.
func (c *Coordinator) upgradeClassicGroup(g *group) error {
	notConsumer := fmt.Errorf("%w: group %s is not a consumer group", kerr.GroupIDNotFound, g.id)
	if !c.upgradeEnabled() || g.protocolType != consumerProtocolType {
		return notConsumer
	}
	if g.state != Stable {
		// Kafka converts only a group whose members hold a whole generation's
		// assignment; the joining member retries until the rebalance is over.
		return fmt.Errorf("%w: classic group %s is rebalancing; it converts once stable", kerr.CoordinatorLoadInProgress, g.id)
	}
	if max := c.cfg.ConsumerMaxGroupSize; max > 0 && len(g.members) >= max {
		return fmt.Errorf("%w: classic group %s has %d members (group.consumer.max.size)", kerr.GroupMaxSizeReached, g.id, len(g.members))
	}
	im := c.store.Current()
	cg := newConsumerGroup()
	cg.epoch = g.generation
	cg.version = g.cgVersion
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return notConsumer
		}
		var asg kmsg.ConsumerMemberAssignment
		if len(m.assignment) > 0 {
			if err := asg.ReadFrom(m.assignment); err != nil {
				return notConsumer
			}
		}
		names := slices.Clone(meta.Topics)
		slices.Sort(names)
		cm := &consumerMember{
			id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			epoch: g.generation, previousEpoch: g.generation - 1, rebalanceTimeout: m.rebalanceTimeout,
			names: slices.Compact(names), assigned: assignment{}, revoking: assignment{},
			classic: &classicMember{sessionTimeout: m.sessionTimeout, protocols: m.protocols},
		}
		for _, tp := range asg.Topics {
			if t := im.Topic(tp.Topic); t != nil {
				for _, p := range tp.Partitions {
					cm.assigned.add(tpKey{t.ID, p})
				}
			}
		}
		cg.members[cm.id] = cm
	}
	for _, cm := range cg.members {
		cm.assigned.each(func(k tpKey) {
			if _, taken := cg.owners[k]; !taken {
				cg.owners[k] = cm.id
			}
		})
		cg.target[cm.id] = cm.assigned.clone()
	}
	cg.topics = cg.subscribedTopics(im)
	cg.assignor = c.groupAssignor(cg)
	c.lg.Info("classic group converted to a consumer group (online upgrade)", "group", g.id, "generation", g.generation, "members", len(g.members))
	for _, m := range g.members {
		m.expiry.Stop()
	}
	for _, t := range g.pending {
		t.Stop()
	}
	g.joinTimer.Stop()
	g.syncTimer.Stop()
	g.members, g.static, g.pending, g.pendingSync = map[string]*member{}, map[string]string{}, map[string]*timer.Slot{}, map[string]struct{}{}
	g.leader, g.protocol, g.subscribed = "", "", nil
	g.cg = cg
	for _, cm := range cg.members {
		c.consumerTouch(g, cm)
	}
	return nil
}

// maybeDowngrade converts a consumer group whose members all use the classic protocol
// back to a classic group (Kafka's online downgrade), which then rebalances with the
// classic protocol from the members' current assignments. Its state in the quorum is
// removed. Callers hold c.mu.
func (c *Coordinator) maybeDowngrade(g *group) {
	cg := g.cg
	if cg == nil || g.state == Dead || len(cg.members) == 0 || !c.downgradeEnabled() || c.closed {
		return
	}
	if c.cfg.MaxGroupSize > 0 && len(cg.members) > c.cfg.MaxGroupSize {
		return
	}
	for _, m := range cg.members {
		if m.classic == nil {
			return
		}
	}
	c.lg.Info("consumer group converted to a classic group (online downgrade)", "group", g.id, "group_epoch", cg.epoch, "members", len(cg.members))
	cg.stopTimers()
	g.cg = nil
	g.protocolType = consumerProtocolType
	g.generation = cg.epoch
	ids := slices.Sorted(maps.Keys(cg.members))
	for _, id := range ids {
		cm := cg.members[id]
		m := &member{
			id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			sessionTimeout: cm.classic.sessionTimeout, rebalanceTimeout: cm.rebalanceTimeout,
			protocolType: consumerProtocolType, protocols: cm.classic.protocols,
			assignment: c.encodeClassicAssignmentOf(cg, cm.assigned),
		}
		g.add(m)
	}
	g.protocol = g.selectProtocol()
	g.computeSubscribed()
	g.transition(Stable, c.cfg.Now())
	for _, m := range g.members {
		c.heartbeat(g, m)
	}
	c.prepareRebalance(g)

	if c.consumerStore() != nil {
		cg.version++
		g.cgVersion = cg.version
		st := &metadata.ConsumerGroupState{Group: g.id, CoordinatorEpoch: g.coordEpoch, Version: cg.version}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			ctx, cancel := context.WithTimeout(c.bg, c.cfg.StoreTimeout)
			defer cancel()
			if err := c.persistConsumer(ctx, g, st, true); err != nil {
				c.lg.Warn("removing a downgraded consumer group's state from the quorum failed", "group", g.id, "err", err)
			}
		}()
	}
}

// encodeClassicAssignmentOf is encodeClassicAssignment for a consumer group no longer
// attached to its group.
func (c *Coordinator) encodeClassicAssignmentOf(cg *consumerGroup, a assignment) []byte {
	return c.encodeClassicAssignment(&group{cg: cg}, a)
}
