package group

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// Description is one group as DescribeGroups reports it.
type Description struct {
	Group        string
	Err          error
	State        State
	ProtocolType string
	// Protocol is set, and members carry metadata and assignments, only while Stable.
	Protocol string
	Members  []MemberDescription
}

// MemberDescription is one member in a Description.
type MemberDescription struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// DescribeGroups describes groups. A group known only by its committed offsets (after a
// restart or a coordinator move) is Empty; one that does not exist at all is Dead, as
// Kafka reports it before DescribeGroups v6.
func (c *Coordinator) DescribeGroups(ctx context.Context, ids []string) []Description {
	out := make([]Description, len(ids))
	for i, id := range ids {
		out[i] = c.describe(ctx, id)
	}
	return out
}

func (c *Coordinator) describe(ctx context.Context, id string) Description {
	d := Description{Group: id, State: Dead}
	c.mu.Lock()
	if err := c.owns(id); err != nil {
		c.mu.Unlock()
		d.Err = err
		return d
	}
	if g := c.groups[id]; g != nil && g.cg != nil {
		c.mu.Unlock()
		// Kafka's DescribeGroups describes classic groups only; ConsumerGroupDescribe
		// describes consumer groups.
		d.Err = fmt.Errorf("%w: group %s is not a classic group", kerr.GroupIDNotFound, id)
		return d
	}
	if g := c.groups[id]; g != nil {
		defer c.mu.Unlock()
		d.State, d.ProtocolType = g.state, g.protocolType
		stable := g.state == Stable
		if stable {
			d.Protocol = g.protocol
		}
		for _, m := range g.sortedMembers() {
			md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
			if stable {
				md.Metadata, md.Assignment = m.metadataFor(g.protocol), m.assignment
			}
			d.Members = append(d.Members, md)
		}
		return d
	}
	c.mu.Unlock()
	offs, err := c.store.FetchOffsets(ctx, id, nil)
	if err != nil {
		d.Err = storeError(err)
		return d
	}
	if len(offs) > 0 {
		d.State = Empty
	}
	return d
}

// Listing is one group in ListGroups.
type Listing struct {
	Group        string
	ProtocolType string
	// Type is Kafka's group type: "classic" or "consumer" (share groups are listed by
	// coordinator/share).
	Type  string
	State State
}

// ClassicGroupType is the group type of classic groups in ListGroups.
const ClassicGroupType = "classic"

// ListGroups lists the groups this broker coordinates (members or committed offsets),
// those in one of states when states is non-empty.
func (c *Coordinator) ListGroups(ctx context.Context, states []string) ([]Listing, error) {
	stored, err := c.store.ListOffsetGroups(ctx)
	if err != nil {
		return nil, storeError(err)
	}
	if err := c.loadConsumerGroups(ctx); err != nil {
		return nil, err
	}
	want := func(s State) bool {
		return len(states) == 0 || slices.ContainsFunc(states, func(x string) bool { return strings.EqualFold(x, s.String()) })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.NotCoordinator
	}
	var out []Listing
	for _, g := range c.groups {
		if g.state != Dead && want(g.state) {
			typ := ClassicGroupType
			if g.cg != nil {
				typ = ConsumerGroupType
			}
			out = append(out, Listing{Group: g.id, ProtocolType: g.protocolType, Type: typ, State: g.state})
		}
	}
	if want(Empty) {
		for _, id := range stored {
			if c.groups[id] == nil && c.owns(id) == nil {
				out = append(out, Listing{Group: id, Type: ClassicGroupType, State: Empty})
			}
		}
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// DeleteGroups deletes empty groups and their committed offsets: NON_EMPTY_GROUP for a
// group with members, GROUP_ID_NOT_FOUND for one that does not exist.
func (c *Coordinator) DeleteGroups(ctx context.Context, ids []string) []error {
	out := make([]error, len(ids))
	for i, id := range ids {
		out[i] = c.deleteGroup(ctx, id)
	}
	return out
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) error {
	g, err := c.groupForDeletion(ctx, id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.groups[id] != g || g.state == Dead {
		c.mu.Unlock()
		return kerr.GroupIDNotFound
	}
	if g.state != Empty {
		c.mu.Unlock()
		return kerr.NonEmptyGroup
	}
	// Dead from here on: joins and commits get COORDINATOR_NOT_AVAILABLE and retry,
	// and find a fresh group once the deletion is done.
	for _, t := range g.pending {
		t.Stop()
	}
	clear(g.pending)
	g.joinTimer.Stop()
	g.syncTimer.Stop()
	g.transition(Dead, c.cfg.Now())
	c.mu.Unlock()

	g.offsetsLock.Lock() // waits for commits validated before the group died
	err = storeError(c.store.DeleteGroupOffsets(ctx, id, c.fence(g), nil))
	g.offsetsLock.Unlock()
	c.fenced(g, err)
	if err == nil && g.cg != nil {
		// A consumer group's state in the quorum goes with it.
		c.mu.Lock()
		g.cg.version++
		st := &metadata.ConsumerGroupState{Group: id, CoordinatorEpoch: g.coordEpoch, Version: g.cg.version}
		c.mu.Unlock()
		err = c.persistConsumer(ctx, g, st, true)
	}

	c.mu.Lock()
	if c.groups[id] == g {
		delete(c.groups, id)
	}
	c.mu.Unlock()
	return err
}
