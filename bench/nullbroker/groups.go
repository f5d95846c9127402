package nullbroker

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initialRebalanceDelay holds the first rebalance of an empty group open
// this long for more members, like Kafka's group.initial.rebalance.delay.ms
// (3 s there; a bench's consumers all start within milliseconds).
const initialRebalanceDelay = 300 * time.Millisecond

// sweepEvery is how often members past their session timeout are expelled.
const sweepEvery = 500 * time.Millisecond

// coordinator is a classic (eager-protocol, KIP-848-free) group
// coordinator in memory: enough for franz-go consumer groups, whatever
// balancer they use, and for committed offsets. One lock for everything:
// group traffic is a few requests a second.
type coordinator struct {
	mu     sync.Mutex
	groups map[string]*group
	nextID int
	done   chan struct{}
	wg     sync.WaitGroup
}

type groupState int

const (
	stateEmpty groupState = iota
	statePreparing
	stateAwaitingSync
	stateStable
)

type group struct {
	name         string
	state        groupState
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	pending      map[string]bool // member ids handed out with MEMBER_ID_REQUIRED
	round        *round          // the join round in progress, while preparing
	synced       chan struct{}   // closed when the leader's assignment arrives
	offsets      map[string]map[int32]committed
}

type member struct {
	id               string
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	joined           bool // in the current round
	waiting          bool // in a JoinGroup or SyncGroup call: not expired
	lastSeen         time.Time
	assignment       []byte
}

// round is one rebalance's join phase and its outcome.
type round struct {
	done  chan struct{}
	timer *time.Timer
	// timerOnly: only the timer ends this round (an empty group's first,
	// held open for more members).
	timerOnly  bool
	generation int32
	protocol   string
	leader     string
	members    []kmsg.JoinGroupResponseMember
}

type committed struct {
	offset   int64
	epoch    int32
	metadata *string
}

func newCoordinator() *coordinator {
	c := &coordinator{groups: map[string]*group{}, done: make(chan struct{})}
	c.wg.Add(1)
	go c.sweep()
	return c
}

func (c *coordinator) close() {
	c.mu.Lock()
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	for _, g := range c.groups {
		if g.round != nil && g.round.timer != nil {
			g.round.timer.Stop()
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// sweep expels members whose session has lapsed.
func (c *coordinator) sweep() {
	defer c.wg.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			c.mu.Lock()
			for _, g := range c.groups {
				for id, m := range g.members {
					if !m.waiting && now.Sub(m.lastSeen) > m.sessionTimeout {
						c.remove(g, id)
					}
				}
			}
			c.mu.Unlock()
		}
	}
}

// handle answers the group requests; false for any other.
func (c *coordinator) handle(b *Broker, req kmsg.Request, resp kmsg.Response) bool {
	switch req := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		r := resp.(*kmsg.FindCoordinatorResponse)
		r.NodeID, r.Host, r.Port = nodeID, b.host, b.port
	case *kmsg.JoinGroupRequest:
		c.join(req, resp.(*kmsg.JoinGroupResponse))
	case *kmsg.SyncGroupRequest:
		c.sync(req, resp.(*kmsg.SyncGroupResponse))
	case *kmsg.HeartbeatRequest:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = c.heartbeat(req)
	case *kmsg.LeaveGroupRequest:
		c.leave(req, resp.(*kmsg.LeaveGroupResponse))
	case *kmsg.OffsetCommitRequest:
		c.commit(req, resp.(*kmsg.OffsetCommitResponse))
	case *kmsg.OffsetFetchRequest:
		c.fetchOffsets(req, resp.(*kmsg.OffsetFetchResponse))
	default:
		return false
	}
	return true
}

func (c *coordinator) group(name string) *group {
	g := c.groups[name]
	if g == nil {
		g = &group{name: name, members: map[string]*member{}, pending: map[string]bool{}, offsets: map[string]map[int32]committed{}}
		c.groups[name] = g
	}
	return g
}

func (c *coordinator) join(req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp.Generation = -1
	if req.Group == "" || len(req.Protocols) == 0 {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		if req.Group != "" {
			resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		}
		return
	}
	g := c.group(req.Group)
	if g.protocolType != "" && len(g.members) > 0 && req.ProtocolType != g.protocolType {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return
	}
	id := req.MemberID
	switch {
	case id == "":
		c.nextID++
		id = fmt.Sprintf("null-member-%d", c.nextID)
		if req.Version >= 4 {
			// KIP-394: the member rejoins with the id it is given.
			g.pending[id] = true
			resp.MemberID = id
			resp.ErrorCode = kerr.MemberIDRequired.Code
			return
		}
	case g.members[id] == nil && !g.pending[id]:
		resp.MemberID = id
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	delete(g.pending, id)
	m := g.members[id]
	if m == nil {
		m = &member{id: id}
		g.members[id] = m
	}
	m.protocols = req.Protocols
	m.sessionTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || m.rebalanceTimeout <= 0 {
		m.rebalanceTimeout = m.sessionTimeout
	}
	m.lastSeen = time.Now()
	g.protocolType = req.ProtocolType
	wasEmpty := g.state == stateEmpty
	if g.state != statePreparing {
		c.prepare(g, wasEmpty)
	}
	m.joined = true
	m.waiting = true
	r := g.round
	c.maybeComplete(g)

	c.mu.Unlock()
	select {
	case <-r.done:
	case <-c.done:
	}
	c.mu.Lock()
	m.waiting = false
	m.lastSeen = time.Now()
	if r.generation == 0 || g.members[id] != m {
		// Expelled from the round, or the broker is closing.
		resp.MemberID = id
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	resp.Generation = r.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(r.protocol)
	resp.LeaderID = r.leader
	resp.MemberID = id
	if id == r.leader {
		resp.Members = r.members
	}
}

// prepare starts a rebalance: every member must join again within the
// longest rebalance timeout, or is expelled.
func (c *coordinator) prepare(g *group, initial bool) {
	g.state = statePreparing
	r := &round{done: make(chan struct{})}
	g.round = r
	var longest time.Duration
	for _, m := range g.members {
		m.joined = false
		longest = max(longest, m.rebalanceTimeout)
	}
	if initial {
		// The first join of an empty group waits a moment for the others.
		longest = initialRebalanceDelay
	}
	r.timer = time.AfterFunc(longest, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.round != r {
			return
		}
		for id, m := range g.members {
			if !m.joined {
				delete(g.members, id)
			}
		}
		c.complete(g)
	})
	r.timerOnly = initial
}

// maybeComplete ends the join round once every member has joined.
func (c *coordinator) maybeComplete(g *group) {
	if g.round == nil || g.round.timerOnly {
		return
	}
	for _, m := range g.members {
		if !m.joined {
			return
		}
	}
	g.round.timer.Stop()
	c.complete(g)
}

// complete picks the protocol and the leader, and wakes the joiners.
func (c *coordinator) complete(g *group) {
	r := g.round
	g.round = nil
	if len(g.members) == 0 {
		g.state = stateEmpty
		r.generation = 0
		close(r.done)
		return
	}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	leader := g.leader
	if g.members[leader] == nil {
		leader = ids[0]
	}
	// The leader's first protocol that every member offers.
	protocol := ""
	for _, p := range g.members[leader].protocols {
		all := true
		for _, m := range g.members {
			all = all && slices.ContainsFunc(m.protocols, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name })
		}
		if all {
			protocol = p.Name
			break
		}
	}
	if protocol == "" {
		protocol = g.members[leader].protocols[0].Name
	}
	g.generation++
	g.leader, g.protocol = leader, protocol
	g.state = stateAwaitingSync
	g.synced = make(chan struct{})
	r.generation, r.protocol, r.leader = g.generation, protocol, leader
	for _, id := range ids {
		m := g.members[id]
		m.assignment = nil
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = id
		for _, p := range m.protocols {
			if p.Name == protocol {
				jm.ProtocolMetadata = p.Metadata
			}
		}
		r.members = append(r.members, jm)
	}
	close(r.done)
}

// remove expels a member; the others rebalance without it.
func (c *coordinator) remove(g *group, id string) {
	if g.members[id] == nil {
		return
	}
	delete(g.members, id)
	switch {
	case g.state == statePreparing:
		c.maybeComplete(g)
	case len(g.members) == 0:
		g.state = stateEmpty
		if g.synced != nil {
			close(g.synced)
			g.synced = nil
		}
	default:
		if g.synced != nil && g.state == stateAwaitingSync {
			close(g.synced)
			g.synced = nil
		}
		c.prepare(g, false)
	}
}

func (c *coordinator) member(g *group, id string, generation int32) (*member, int16) {
	m := g.members[id]
	switch {
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case generation != g.generation:
		return m, kerr.IllegalGeneration.Code
	case g.state == statePreparing:
		return m, kerr.RebalanceInProgress.Code
	}
	return m, 0
}

func (c *coordinator) sync(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	m, code := c.member(g, req.MemberID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		return
	}
	m.lastSeen = time.Now()
	if g.state == stateAwaitingSync && req.MemberID == g.leader {
		for _, a := range req.GroupAssignment {
			if am := g.members[a.MemberID]; am != nil {
				am.assignment = a.MemberAssignment
			}
		}
		g.state = stateStable
		close(g.synced)
		g.synced = nil
	}
	if g.state == stateAwaitingSync {
		ch, gen := g.synced, g.generation
		m.waiting = true
		c.mu.Unlock()
		select {
		case <-ch:
		case <-c.done:
		}
		c.mu.Lock()
		m.waiting = false
		m.lastSeen = time.Now()
		if g.members[req.MemberID] != m || g.generation != gen || g.state != stateStable {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			return
		}
	}
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.MemberAssignment = m.assignment
}

func (c *coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	m, code := c.member(g, req.MemberID, req.Generation)
	if m != nil {
		m.lastSeen = time.Now()
	}
	return code
}

func (c *coordinator) leave(req *kmsg.LeaveGroupRequest, resp *kmsg.LeaveGroupResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	ids := []string{req.MemberID}
	if req.Version >= 3 {
		ids = ids[:0]
		for _, lm := range req.Members {
			ids = append(ids, lm.MemberID)
		}
	}
	for _, id := range ids {
		code := kerr.UnknownMemberID.Code
		if g != nil && g.members[id] != nil {
			c.remove(g, id)
			code = 0
		}
		if req.Version >= 3 {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.ErrorCode = id, code
			resp.Members = append(resp.Members, rm)
		} else {
			resp.ErrorCode = code
		}
	}
}

func (c *coordinator) commit(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(req.Group)
	code := int16(0)
	// Generation -1 is an admin's commit, outside any membership.
	if req.Generation >= 0 || req.MemberID != "" {
		if _, code = c.member(g, req.MemberID, req.Generation); code == kerr.RebalanceInProgress.Code {
			code = 0 // Kafka takes commits from the last generation while it rebalances
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			if code == 0 {
				if g.offsets[rt.Topic] == nil {
					g.offsets[rt.Topic] = map[int32]committed{}
				}
				g.offsets[rt.Topic][rp.Partition] = committed{offset: rp.Offset, epoch: rp.LeaderEpoch, metadata: rp.Metadata}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

func (c *coordinator) fetchOffsets(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	type want struct {
		topic string
		parts []int32
	}
	var wants []want
	if req.Topics == nil && g != nil {
		// v2+: null asks for every committed offset.
		for t, ps := range g.offsets {
			w := want{topic: t}
			for p := range ps {
				w.parts = append(w.parts, p)
			}
			slices.Sort(w.parts)
			wants = append(wants, w)
		}
	}
	for _, rt := range req.Topics {
		wants = append(wants, want{topic: rt.Topic, parts: rt.Partitions})
	}
	for _, w := range wants {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = w.topic
		for _, p := range w.parts {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
			if g != nil {
				if co, ok := g.offsets[w.topic][p]; ok {
					sp.Offset, sp.LeaderEpoch, sp.Metadata = co.offset, co.epoch, co.metadata
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}
