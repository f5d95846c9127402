package group

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ConsumerDescription is one group as ConsumerGroupDescribe reports it.
type ConsumerDescription struct {
	Group           string
	Err             error
	State           State
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// ConsumerMemberDescription is one member in a ConsumerDescription.
type ConsumerMemberDescription struct {
	MemberID    string
	InstanceID  string
	RackID      string
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	Subscribed  []string
	Regex       string
	// Assignment is what the member owns (or is about to); Target its target
	// assignment at the group epoch.
	Assignment []TopicPartitions
	Target     []TopicPartitions
}

// DescribeConsumerGroups describes consumer groups. A group that is not a consumer group
// gets GROUP_ID_NOT_FOUND, as in Kafka; one known only by its committed offsets is an
// Empty consumer group at epoch 0 (it becomes one on its first heartbeat).
func (c *Coordinator) DescribeConsumerGroups(ctx context.Context, ids []string) []ConsumerDescription {
	out := make([]ConsumerDescription, len(ids))
	for i, id := range ids {
		out[i] = c.describeConsumer(ctx, id)
	}
	return out
}

func (c *Coordinator) describeConsumer(ctx context.Context, id string) ConsumerDescription {
	d := ConsumerDescription{Group: id, State: Dead}
	// A group this broker coordinates but has not loaded yet (after a failover) is
	// described from the quorum, as its heartbeats and commits would find it.
	if err := c.loadConsumerGroup(ctx, id); err != nil {
		d.Err = err
		return d
	}
	c.mu.Lock()
	if err := c.owns(id); err != nil {
		c.mu.Unlock()
		d.Err = err
		return d
	}
	g := c.groups[id]
	if g != nil {
		defer c.mu.Unlock()
		if g.cg == nil || g.state == Dead {
			d.Err = fmt.Errorf("%w: group %s is not a consumer group", kerr.GroupIDNotFound, id)
			return d
		}
		cg := g.cg
		d.State, d.Epoch, d.AssignmentEpoch, d.Assignor = g.state, cg.epoch, cg.epoch, cg.assignor
		for _, mid := range slices.Sorted(maps.Keys(cg.members)) {
			m := cg.members[mid]
			d.Members = append(d.Members, ConsumerMemberDescription{
				MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, MemberEpoch: m.epoch,
				ClientID: m.clientID, ClientHost: m.clientHost, Subscribed: slices.Clone(m.names), Regex: m.regex,
				Assignment: *c.assignmentOf(g, m.assigned), Target: *c.assignmentOf(g, cg.target[m.id]),
			})
		}
		return d
	}
	c.mu.Unlock()
	offs, err := c.store.FetchOffsets(ctx, id, nil)
	if err != nil {
		d.Err = storeError(err)
		return d
	}
	if len(offs) == 0 {
		d.Err = fmt.Errorf("%w: group %s does not exist", kerr.GroupIDNotFound, id)
		return d
	}
	d.State, d.Assignor = Empty, c.cfg.ConsumerAssignors[0]
	return d
}
