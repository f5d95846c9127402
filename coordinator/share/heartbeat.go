package share

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/coordinator/timer"
	"github.com/shalelog/shale/metadata"
)

// Share groups (KIP-932). Membership follows Kafka's share-group protocol rather than the
// classic one: members heartbeat with ShareGroupHeartbeat, the coordinator assigns
// partitions itself (the "simple" assignor), and several members may hold the same
// partition, since the share-partition leader hands records out one lock at a time. There
// is no revocation phase: a member takes its new assignment as soon as it is told, so the
// group only ever moves between Empty and Stable.
//
// Epochs: the group epoch is bumped by every change that alters the assignment (a member
// joining or leaving, a subscription change, a subscribed topic created, deleted or
// grown); the assignment is recomputed at once. A member's epoch catches up with the
// group epoch on its own heartbeat, which is when it receives the new assignment. A
// heartbeat carrying neither the member's epoch nor the one before it (the response that
// bumped it may have been lost) is fenced.

// ProtocolType is the protocol (and group) type Kafka lists share groups with.
const ProtocolType = "share"

// Assignor is the one server-side assignor share groups have.
const Assignor = "simple"

// State is a share group's state, named as Kafka names it.
type State int8

const (
	// Empty: no members; the group may still have share-partition state.
	Empty State = iota
	// Stable: at least one member.
	Stable
	// Dead: being deleted or moved to another coordinator.
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

type shareGroup struct {
	id         string
	state      State
	epoch      int32 // the group epoch; the assignment epoch is always the same
	members    map[string]*shareMember
	coordEpoch int32
	// topics is what the assignment was computed from: each subscribed topic that
	// exists, by name, with its id and partition count. A heartbeat that finds the
	// image different bumps the epoch.
	topics map[string]shareTopic
	// deleting is set while DeleteGroups removes the group's persisted state; joins
	// are refused meanwhile.
	deleting bool
}

type shareTopic struct {
	id    [16]byte
	parts int32
}

type shareMember struct {
	id            string
	epoch         int32
	previousEpoch int32
	rackID        string
	clientID      string
	clientHost    string
	subscribed    []string           // sorted
	assignment    map[string][]int32 // topic -> sorted partitions
	expiry        timer.Slot
}

// HeartbeatRequest is one ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group    string
	MemberID string
	// MemberEpoch is 0 to join, -1 to leave, else the member's current epoch.
	MemberEpoch int32
	// RackID is nil when unchanged since the last heartbeat.
	RackID *string
	// Subscribed is nil when unchanged since the last heartbeat; a join must name at
	// least one topic.
	Subscribed []string
	ClientID   string
	ClientHost string
}

// HeartbeatResponse answers a ShareGroupHeartbeat.
type HeartbeatResponse struct {
	Err         error
	MemberID    string
	MemberEpoch int32
	// HeartbeatInterval is group.share.heartbeat.interval.ms.
	HeartbeatInterval time.Duration
	// Assignment is set when the member must (re)read its assignment: on a join, a
	// full heartbeat (one that names its subscription), or a new member epoch.
	Assignment *[]TopicPartitions
}

// TopicPartitions is a topic's partitions in an assignment.
type TopicPartitions struct {
	Topic      string
	TopicID    [16]byte
	Partitions []int32
}

// maxShareMemberIDLen is Kafka's bound on the client-generated member id (a UUID).
const maxShareMemberIDLen = 36

// Heartbeat handles a ShareGroupHeartbeat: a join (epoch 0), a leave (-1) or a
// heartbeat that keeps the member's session and may carry a new subscription.
func (c *Coordinator) Heartbeat(ctx context.Context, req HeartbeatRequest) HeartbeatResponse {
	resp := HeartbeatResponse{MemberID: req.MemberID, HeartbeatInterval: c.cfg.HeartbeatInterval}
	if err := validateShareHeartbeat(req); err != nil {
		resp.Err = err
		return resp
	}
	if req.MemberEpoch == 0 {
		// A classic group known only by its committed offsets still owns the name.
		if err := c.checkNoClassicGroup(ctx, req.Group); err != nil {
			resp.Err = err
			return resp
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.owns(req.Group); err != nil {
		resp.Err = err
		return resp
	}
	sg := c.shares[req.Group]
	if sg == nil {
		// Claim the id before asking the classic coordinator, which refuses a classic
		// group for a claimed id: of a classic and a share group racing for a new id,
		// one is refused. The claim goes unless the heartbeat creates the group.
		epoch, _ := c.standing(req.Group)
		c.claim(req.Group, epoch)
		defer func() {
			if c.shares[req.Group] == nil {
				c.unclaim(req.Group)
			}
		}()
	}
	if c.hasClassicGroup(req.Group) {
		resp.Err = fmt.Errorf("%w: group %s is not a share group", kerr.GroupIDNotFound, req.Group)
		return resp
	}
	if sg != nil && (sg.state == Dead || sg.deleting) {
		resp.Err = kerr.CoordinatorNotAvailable // being deleted: retry, and find a fresh group
		return resp
	}
	switch req.MemberEpoch {
	case 0:
		return c.shareJoin(sg, req, resp)
	case -1:
		return c.shareLeave(sg, req, resp)
	}
	if sg == nil {
		resp.Err = fmt.Errorf("%w: share group %s does not exist", kerr.GroupIDNotFound, req.Group)
		return resp
	}
	m := sg.members[req.MemberID]
	if m == nil {
		resp.Err = kerr.UnknownMemberID
		return resp
	}
	if req.MemberEpoch != m.epoch && req.MemberEpoch != m.previousEpoch {
		resp.Err = fmt.Errorf("%w: member epoch %d, expected %d", kerr.FencedMemberEpoch, req.MemberEpoch, m.epoch)
		return resp
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	changed := false
	if req.Subscribed != nil {
		changed = m.subscribe(req.Subscribed)
	}
	c.shareUpdate(sg, changed)
	c.shareTouch(sg, m)
	before := m.epoch
	sg.reconcile(m)
	resp.MemberEpoch = m.epoch
	if req.Subscribed != nil || m.epoch != before {
		resp.Assignment = shareAssignmentOf(sg, m)
	}
	return resp
}

func validateShareHeartbeat(req HeartbeatRequest) error {
	switch {
	case strings.TrimSpace(req.Group) == "":
		return fmt.Errorf("%w: group id must not be empty", kerr.InvalidRequest)
	case req.MemberID == "" || len(req.MemberID) > maxShareMemberIDLen:
		return fmt.Errorf("%w: member id must be 1 to %d characters", kerr.InvalidRequest, maxShareMemberIDLen)
	case req.MemberEpoch < -1:
		return fmt.Errorf("%w: member epoch %d", kerr.InvalidRequest, req.MemberEpoch)
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return fmt.Errorf("%w: rack id must not be empty", kerr.InvalidRequest)
	case req.MemberEpoch == 0 && len(req.Subscribed) == 0:
		return fmt.Errorf("%w: a joining member must subscribe to at least one topic", kerr.InvalidRequest)
	}
	return nil
}

// checkNoClassicGroup refuses a share group whose name a classic group holds through
// committed offsets alone (in memory, the caller checks under c.mu).
func (c *Coordinator) checkNoClassicGroup(ctx context.Context, id string) error {
	c.mu.Lock()
	skip := c.shares[id] != nil || c.owns(id) != nil // not owning: the caller answers that
	c.mu.Unlock()
	if skip {
		return nil
	}
	offs, err := c.store.FetchOffsets(ctx, id, nil)
	if err != nil {
		return storeError(err)
	}
	if len(offs) > 0 {
		return fmt.Errorf("%w: group %s is not a share group", kerr.GroupIDNotFound, id)
	}
	return nil
}

func (c *Coordinator) shareJoin(sg *shareGroup, req HeartbeatRequest, resp HeartbeatResponse) HeartbeatResponse {
	if sg == nil {
		sg = c.newShareGroup(req.Group)
	}
	m := sg.members[req.MemberID]
	changed := false
	if m == nil {
		if c.cfg.MaxGroupSize > 0 && len(sg.members) >= c.cfg.MaxGroupSize {
			resp.Err = fmt.Errorf("%w: share group %s has %d members (group.share.max.size)", kerr.GroupMaxSizeReached, sg.id, len(sg.members))
			if len(sg.members) == 0 {
				delete(c.shares, sg.id)
			}
			return resp
		}
		m = &shareMember{id: req.MemberID, assignment: map[string][]int32{}}
		sg.members[m.id] = m
		sg.state = Stable
		c.lg.Info("share group member joined", "group", sg.id, "member", m.id, "client_id", req.ClientID)
		changed = true
	}
	// A known member joining again (after being fenced, with the same id) keeps its
	// place; only a new subscription changes the assignment.
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	changed = m.subscribe(req.Subscribed) || changed
	c.shareUpdate(sg, changed)
	c.shareTouch(sg, m)
	sg.reconcile(m)
	resp.MemberEpoch = m.epoch
	resp.Assignment = shareAssignmentOf(sg, m)
	return resp
}

func (c *Coordinator) shareLeave(sg *shareGroup, req HeartbeatRequest, resp HeartbeatResponse) HeartbeatResponse {
	if sg == nil {
		resp.Err = fmt.Errorf("%w: share group %s does not exist", kerr.GroupIDNotFound, req.Group)
		return resp
	}
	m := sg.members[req.MemberID]
	if m == nil {
		resp.Err = kerr.UnknownMemberID
		return resp
	}
	c.lg.Info("share group member left", "group", sg.id, "member", m.id)
	c.removeShareMember(sg, m)
	resp.MemberEpoch = -1
	return resp
}

func (c *Coordinator) newShareGroup(id string) *shareGroup {
	sg := &shareGroup{id: id, state: Empty, members: map[string]*shareMember{}, topics: map[string]shareTopic{}}
	sg.coordEpoch, _ = c.standing(id)
	c.shares[id] = sg
	c.claim(id, sg.coordEpoch)
	return sg
}

// shareTouch restarts the member's session: group.share.session.timeout.ms without a
// heartbeat removes it from the group.
func (c *Coordinator) shareTouch(sg *shareGroup, m *shareMember) {
	c.timers.Arm(&m.expiry, c.cfg.SessionTimeout, func() {
		if c.shares[sg.id] != sg || sg.members[m.id] != m {
			return
		}
		c.lg.Info("share group member session expired", "group", sg.id, "member", m.id)
		c.removeShareMember(sg, m)
	})
}

// removeShareMember drops a member and reassigns its partitions to the others.
func (c *Coordinator) removeShareMember(sg *shareGroup, m *shareMember) {
	m.expiry.Stop()
	delete(sg.members, m.id)
	if len(sg.members) == 0 {
		sg.state = Empty
	}
	c.shareUpdate(sg, true)
	if c.cfg.MemberRemoved != nil {
		c.cfg.MemberRemoved(sg.id, m.id)
	}
}

// subscribe sets the member's subscription, reporting whether it changed.
func (m *shareMember) subscribe(topics []string) bool {
	s := slices.Clone(topics)
	slices.Sort(s)
	s = slices.Compact(s)
	if slices.Equal(s, m.subscribed) {
		return false
	}
	m.subscribed = s
	return true
}

// reconcile moves the member to the group epoch, remembering the epoch it leaves so that
// a heartbeat whose response was lost is not fenced.
func (sg *shareGroup) reconcile(m *shareMember) {
	if m.epoch != sg.epoch {
		m.previousEpoch, m.epoch = m.epoch, sg.epoch
	}
}

// shareUpdate bumps the group epoch and recomputes the assignment when membership or
// subscriptions changed, or when a subscribed topic changed in the image.
func (c *Coordinator) shareUpdate(sg *shareGroup, changed bool) {
	topics := sg.subscribedTopics(c.store.Current())
	if !changed && maps.Equal(topics, sg.topics) {
		return
	}
	sg.topics = topics
	sg.epoch++
	sg.assign()
}

// subscribedTopics is every topic a member subscribes to that exists in im.
func (sg *shareGroup) subscribedTopics(im *metadata.Image) map[string]shareTopic {
	out := map[string]shareTopic{}
	for _, m := range sg.members {
		for _, name := range m.subscribed {
			if _, ok := out[name]; ok {
				continue
			}
			if t := im.Topic(name); t != nil && len(t.Partitions) > 0 {
				out[name] = shareTopic{id: t.ID, parts: int32(len(t.Partitions))}
			}
		}
	}
	return out
}

// assign is KIP-932's simple assignor, per topic over the members subscribed to it
// (in member-id order, so that the result does not depend on map order): with fewer
// members than partitions, the partitions are dealt round-robin; with more, each member
// takes one partition, round-robin, so every partition is shared by ceil or floor of
// members/partitions members. The round starts at a topic-dependent member so that
// single-partition topics do not all land on the same member.
func (sg *shareGroup) assign() {
	ids := slices.Sorted(maps.Keys(sg.members))
	for _, m := range sg.members {
		m.assignment = map[string][]int32{}
	}
	names := slices.Sorted(maps.Keys(sg.topics))
	for ti, name := range names {
		var subs []*shareMember
		for _, id := range ids {
			if m := sg.members[id]; slices.Contains(m.subscribed, name) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		parts := int(sg.topics[name].parts)
		n := len(subs)
		if n <= parts {
			for p := 0; p < parts; p++ {
				m := subs[(p+ti)%n]
				m.assignment[name] = append(m.assignment[name], int32(p))
			}
			continue
		}
		for i := 0; i < n; i++ {
			m := subs[(i+ti)%n]
			m.assignment[name] = append(m.assignment[name], int32(i%parts))
		}
	}
	for _, m := range sg.members {
		for t := range m.assignment {
			slices.Sort(m.assignment[t])
		}
	}
}

// shareAssignmentOf is the member's assignment with topic ids from the group's view of
// the topics (what it was computed from).
func shareAssignmentOf(sg *shareGroup, m *shareMember) *[]TopicPartitions {
	out := []TopicPartitions{}
	for _, name := range slices.Sorted(maps.Keys(m.assignment)) {
		out = append(out, TopicPartitions{Topic: name, TopicID: sg.topics[name].id, Partitions: slices.Clone(m.assignment[name])})
	}
	return &out
}

// unloadShare drops a share group from memory (its members rejoin wherever the group
// is coordinated now); its share-partition state stays where the partition leaders
// persisted it.
func (c *Coordinator) unloadShare(sg *shareGroup) {
	for _, m := range sg.members {
		m.expiry.Stop()
	}
	sg.state = Dead
	if c.shares[sg.id] == sg {
		delete(c.shares, sg.id)
		c.unclaim(sg.id)
	}
}
