package group

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/timer"
)

// State is a classic group's state, named as Kafka names it in DescribeGroups.
type State int8

const (
	// Empty: no members; the group may still have committed offsets.
	Empty State = iota
	// PreparingRebalance: members are (re)joining for the next generation.
	PreparingRebalance
	// CompletingRebalance: the generation is formed, the leader's assignment is awaited.
	CompletingRebalance
	// Stable: every member has its assignment.
	Stable
	// Dead: the group is being deleted or has moved to another coordinator.
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	case Reconciling:
		return "Reconciling"
	case Assigning:
		return "Assigning"
	}
	return "Unknown"
}

// consumerProtocolType is the protocol type of Kafka consumers, whose member metadata
// Kafka (and Shale) parse to learn the topics a group is subscribed to.
const consumerProtocolType = "consumer"

// Protocol is one assignment protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

type group struct {
	id         string
	state      State
	stateSince time.Time
	generation int32
	// protocolType is set by the first member and kept while the group lives; "" for a
	// group that only stores offsets ("simple" consumers).
	protocolType string
	protocol     string // the protocol selected for the current generation
	leader       string
	members      map[string]*member
	static       map[string]string      // group.instance.id -> member id
	pending      map[string]*timer.Slot // member ids handed out with MEMBER_ID_REQUIRED
	pendingSync  map[string]struct{}    // members of this generation yet to SyncGroup
	// subscribed is the union of the topics consumer members subscribe to, nil when
	// unknown (not a consumer group, or metadata that does not parse).
	subscribed map[string]struct{}

	// newMemberAdded extends the initial rebalance delay while members keep arriving.
	newMemberAdded bool
	initialJoin    bool // the running join timer is the initial delay
	joinTimer      timer.Slot
	syncTimer      timer.Slot

	// commits hold offsetsLock shared while their store write is in flight; deleting the
	// group's offsets (DeleteGroups, OffsetDelete, retention) holds it exclusively, so a
	// deletion never races a commit that was validated before it.
	offsetsLock sync.RWMutex

	// coordEpoch is the coordinator epoch this broker loaded the group under; its offset
	// writes carry it.
	coordEpoch int32

	// cg is set for a consumer group (KIP-848, consumer.go); members is then empty.
	cg *consumerGroup
	// cgVersion is the last version a consumer group that was downgraded to this
	// classic group wrote (its removal): a later upgrade writes above it, or the
	// quorum would take its first states for overtaken ones.
	cgVersion int64
}

// memberCount is how many members the group has, of either protocol.
func (g *group) memberCount() int {
	if g.cg != nil {
		return len(g.cg.members)
	}
	return len(g.members)
}

type member struct {
	id               string
	instanceID       string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []Protocol
	assignment       []byte
	// join and sync are the member's JoinGroup and SyncGroup calls waiting for the
	// rebalance to progress; nil when none is.
	join  *JoinCall
	sync  *SyncCall
	isNew bool
	// expiry fires when the member has not been heard from for its session timeout
	// (or, while new and joining, NewMemberJoinTimeout).
	expiry timer.Slot
}

func newGroupState(id string, now time.Time) *group {
	return &group{
		id:          id,
		state:       Empty,
		stateSince:  now,
		members:     map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]*timer.Slot{},
		pendingSync: map[string]struct{}{},
	}
}

func (g *group) transition(s State, now time.Time) {
	g.state = s
	g.stateSince = now
}

// sortedMembers returns the members in member-id order, so that responses and
// elections do not depend on map iteration.
func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// remove drops a member and its timers; answering its calls is the caller's business.
func (g *group) remove(m *member) {
	m.expiry.Stop()
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// validateMember is Kafka's validateCurrentMember: a static member must be the current
// holder of its instance id, a dynamic one must exist.
func (g *group) validateMember(memberID, instanceID string) error {
	if instanceID != "" {
		if cur, ok := g.static[instanceID]; !ok || cur != memberID {
			return kerr.FencedInstanceID
		}
		return nil
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID
	}
	return nil
}

// supports reports whether a member of protocolType offering protocols may join: the
// first member needs a type and at least one protocol, later ones must match the type
// and share a protocol with every current member.
func (g *group) supports(protocolType string, protocols []Protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return false
}

func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !m.supports(name) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol of the next generation as Kafka does: among the
// protocols every member supports, each member votes for the first it lists, and the
// most votes win (ties go to the protocol the first member prefers).
func (g *group) selectProtocol() string {
	members := g.sortedMembers()
	if len(members) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range members[0].protocols {
		if g.allSupport(p.Name) && !slices.Contains(candidates, p.Name) {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, m := range members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// hasAllMembersJoined: every known member has a JoinGroup waiting and no member id
// handed out with MEMBER_ID_REQUIRED is still expected.
func (g *group) hasAllMembersJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// electJoinedLeader keeps the leader if it rejoined, else hands leadership to a member
// that did; false when nobody rejoined.
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// memberList is what the leader's JoinGroup response carries: every member with its
// metadata for the selected protocol.
func (g *group) memberList() []Member {
	ms := g.sortedMembers()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadataFor(g.protocol)})
	}
	return out
}

// computeSubscribed learns the consumer group's topics from its members' subscriptions.
func (g *group) computeSubscribed() {
	g.subscribed = nil
	if g.protocolType != consumerProtocolType || g.protocol == "" {
		return
	}
	topics := map[string]struct{}{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return
		}
		for _, t := range meta.Topics {
			topics[t] = struct{}{}
		}
	}
	g.subscribed = topics
}

func (g *group) isSubscribedTo(topic string) bool {
	if g.cg != nil {
		_, ok := g.cg.topics[topic]
		return ok
	}
	_, ok := g.subscribed[topic]
	return ok
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are exactly the member's current ones.
func (m *member) matches(protocols []Protocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i, p := range protocols {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// awaitingRebalance: a member with a JoinGroup or SyncGroup waiting is not expected to
// heartbeat, except a new member, whose join is bounded by NewMemberJoinTimeout.
func (m *member) awaitingRebalance() bool {
	return (m.join != nil && !m.isNew) || m.sync != nil
}
