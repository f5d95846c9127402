package group

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// Consumer groups (KIP-848, the "consumer" group protocol). Members heartbeat with
// ConsumerGroupHeartbeat; the coordinator computes every member's target assignment with
// a server-side assignor and moves each member towards it one heartbeat at a time, as
// Kafka's GroupMetadataManager and CurrentAssignmentBuilder do:
//
//   - the group epoch is bumped by every change that alters what the assignor sees (a
//     member joining or leaving, a subscription or assignor change, a subscribed topic
//     created, deleted or grown); the target assignment is recomputed at once, so the
//     target assignment epoch always equals the group epoch here (Kafka's Assigning
//     state, an assignment still being computed, never shows);
//   - a member whose target takes partitions away from it keeps its epoch and is told
//     its assignment without them (UNREVOKED_PARTITIONS); only when a heartbeat reports
//     that it no longer owns them are they released, and it moves on;
//   - a partition of a member's target still owned (assigned or being revoked) by
//     another member is withheld (UNRELEASED_PARTITIONS) until that member has let it
//     go, so no partition is ever owned by two members at once;
//   - a member that does not revoke within its rebalance timeout, or is not heard from
//     within the session timeout, is removed, and its partitions are freed.
//
// Consumer groups share the classic coordinator's map, lock, offsets and fences: a
// *group with cg set is a consumer group. Its members live in cg, so the classic
// membership paths (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) find no classic
// member in it.

// ConsumerGroupType is the group type of consumer groups in ListGroups.
const ConsumerGroupType = "consumer"

// Reconciling and Assigning are consumer-group states (Kafka's ConsumerGroupState).
// Classic groups never take them.
const (
	// Reconciling: some member has not reached its target assignment yet.
	Reconciling State = iota + 10
	// Assigning: the target assignment is being computed. Never taken here, as the
	// assignment is computed in the heartbeat that bumps the group epoch.
	Assigning
)

// memberState is a member's reconciliation state, named as Kafka's MemberState.
type memberState int8

const (
	memberStable memberState = iota
	memberUnrevoked
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return "STABLE"
}

// topicID is a topic's id; partitions are keyed by id, as in Kafka, so that a topic
// deleted and created again under the same name is a different topic.
type topicID = [16]byte

// tpKey is one partition of one topic.
type tpKey struct {
	topic topicID
	part  int32
}

// assignment is a set of partitions by topic id, each list sorted.
type assignment map[topicID][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) has(k tpKey) bool {
	_, ok := slices.BinarySearch(a[k.topic], k.part)
	return ok
}

func (a assignment) add(k tpKey) {
	ps := a[k.topic]
	if i, ok := slices.BinarySearch(ps, k.part); !ok {
		a[k.topic] = slices.Insert(ps, i, k.part)
	}
}

func (a assignment) each(fn func(tpKey)) {
	for t, ps := range a {
		for _, p := range ps {
			fn(tpKey{t, p})
		}
	}
}

func (a assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if a.size() != b.size() {
		return false
	}
	for t, ps := range a {
		if len(ps) > 0 && !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// minus is a without the partitions of b.
func (a assignment) minus(b assignment) assignment {
	out := assignment{}
	a.each(func(k tpKey) {
		if !b.has(k) {
			out.add(k)
		}
	})
	return out
}

// intersect is the partitions in both a and b.
func (a assignment) intersect(b assignment) assignment {
	out := assignment{}
	a.each(func(k tpKey) {
		if b.has(k) {
			out.add(k)
		}
	})
	return out
}

// consumerGroup is the consumer-protocol state of a group.
type consumerGroup struct {
	// epoch is the group epoch; the target assignment is always at it.
	epoch   int32
	members map[string]*consumerMember
	// target is each member's target assignment at epoch.
	target map[string]assignment
	// owners maps every partition some member owns (assigned, or being revoked) to that
	// member: a partition is handed to a member only when it has no other owner.
	owners map[tpKey]string
	// topics is what the target was computed from: every subscribed topic that exists,
	// by name.
	topics map[string]consumerTopic
	// assignor is the assignor the target was computed with.
	assignor string
	// version numbers the states written to the quorum under this coordinator epoch;
	// persisted is the last one written (or loaded), nil when the next heartbeat must
	// write the state whatever it is (consumer_store.go).
	version   int64
	persisted *metadata.ConsumerGroupState
}

type consumerTopic struct {
	id    topicID
	parts int32
}

type consumerMember struct {
	id            string
	instanceID    string
	rackID        string
	clientID      string
	clientHost    string
	epoch         int32
	previousEpoch int32
	state         memberState
	// rebalanceTimeout bounds how long the member may take to revoke partitions.
	rebalanceTimeout time.Duration
	// names is the subscription by topic names (sorted), regex the one by regular
	// expression; a member has one or both.
	names    []string
	regex    string
	re       *regexp.Regexp
	assignor string // the server assignor the member asks for, "" for the group's
	// assigned are the partitions the member owns or is about to (in its assignment);
	// revoking those it was told to give up and has not confirmed yet.
	assigned assignment
	revoking assignment
	expiry   timer.Slot
	revoke   timer.Slot
	// classic is set for a member using the classic protocol (consumer_classic.go).
	classic *classicMember
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*consumerMember{},
		target:  map[string]assignment{},
		owners:  map[tpKey]string{},
		topics:  map[string]consumerTopic{},
	}
}

// ConsumerHeartbeatRequest is one ConsumerGroupHeartbeat.
type ConsumerHeartbeatRequest struct {
	Group    string
	MemberID string
	// MemberEpoch is 0 to join, -1 to leave, -2 for a static member's temporary leave,
	// else the member's current epoch.
	MemberEpoch int32
	// InstanceID, RackID, Regex and Assignor are nil when unchanged since the last
	// heartbeat; Names is nil when unchanged.
	InstanceID *string
	RackID     *string
	// RebalanceTimeout is negative when unchanged.
	RebalanceTimeout time.Duration
	Names            []string
	Regex            *string
	Assignor         *string
	// Owned is the partitions the member owns now; nil when unchanged since the last
	// heartbeat.
	Owned      []TopicPartitions
	ClientID   string
	ClientHost string
}

// TopicPartitions is a topic's partitions in an assignment; Topic is set in
// descriptions only.
type TopicPartitions struct {
	TopicID    [16]byte
	Topic      string
	Partitions []int32
}

// ConsumerHeartbeatResponse answers a ConsumerGroupHeartbeat.
type ConsumerHeartbeatResponse struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment, when set, is what the member must own from now on.
	Assignment *[]TopicPartitions
}

// maxConsumerMemberIDLen bounds the client-generated member id (a UUID in base64 or
// text form); Kafka does not bound it beyond the string's, so this is generous.
const maxConsumerMemberIDLen = 255

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat: a join (epoch 0), a leave (-1, or
// -2 for a static member), or a heartbeat that keeps the member's session, may carry a
// new subscription and reports what it owns, from which its reconciliation moves on.
//
// A heartbeat that changed the group is answered once the group's state is committed
// to the quorum (consumer_store.go).
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, req ConsumerHeartbeatRequest) ConsumerHeartbeatResponse {
	resp := ConsumerHeartbeatResponse{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	if err := validateConsumerHeartbeat(req); err != nil {
		resp.Err = err
		resp.HeartbeatInterval = c.consumerHeartbeatInterval(req.Group)
		return resp
	}
	if err := c.loadConsumerGroup(ctx, req.Group); err != nil {
		resp.Err = err
		resp.HeartbeatInterval = c.consumerHeartbeatInterval(req.Group)
		return resp
	}
	c.mu.Lock()
	resp = c.consumerHeartbeat(req, resp)
	g := c.groups[req.Group]
	st := c.consumerSnapshot(g)
	c.mu.Unlock()
	if err := c.persistConsumer(ctx, g, st, false); err != nil {
		return ConsumerHeartbeatResponse{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, HeartbeatInterval: resp.HeartbeatInterval}
	}
	return resp
}

// consumerHeartbeat is ConsumerHeartbeat's work on the group; callers hold c.mu.
func (c *Coordinator) consumerHeartbeat(req ConsumerHeartbeatRequest, resp ConsumerHeartbeatResponse) ConsumerHeartbeatResponse {
	resp.HeartbeatInterval = c.consumerHeartbeatInterval(req.Group)
	if err := c.owns(req.Group); err != nil {
		resp.Err = err
		return resp
	}
	if c.isShareGroup(req.Group) {
		resp.Err = fmt.Errorf("%w: group %s is not a consumer group", kerr.GroupIDNotFound, req.Group)
		return resp
	}
	var re *regexp.Regexp
	if req.Regex != nil && *req.Regex != "" {
		var err error
		// Kafka matches the whole topic name (RE2/J's matches()); Go's regexp is RE2.
		if re, err = regexp.Compile(`^(?:` + *req.Regex + `)$`); err != nil {
			resp.Err = fmt.Errorf("%w: %v", kerr.InvalidRegularExpression, err)
			return resp
		}
	}
	if req.Assignor != nil && !slices.Contains(c.cfg.ConsumerAssignors, *req.Assignor) {
		resp.Err = fmt.Errorf("%w: %s (the group has %s)", kerr.UnsupportedAssignor, *req.Assignor, strings.Join(c.cfg.ConsumerAssignors, ", "))
		return resp
	}
	g := c.groups[req.Group]
	if g != nil && g.state == Dead {
		resp.Err = kerr.CoordinatorNotAvailable // being deleted: retry, and find a fresh group
		return resp
	}
	if g != nil && g.cg == nil {
		// A classic group converts when it is empty (Kafka's upgrade of an empty
		// group), or, as the migration policy allows, when a member joins it live.
		empty := len(g.members) == 0 && len(g.pending) == 0 && g.state == Empty
		switch {
		case req.MemberEpoch != 0:
			resp.Err = fmt.Errorf("%w: group %s is not a consumer group", kerr.GroupIDNotFound, req.Group)
			return resp
		case empty:
			c.lg.Info("empty classic group converted to a consumer group", "group", g.id)
			g.cg = newConsumerGroup()
			g.cg.version = g.cgVersion
			g.protocolType, g.protocol = consumerProtocolType, ""
		default:
			if err := c.upgradeClassicGroup(g); err != nil {
				resp.Err = err
				return resp
			}
		}
	}
	switch req.MemberEpoch {
	case 0:
		return c.consumerJoin(g, req, re, resp)
	case -1, -2:
		if g == nil {
			resp.Err = kerr.UnknownMemberID
			return resp
		}
		m := g.cg.members[req.MemberID]
		if m == nil {
			resp.Err = kerr.UnknownMemberID
			return resp
		}
		if req.MemberEpoch == -2 && m.instanceID != "" {
			// A static member's temporary leave (KIP-848): it keeps its partitions
			// and its place until its session expires, for an instance with the same
			// group.instance.id to take over.
			c.lg.Info("static consumer group member left temporarily", "group", g.id, "member", m.id, "instance", m.instanceID)
			m.previousEpoch, m.epoch = m.epoch, staticLeaveEpoch
			c.setConsumerState(g)
			return resp
		}
		c.lg.Info("consumer group member left", "group", g.id, "member", m.id)
		c.removeConsumerMember(g, m)
		c.maybeDowngrade(g)
		return resp
	}
	if g == nil {
		// The group is unknown here (another coordinator had it, or it was deleted):
		// the member must join again.
		resp.Err = kerr.UnknownMemberID
		return resp
	}
	m := g.cg.members[req.MemberID]
	if m == nil {
		resp.Err = kerr.UnknownMemberID
		return resp
	}
	owned := ownedOf(req.Owned)
	if err := m.checkEpoch(req.MemberEpoch, owned); err != nil {
		resp.Err = err
		return resp
	}
	changed := c.updateConsumerMember(g, m, req, re)
	c.consumerUpdate(g, changed)
	c.consumerTouch(g, m)
	before := m.assigned.clone()
	c.reconcile(g, m, owned)
	c.setConsumerState(g)
	resp.MemberEpoch = m.epoch
	full := req.Owned != nil && (req.Names != nil || req.Regex != nil) && req.RebalanceTimeout >= 0
	if full || !m.assigned.equal(before) {
		resp.Assignment = c.assignmentOf(g, m.assigned)
	}
	return resp
}

func validateConsumerHeartbeat(req ConsumerHeartbeatRequest) error {
	switch {
	case strings.TrimSpace(req.Group) == "":
		return fmt.Errorf("%w: group id must not be empty", kerr.InvalidRequest)
	case strings.TrimSpace(req.MemberID) == "" || len(req.MemberID) > maxConsumerMemberIDLen:
		return fmt.Errorf("%w: member id must be 1 to %d characters", kerr.InvalidRequest, maxConsumerMemberIDLen)
	case req.MemberEpoch < -2:
		return fmt.Errorf("%w: member epoch %d", kerr.InvalidRequest, req.MemberEpoch)
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return fmt.Errorf("%w: member epoch -2 is for static members only", kerr.InvalidRequest)
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return fmt.Errorf("%w: rack id must not be empty", kerr.InvalidRequest)
	case req.InstanceID != nil && strings.TrimSpace(*req.InstanceID) == "":
		return fmt.Errorf("%w: instance id must not be empty", kerr.InvalidRequest)
	case req.Assignor != nil && strings.TrimSpace(*req.Assignor) == "":
		return fmt.Errorf("%w: server assignor must not be empty", kerr.InvalidRequest)
	}
	if req.MemberEpoch == 0 {
		switch {
		case req.RebalanceTimeout < 0:
			return fmt.Errorf("%w: a joining member must give its rebalance timeout", kerr.InvalidRequest)
		case req.Names == nil && req.Regex == nil:
			return fmt.Errorf("%w: a joining member must give its subscription", kerr.InvalidRequest)
		case req.Owned == nil || len(req.Owned) > 0:
			return fmt.Errorf("%w: a joining member owns no partitions", kerr.InvalidRequest)
		}
	}
	return nil
}

// ownedOf is the owned partitions a heartbeat reports, nil when it reports none.
func ownedOf(tps []TopicPartitions) assignment {
	if tps == nil {
		return nil
	}
	out := assignment{}
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			out.add(tpKey{tp.TopicID, p})
		}
	}
	return out
}

// checkEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a newer epoch than the
// member's is fenced; an older one only when it is the previous epoch and the member
// owns nothing it is no longer assigned (the response that moved it on was lost).
func (m *consumerMember) checkEpoch(epoch int32, owned assignment) error {
	switch {
	case epoch > m.epoch:
		return fmt.Errorf("%w: member epoch %d is newer than %d", kerr.FencedMemberEpoch, epoch, m.epoch)
	case epoch < m.epoch:
		if epoch != m.previousEpoch || (owned != nil && owned.minus(m.assigned).size() > 0) {
			return fmt.Errorf("%w: member epoch %d, expected %d", kerr.FencedMemberEpoch, epoch, m.epoch)
		}
	}
	return nil
}

func (c *Coordinator) consumerJoin(g *group, req ConsumerHeartbeatRequest, re *regexp.Regexp, resp ConsumerHeartbeatResponse) ConsumerHeartbeatResponse {
	created := false
	if g == nil {
		g = c.newGroup(req.Group)
		g.cg = newConsumerGroup()
		g.protocolType = consumerProtocolType
		created = true
	}
	if old := g.cg.members[req.MemberID]; old != nil {
		// The member lost its state and starts over: what it owned is free again.
		c.lg.Info("consumer group member joined again with epoch 0", "group", g.id, "member", old.id)
		c.removeConsumerMember(g, old)
	}
	if req.InstanceID != nil {
		if old := g.cg.staticMember(*req.InstanceID); old != nil {
			if old.epoch != staticLeaveEpoch {
				resp.Err = fmt.Errorf("%w: instance %s is still used by member %s", kerr.UnreleasedInstanceID, *req.InstanceID, old.id)
				return resp
			}
			return c.replaceStaticConsumerMember(g, old, req, re, resp)
		}
	}
	if max := c.cfg.ConsumerMaxGroupSize; max > 0 && len(g.cg.members) >= max {
		resp.Err = fmt.Errorf("%w: consumer group %s has %d members (group.consumer.max.size)", kerr.GroupMaxSizeReached, g.id, len(g.cg.members))
		if created {
			delete(c.groups, g.id)
		}
		return resp
	}
	m := &consumerMember{id: req.MemberID, assigned: assignment{}, revoking: assignment{}}
	g.cg.members[m.id] = m
	c.lg.Info("consumer group member joined", "group", g.id, "member", m.id, "client_id", req.ClientID)
	c.updateConsumerMember(g, m, req, re)
	c.consumerUpdate(g, true)
	c.consumerTouch(g, m)
	c.reconcile(g, m, assignment{})
	c.setConsumerState(g)
	resp.MemberEpoch = m.epoch
	resp.Assignment = c.assignmentOf(g, m.assigned)
	return resp
}

// staticLeaveEpoch is the member epoch of a static member that left temporarily
// (Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH).
const staticLeaveEpoch = -2

// staticMember is the member with the group.instance.id, nil when none has it.
func (cg *consumerGroup) staticMember(instanceID string) *consumerMember {
	for _, m := range cg.members {
		if m.instanceID == instanceID {
			return m
		}
	}
	return nil
}

// replaceStaticConsumerMember: a static member that left temporarily (epoch -2) is
// replaced by the new member joining with its group.instance.id, which takes over its
// assignment, target and epoch, so that a restart moves no partition and does not bump
// the group epoch (unless the subscription changed), as KIP-848 specifies. The new
// instance owns nothing yet, so partitions the old one was revoking are released.
func (c *Coordinator) replaceStaticConsumerMember(g *group, old *consumerMember, req ConsumerHeartbeatRequest, re *regexp.Regexp, resp ConsumerHeartbeatResponse) ConsumerHeartbeatResponse {
	cg := g.cg
	old.expiry.Stop()
	old.revoke.Stop()
	m := &consumerMember{
		id: req.MemberID, instanceID: old.instanceID, rackID: old.rackID, rebalanceTimeout: old.rebalanceTimeout,
		names: old.names, regex: old.regex, re: old.re, assignor: old.assignor,
		epoch: old.previousEpoch, previousEpoch: old.previousEpoch, state: old.state,
		assigned: old.assigned, revoking: old.revoking, classic: old.classic,
	}
	delete(cg.members, old.id)
	cg.members[m.id] = m
	cg.target[m.id] = cg.target[old.id]
	delete(cg.target, old.id)
	for k, owner := range cg.owners {
		if owner == old.id {
			cg.owners[k] = m.id
		}
	}
	c.lg.Info("static consumer group member replaced", "group", g.id, "instance", m.instanceID, "old_member", old.id, "member", m.id)
	changed := c.updateConsumerMember(g, m, req, re)
	c.consumerUpdate(g, changed)
	c.consumerTouch(g, m)
	c.reconcile(g, m, assignment{})
	c.setConsumerState(g)
	resp.MemberEpoch = m.epoch
	resp.Assignment = c.assignmentOf(g, m.assigned)
	return resp
}

// updateConsumerMember applies what the heartbeat changes of the member, reporting
// whether the assignor would see a difference.
func (c *Coordinator) updateConsumerMember(g *group, m *consumerMember, req ConsumerHeartbeatRequest, re *regexp.Regexp) bool {
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	changed := false
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.RebalanceTimeout >= 0 {
		m.rebalanceTimeout = req.RebalanceTimeout
	}
	if req.Names != nil {
		names := slices.Clone(req.Names)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.names) {
			m.names, changed = names, true
		}
	}
	if req.Regex != nil && *req.Regex != m.regex {
		m.regex, m.re, changed = *req.Regex, re, true
	}
	if req.Assignor != nil && *req.Assignor != m.assignor {
		m.assignor, changed = *req.Assignor, true
	}
	return changed
}

// consumerSessionTimeout is the group's consumer.session.timeout.ms group config, or
// group.consumer.session.timeout.ms; read at every heartbeat, so that a change applies
// from each member's next one.
func (c *Coordinator) consumerSessionTimeout(group string) time.Duration {
	ms := c.store.Current().GroupConfigs.Int(group, metadata.GroupConsumerSessionTimeout, c.cfg.ConsumerSessionTimeout.Milliseconds())
	return time.Duration(ms) * time.Millisecond
}

// consumerHeartbeatInterval is the group's consumer.heartbeat.interval.ms group config,
// or group.consumer.heartbeat.interval.ms.
func (c *Coordinator) consumerHeartbeatInterval(group string) time.Duration {
	ms := c.store.Current().GroupConfigs.Int(group, metadata.GroupConsumerHeartbeatInterval, c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	return time.Duration(ms) * time.Millisecond
}

// consumerTouch restarts the member's session.
func (c *Coordinator) consumerTouch(g *group, m *consumerMember) {
	timeout := c.consumerSessionTimeout(g.id)
	if m.classic != nil {
		timeout = m.classic.sessionTimeout
	}
	c.timers.Arm(&m.expiry, timeout, func() {
		if c.groups[g.id] != g || g.cg == nil || g.cg.members[m.id] != m {
			return
		}
		c.lg.Info("consumer group member session expired", "group", g.id, "member", m.id)
		c.removeConsumerMember(g, m)
		c.maybeDowngrade(g)
	})
}

// removeConsumerMember drops a member, frees what it owned and reassigns.
func (c *Coordinator) removeConsumerMember(g *group, m *consumerMember) {
	m.expiry.Stop()
	m.revoke.Stop()
	cg := g.cg
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	m.assigned.each(func(k tpKey) { cg.release(k, m.id) })
	m.revoking.each(func(k tpKey) { cg.release(k, m.id) })
	c.consumerUpdate(g, true)
	c.setConsumerState(g)
}

func (cg *consumerGroup) release(k tpKey, id string) {
	if cg.owners[k] == id {
		delete(cg.owners, k)
	}
}

// consumerUpdate bumps the group epoch and recomputes the target assignment when
// membership or subscriptions changed, or when a subscribed topic changed in the image.
func (c *Coordinator) consumerUpdate(g *group, changed bool) {
	cg := g.cg
	topics := cg.subscribedTopics(c.store.Current())
	assignor := c.groupAssignor(cg)
	if !changed && maps.Equal(topics, cg.topics) && assignor == cg.assignor {
		return
	}
	cg.topics, cg.assignor = topics, assignor
	cg.epoch++
	cg.target = assign(assignor, cg)
}

// groupAssignor is Kafka's choice: the assignor most members ask for (ties to the one
// listed first in group.consumer.assignors), or the first listed when none asks.
func (c *Coordinator) groupAssignor(cg *consumerGroup) string {
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			counts[m.assignor]++
		}
	}
	best, n := c.cfg.ConsumerAssignors[0], 0
	for _, a := range c.cfg.ConsumerAssignors {
		if counts[a] > n {
			best, n = a, counts[a]
		}
	}
	return best
}

// subscribedTopics is every topic some member subscribes to, by name or by regular
// expression, that exists in im with partitions. Regular expressions never match
// internal topics, as in Kafka.
func (cg *consumerGroup) subscribedTopics(im *metadata.Image) map[string]consumerTopic {
	out := map[string]consumerTopic{}
	add := func(name string) {
		if t := im.Topic(name); t != nil && len(t.Partitions) > 0 {
			out[name] = consumerTopic{id: t.ID, parts: int32(len(t.Partitions))}
		}
	}
	hasRegex := false
	for _, m := range cg.members {
		for _, name := range m.names {
			add(name)
		}
		hasRegex = hasRegex || m.re != nil
	}
	if hasRegex {
		for name := range im.Topics {
			if strings.HasPrefix(name, "__") {
				continue
			}
			for _, m := range cg.members {
				if m.re != nil && m.re.MatchString(name) {
					add(name)
					break
				}
			}
		}
	}
	return out
}

// subscribes reports whether the member subscribes to the named topic.
func (m *consumerMember) subscribes(name string) bool {
	if _, ok := slices.BinarySearch(m.names, name); ok {
		return true
	}
	return m.re != nil && !strings.HasPrefix(name, "__") && m.re.MatchString(name)
}

// reconcile moves the member towards its target assignment: Kafka's
// CurrentAssignmentBuilder. owned is what the heartbeat reports the member owns, nil
// when it did not say.
func (c *Coordinator) reconcile(g *group, m *consumerMember, owned assignment) {
	cg := g.cg
	switch m.state {
	case memberUnrevoked:
		if owned == nil || owned.intersect(m.revoking).size() > 0 {
			return // still revoking
		}
		m.revoking.each(func(k tpKey) { cg.release(k, m.id) })
		m.revoking = assignment{}
		m.revoke.Stop()
		c.nextAssignment(g, m)
	case memberUnreleased:
		c.nextAssignment(g, m)
	case memberStable:
		if m.epoch != cg.epoch {
			c.nextAssignment(g, m)
		}
	}
}

// nextAssignment is CurrentAssignmentBuilder.computeNextAssignment: partitions the
// target takes away are revoked first, with the member kept at its epoch; with none to
// revoke, the member moves to the target epoch and takes every partition of its target
// that nobody else owns.
func (c *Coordinator) nextAssignment(g *group, m *consumerMember) {
	cg := g.cg
	target := cg.target[m.id]
	if target == nil {
		target = assignment{}
	}
	keep := m.assigned.intersect(target)
	revoke := m.assigned.minus(target)
	if revoke.size() > 0 {
		m.state = memberUnrevoked
		m.assigned, m.revoking = keep, revoke
		c.armRevoke(g, m)
		return
	}
	unreleased := false
	target.minus(m.assigned).each(func(k tpKey) {
		if owner, ok := cg.owners[k]; ok && owner != m.id {
			unreleased = true
			return
		}
		keep.add(k)
		cg.owners[k] = m.id
	})
	m.assigned = keep
	if m.epoch != cg.epoch {
		m.previousEpoch, m.epoch = m.epoch, cg.epoch
	}
	if unreleased {
		m.state = memberUnreleased
	} else {
		m.state = memberStable
	}
}

// armRevoke gives a member its rebalance timeout to revoke what it was told to.
func (c *Coordinator) armRevoke(g *group, m *consumerMember) {
	rt := m.rebalanceTimeout
	if rt <= 0 {
		rt = c.consumerSessionTimeout(g.id)
	}
	c.timers.Arm(&m.revoke, rt, func() {
		if c.groups[g.id] != g || g.cg == nil || g.cg.members[m.id] != m || m.state != memberUnrevoked {
			return
		}
		c.lg.Info("consumer group member did not revoke partitions within its rebalance timeout", "group", g.id, "member", m.id)
		c.removeConsumerMember(g, m)
		c.maybeDowngrade(g)
	})
}

// setConsumerState is the group's state from its members': Empty without members,
// Stable when every member is at the group epoch with its target, else Reconciling.
func (c *Coordinator) setConsumerState(g *group) {
	if g.state == Dead {
		return
	}
	s := Empty
	if len(g.cg.members) > 0 {
		s = Stable
		for _, m := range g.cg.members {
			if m.epoch != g.cg.epoch || m.state != memberStable {
				s = Reconciling
				break
			}
		}
	}
	if s != g.state {
		g.transition(s, c.cfg.Now())
	}
}

// assignmentOf lists an assignment by topic id in a stable order.
func (c *Coordinator) assignmentOf(g *group, a assignment) *[]TopicPartitions {
	out := []TopicPartitions{}
	names := map[topicID]string{}
	for name, t := range g.cg.topics {
		names[t.id] = name
	}
	for _, id := range slices.SortedFunc(maps.Keys(a), func(x, y topicID) int { return bytes.Compare(x[:], y[:]) }) {
		if len(a[id]) == 0 {
			continue
		}
		out = append(out, TopicPartitions{TopicID: id, Topic: names[id], Partitions: slices.Clone(a[id])})
	}
	return &out
}

// unloadConsumer stops a consumer group's timers.
func (cg *consumerGroup) stopTimers() {
	for _, m := range cg.members {
		m.expiry.Stop()
		m.revoke.Stop()
	}
}

// NewConsumerMemberID is a member id for a ConsumerGroupHeartbeat v0 join without one
// (from v1 members generate their own).
func NewConsumerMemberID() string { return newMemberID("consumer") }
