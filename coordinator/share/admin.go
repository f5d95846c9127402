package share

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Description is one group as ShareGroupDescribe reports it.
type Description struct {
	Group           string
	Err             error
	State           State
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []MemberDescription
}

// MemberDescription is one member of a share group.
type MemberDescription struct {
	MemberID    string
	RackID      string
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	Subscribed  []string
	Assignment  []TopicPartitions
}

// DescribeGroups describes share groups: GROUP_ID_NOT_FOUND for a group that is not
// one (a classic group, or no group at all). A share group this broker has no members
// of, but whose share partitions have persisted state, is Empty.
func (c *Coordinator) DescribeGroups(ctx context.Context, ids []string) []Description {
	out := make([]Description, len(ids))
	for i, id := range ids {
		out[i] = c.describeShare(ctx, id)
	}
	return out
}

func (c *Coordinator) describeShare(ctx context.Context, id string) Description {
	d := Description{Group: id, State: Dead, Assignor: Assignor}
	c.mu.Lock()
	if err := c.owns(id); err != nil {
		c.mu.Unlock()
		d.Err = err
		return d
	}
	if sg := c.shares[id]; sg != nil && sg.state != Dead {
		defer c.mu.Unlock()
		d.State, d.Epoch, d.AssignmentEpoch = sg.state, sg.epoch, sg.epoch
		for _, mid := range slices.Sorted(maps.Keys(sg.members)) {
			m := sg.members[mid]
			d.Members = append(d.Members, MemberDescription{
				MemberID: m.id, RackID: m.rackID, MemberEpoch: m.epoch, ClientID: m.clientID, ClientHost: m.clientHost,
				Subscribed: slices.Clone(m.subscribed), Assignment: *shareAssignmentOf(sg, m),
			})
		}
		return d
	}
	classic := c.hasClassicGroup(id)
	c.mu.Unlock()
	if !classic {
		ok, err := c.hasShareState(ctx, id)
		if err != nil {
			d.Err = err
			return d
		}
		if ok {
			d.State = Empty
			return d
		}
	}
	// Kafka's messages for the two cases.
	if classic {
		d.Err = fmt.Errorf("%w: Group %s is not a share group.", kerr.GroupIDNotFound, id)
	} else {
		d.Err = fmt.Errorf("%w: Group %s not found.", kerr.GroupIDNotFound, id)
	}
	return d
}

// hasShareState reports whether id has persisted share-partition state.
func (c *Coordinator) hasShareState(ctx context.Context, id string) (bool, error) {
	if c.cfg.States == nil {
		return false, nil
	}
	st, err := c.cfg.States.ReadShareGroupState(ctx, id)
	if err != nil {
		return false, storeError(err)
	}
	return len(st) > 0, nil
}

// GroupOffsets returns the persisted state of a share group's partitions (all of
// them when topics is nil), for DescribeShareGroupOffsets and `shale group describe`.
// A partition without state is left out; the caller reports it with start offset -1.
func (c *Coordinator) GroupOffsets(ctx context.Context, id string, topics map[string][]int32) ([]PartitionState, error) {
	if _, err := c.shareAdminTarget(ctx, id, false); err != nil {
		return nil, err
	}
	if c.cfg.States == nil {
		return nil, nil
	}
	st, err := c.cfg.States.ReadShareGroupState(ctx, id)
	if err != nil {
		return nil, storeError(err)
	}
	if topics != nil {
		st = slices.DeleteFunc(st, func(s PartitionState) bool {
			ps, ok := topics[s.Topic]
			return !ok || !slices.Contains(ps, s.Partition)
		})
	}
	slices.SortFunc(st, func(a, b PartitionState) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return st, nil
}

// AlterGroupOffsets sets share-partition start offsets of a share group without
// members (NON_EMPTY_GROUP otherwise, as Kafka answers). A group that does not exist yet
// is created by it, as Kafka's AlterShareGroupOffsets does, so that its first members
// start where the operator said.
func (c *Coordinator) AlterGroupOffsets(ctx context.Context, id string, offsets []PartitionOffset) error {
	if _, err := c.shareAdminTarget(ctx, id, true); err != nil {
		return err
	}
	if c.cfg.States == nil {
		return fmt.Errorf("%w: this broker keeps no share-partition state", kerr.UnsupportedVersion)
	}
	return storeError(c.cfg.States.AlterShareStartOffsets(ctx, id, offsets))
}

// DeleteGroupOffsets deletes the state of some share partitions of a share group
// without members: GROUP_ID_NOT_FOUND for a group that does not exist.
func (c *Coordinator) DeleteGroupOffsets(ctx context.Context, id string, partitions map[string][]int32) error {
	exists, err := c.shareAdminTarget(ctx, id, true)
	if err != nil {
		return err
	}
	if !exists {
		if exists, err = c.hasShareState(ctx, id); err != nil {
			return err
		}
	}
	if !exists {
		return fmt.Errorf("%w: share group %s does not exist", kerr.GroupIDNotFound, id)
	}
	if c.cfg.States == nil {
		return nil
	}
	return storeError(c.cfg.States.DeleteShareGroupState(ctx, id, partitions))
}

// shareAdminTarget checks that id is a share group (or no group at all) this broker
// coordinates, and, when mustBeEmpty, that it has no members. exists is whether the
// share group is in memory.
func (c *Coordinator) shareAdminTarget(ctx context.Context, id string, mustBeEmpty bool) (exists bool, err error) {
	c.mu.Lock()
	if err := c.owns(id); err != nil {
		c.mu.Unlock()
		return false, err
	}
	if c.hasClassicGroup(id) {
		c.mu.Unlock()
		return false, fmt.Errorf("%w: group %s is not a share group", kerr.GroupIDNotFound, id)
	}
	if sg := c.shares[id]; sg != nil {
		defer c.mu.Unlock()
		switch {
		case sg.state == Dead || sg.deleting:
			return false, kerr.CoordinatorNotAvailable
		case mustBeEmpty && len(sg.members) > 0:
			return false, fmt.Errorf("%w: share group %s has %d members", kerr.NonEmptyGroup, id, len(sg.members))
		}
		return true, nil
	}
	c.mu.Unlock()
	offs, err := c.store.FetchOffsets(ctx, id, nil)
	if err != nil {
		return false, storeError(err)
	}
	if len(offs) > 0 {
		return false, fmt.Errorf("%w: group %s is not a share group", kerr.GroupIDNotFound, id)
	}
	return false, nil
}

// DeleteGroup deletes a share group without members and its share-partition state
// (DeleteGroups). handled is false when id is no share group, for the classic
// coordinator to take over.
func (c *Coordinator) DeleteGroup(ctx context.Context, id string) (handled bool, err error) {
	c.mu.Lock()
	if err := c.owns(id); err != nil {
		c.mu.Unlock()
		return false, nil // the classic coordinator answers the same
	}
	if c.hasClassicGroup(id) {
		c.mu.Unlock()
		return false, nil
	}
	sg := c.shares[id]
	if sg != nil {
		switch {
		case sg.state == Dead || sg.deleting:
			c.mu.Unlock()
			return true, kerr.GroupIDNotFound
		case len(sg.members) > 0:
			c.mu.Unlock()
			return true, kerr.NonEmptyGroup
		}
		// Joins wait (COORDINATOR_NOT_AVAILABLE) until the state is gone, so that no
		// member starts from state being deleted.
		sg.deleting = true
	}
	c.mu.Unlock()
	if sg == nil {
		ok, err := c.hasShareState(ctx, id)
		if err != nil || !ok {
			return ok, err
		}
	}
	if c.cfg.States != nil {
		err = storeError(c.cfg.States.DeleteShareGroupState(ctx, id, nil))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sg != nil && c.shares[id] == sg {
		sg.deleting = false
		if err == nil {
			c.unloadShare(sg)
		}
	}
	if err == nil {
		c.lg.Info("share group deleted", "group", id)
	}
	return true, err
}

// Listing is one share group in ListGroups.
type Listing struct {
	Group string
	State State
}

// ListGroups lists the share groups this broker coordinates in one of states (any when
// states is empty, names compared as Kafka names them, ignoring case): those in memory,
// and those known only by persisted share-partition state.
func (c *Coordinator) ListGroups(ctx context.Context, states []string) ([]Listing, error) {
	var stored []string
	if c.cfg.States != nil {
		var err error
		if stored, err = c.cfg.States.ListShareStateGroups(ctx); err != nil {
			return nil, storeError(err)
		}
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
	for _, sg := range c.shares {
		if sg.state != Dead && want(sg.state) {
			out = append(out, Listing{Group: sg.id, State: sg.state})
		}
	}
	if want(Empty) {
		for _, id := range stored {
			if c.shares[id] == nil && c.owns(id) == nil && !c.hasClassicGroup(id) {
				out = append(out, Listing{Group: id, State: Empty})
			}
		}
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}
