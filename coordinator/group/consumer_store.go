package group

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// Consumer groups' state goes through the controller quorum (metadata.ConsumerGroupStore)
// before a heartbeat that changed it is answered, so that a coordinator taking a group
// over continues it at the same group epoch, member epochs and assignments, as Kafka's
// coordinator replays __consumer_offsets. Every write carries the whole state with a
// version taken under c.mu; writes leave c.mu, and the quorum drops one overtaken by a
// later version (which already holds its changes). A store without ConsumerGroupStore
// (some tests) keeps consumer groups in memory only.

// consumerStore is the store's ConsumerGroupStore, nil when it has none.
func (c *Coordinator) consumerStore() metadata.ConsumerGroupStore {
	s, _ := c.store.(metadata.ConsumerGroupStore)
	return s
}

// consumerSnapshot is the group's state to persist when it differs from what was last
// persisted, with the next version; nil when nothing changed. Callers hold c.mu.
func (c *Coordinator) consumerSnapshot(g *group) *metadata.ConsumerGroupState {
	if g == nil || g.cg == nil || g.state == Dead || c.consumerStore() == nil || c.groups[g.id] != g {
		return nil
	}
	cg := g.cg
	st := metadata.ConsumerGroupState{Group: g.id, CoordinatorEpoch: g.coordEpoch, GroupEpoch: cg.epoch, Assignor: cg.assignor}
	for _, name := range slices.Sorted(maps.Keys(cg.topics)) {
		t := cg.topics[name]
		st.Topics = append(st.Topics, metadata.ConsumerGroupTopic{Name: name, ID: t.id, Partitions: t.parts})
	}
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[id]
		st.Members = append(st.Members, metadata.ConsumerGroupMember{
			MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: m.epoch, PreviousMemberEpoch: m.previousEpoch, State: int8(m.state),
			RebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()), Names: slices.Clone(m.names), Regex: m.regex,
			Assignor: m.assignor, Assigned: m.assigned.clone(), Revoking: m.revoking.clone(), Target: cg.target[m.id].clone(),
			Classic: m.classic.toState(),
		})
	}
	if cg.persisted != nil {
		prev := *cg.persisted
		prev.Version = 0
		if reflect.DeepEqual(prev, st) {
			return nil
		}
	}
	cg.version++
	st.Version = cg.version
	cg.persisted = &st
	return &st
}

// persistConsumer writes st through the quorum. On NOT_COORDINATOR the group is
// unloaded (another broker coordinates it); on any failure the next heartbeat writes
// the whole state again.
func (c *Coordinator) persistConsumer(ctx context.Context, g *group, st *metadata.ConsumerGroupState, remove bool) error {
	store := c.consumerStore()
	if store == nil || st == nil {
		return nil
	}
	err := storeError(store.WriteConsumerGroup(ctx, c.fence(g), *st, remove))
	if err != nil {
		c.fenced(g, err)
		c.mu.Lock()
		if g.cg != nil && g.cg.persisted == st {
			g.cg.persisted = nil
		}
		c.mu.Unlock()
	}
	return err
}

// loadConsumerGroup brings a consumer group this broker coordinates but does not have
// in memory back from the quorum (after a coordinator move or a restart): members keep
// their epochs and assignments, and their sessions start again from now.
func (c *Coordinator) loadConsumerGroup(ctx context.Context, id string) error {
	store := c.consumerStore()
	if store == nil {
		return nil
	}
	c.mu.Lock()
	skip := c.owns(id) != nil || c.groups[id] != nil || c.isShareGroup(id)
	c.mu.Unlock()
	if skip {
		return nil // the caller answers from memory, or with why it may not
	}
	st, err := store.LoadConsumerGroup(ctx, id)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return kerr.CoordinatorNotAvailable
		}
		return storeError(err)
	}
	if st == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owns(id) != nil || c.groups[id] != nil {
		return nil
	}
	g := c.newGroup(id)
	g.protocolType = consumerProtocolType
	cg := newConsumerGroup()
	g.cg = cg
	cg.epoch, cg.assignor = st.GroupEpoch, st.Assignor
	if st.CoordinatorEpoch == g.coordEpoch {
		cg.version = st.Version
	}
	for _, t := range st.Topics {
		cg.topics[t.Name] = consumerTopic{id: t.ID, parts: t.Partitions}
	}
	for _, ms := range st.Members {
		m := &consumerMember{
			id: ms.MemberID, instanceID: ms.InstanceID, rackID: ms.RackID, clientID: ms.ClientID, clientHost: ms.ClientHost,
			epoch: ms.MemberEpoch, previousEpoch: ms.PreviousMemberEpoch, state: memberState(ms.State),
			rebalanceTimeout: time.Duration(ms.RebalanceTimeoutMs) * time.Millisecond, names: ms.Names, regex: ms.Regex,
			assignor: ms.Assignor, assigned: assignmentFrom(ms.Assigned), revoking: assignmentFrom(ms.Revoking),
			classic: classicFromState(ms.Classic),
		}
		if m.regex != "" {
			// Stored only after it compiled; a failure here would be a corrupt store.
			m.re, _ = regexp.Compile(`^(?:` + m.regex + `)$`)
		}
		cg.members[m.id] = m
		cg.target[m.id] = assignmentFrom(ms.Target)
		m.assigned.each(func(k tpKey) { cg.owners[k] = m.id })
		m.revoking.each(func(k tpKey) { cg.owners[k] = m.id })
	}
	for _, m := range cg.members {
		c.consumerTouch(g, m)
		if m.state == memberUnrevoked {
			c.armRevoke(g, m)
		}
	}
	loaded := *st
	cg.persisted = &loaded
	c.setConsumerState(g)
	c.lg.Info("consumer group loaded from the quorum", "group", id, "group_epoch", cg.epoch, "members", len(cg.members))
	return nil
}

func assignmentFrom(m map[[16]byte][]int32) assignment {
	out := assignment{}
	for id, ps := range m {
		for _, p := range ps {
			out.add(tpKey{id, p})
		}
	}
	return out
}

// loadConsumerGroups loads every consumer group in the quorum that this broker
// coordinates and has not loaded yet (after a failover), so that ListGroups shows them
// with their state rather than as offsets only, or not at all.
func (c *Coordinator) loadConsumerGroups(ctx context.Context) error {
	store := c.consumerStore()
	if store == nil {
		return nil
	}
	ids, err := store.ListConsumerGroups(ctx)
	if err != nil {
		return storeError(err)
	}
	for _, id := range ids {
		if err := c.loadConsumerGroup(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// loadConsumerGroupNow is loadConsumerGroup for the calls that have no context of
// their own (SyncGroup, Heartbeat), bounded by StoreTimeout.
func (c *Coordinator) loadConsumerGroupNow(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
	defer cancel()
	return c.loadConsumerGroup(ctx, id)
}
