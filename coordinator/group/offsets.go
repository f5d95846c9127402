package group

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// CommitRequest is one OffsetCommit. Generation -1 with an empty member id is a
// "simple" commit from a client that does not use group management: allowed only while
// the group has no members.
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	// Retention (OffsetCommit v2-v4 retention_time_ms) gives these offsets an explicit
	// expiry; zero or negative follows offsets.retention.minutes.
	Retention time.Duration
	// MemberEpochs is set for OffsetCommit v9+, whose generation is a consumer group
	// member's epoch (KIP-848).
	MemberEpochs bool
	// Offsets to commit: Topic, Partition, Offset, LeaderEpoch and Metadata are used;
	// the commit and expiry times are set here.
	Offsets []metadata.CommittedOffset
}

// CommitOffsets validates the committer against the group and stores the offsets
// through the metadata store. A non-nil error applies to every partition; otherwise
// the slice holds each offset's outcome, in request order.
func (c *Coordinator) CommitOffsets(ctx context.Context, req CommitRequest) ([]error, error) {
	if req.MemberEpochs && req.MemberID != "" {
		// A consumer group's member may commit before its first heartbeat to a
		// coordinator that took the group over: load the group as that would.
		if err := c.loadConsumerGroup(ctx, req.Group); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		g, err := c.groupForCommit(req)
		if err != nil {
			return nil, err
		}
		// Shared: many commits may be in flight; a deletion of the group's offsets
		// waits for them.
		g.offsetsLock.RLock()
		c.mu.Lock()
		current := c.groups[g.id] == g
		if current {
			err = c.validateCommit(g, req)
		}
		c.mu.Unlock()
		if !current {
			g.offsetsLock.RUnlock()
			if attempt < 3 {
				// An idle group was forgotten or deleted meanwhile: look it up again.
				continue
			}
			return nil, kerr.CoordinatorNotAvailable
		}
		if err != nil {
			g.offsetsLock.RUnlock()
			return nil, err
		}
		errs := c.storeCommit(ctx, g, req)
		g.offsetsLock.RUnlock()
		return errs, nil
	}
}

func (c *Coordinator) storeCommit(ctx context.Context, g *group, req CommitRequest) []error {
	im := c.store.Current()
	now := c.cfg.Now()
	errs := make([]error, len(req.Offsets))
	valid := make([]metadata.CommittedOffset, 0, len(req.Offsets))
	for i, o := range req.Offsets {
		switch {
		case im.Partition(o.Topic, o.Partition) == nil:
			errs[i] = kerr.UnknownTopicOrPartition
		case !metadata.OffsetMetadataFits(o.Metadata, c.cfg.OffsetMetadataMaxBytes):
			errs[i] = kerr.OffsetMetadataTooLarge
		default:
			o.CommitTime = now
			o.ExpireTime = time.Time{}
			if req.Retention > 0 {
				o.ExpireTime = now.Add(req.Retention)
			}
			valid = append(valid, o)
		}
	}
	if len(valid) == 0 {
		return errs
	}
	if err := storeError(c.store.CommitOffsets(ctx, req.Group, c.fence(g), valid)); err != nil {
		c.fenced(g, err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// groupForCommit finds the group, creating an empty one for a simple commit.
func (c *Coordinator) groupForCommit(req CommitRequest) (*group, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.owns(req.Group); err != nil {
		return nil, err
	}
	if c.isShareGroup(req.Group) {
		// A share group has no committed offsets; its progress is its share-partition state.
		return nil, fmt.Errorf("%w: group %s is a share group", kerr.GroupIDNotFound, req.Group)
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberEpochs && req.MemberID != "" {
			// A consumer group this coordinator does not have: the member must join
			// again.
			return nil, kerr.UnknownMemberID
		}
		if req.Generation >= 0 {
			// A member of a generation this coordinator never formed (it took over, or
			// the group was deleted): the member must rejoin.
			return nil, kerr.IllegalGeneration
		}
		g = c.newGroup(req.Group)
	}
	return g, nil
}

// validateCommit is Kafka's validateOffsetCommit plus the state check of its
// doCommitOffsets.
func (c *Coordinator) validateCommit(g *group, req CommitRequest) error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if g.cg != nil {
		return g.validateConsumerCommit(req, false)
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "" {
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if g.state != Empty {
		// Only members commit for a group that has them.
		return kerr.UnknownMemberID
	}
	switch g.state {
	case CompletingRebalance:
		// The member has its new generation but not yet its assignment.
		return kerr.RebalanceInProgress
	case Stable, PreparingRebalance:
		// Commits during a rebalance are allowed: the heartbeat tells the member to
		// rejoin. A commit counts as a sign of life.
		c.heartbeat(g, g.members[req.MemberID])
	}
	return nil
}

// FetchOffsets returns a group's committed offsets from the store; nil topics means all
// of them, a topic with nil partitions all of its partitions. Partitions without a
// commit are simply absent.
func (c *Coordinator) FetchOffsets(ctx context.Context, groupID string, topics map[string][]int32) ([]metadata.CommittedOffset, error) {
	c.mu.Lock()
	err := c.owns(groupID)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	offs, err := c.store.FetchOffsets(ctx, groupID, topics)
	return offs, storeError(err)
}

// DeleteOffsets is OffsetDelete: it removes committed offsets of partitions the group
// is not consuming. The error is the group's; the map holds each partition's outcome.
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, partitions map[string][]int32) (map[string]map[int32]error, error) {
	g, err := c.groupForDeletion(ctx, groupID)
	if err != nil {
		return nil, err
	}
	defer c.dropIfUnused(g)
	g.offsetsLock.Lock()
	defer g.offsetsLock.Unlock()

	out := map[string]map[int32]error{}
	set := func(t string, p int32, err error) {
		if out[t] == nil {
			out[t] = map[int32]error{}
		}
		out[t][p] = err
	}
	im := c.store.Current()
	eligible := map[string][]int32{}
	c.mu.Lock()
	if c.groups[g.id] != g || g.state == Dead {
		c.mu.Unlock()
		return nil, kerr.GroupIDNotFound
	}
	consumer := g.protocolType == consumerProtocolType
	if g.state != Empty && !consumer {
		c.mu.Unlock()
		return nil, kerr.NonEmptyGroup
	}
	for t, ps := range partitions {
		for _, p := range ps {
			switch {
			case im.Partition(t, p) == nil:
				set(t, p, kerr.UnknownTopicOrPartition)
			case g.state != Empty && g.isSubscribedTo(t):
				set(t, p, kerr.GroupSubscribedToTopic)
			default:
				eligible[t] = append(eligible[t], p)
			}
		}
	}
	c.mu.Unlock()
	if len(eligible) == 0 {
		return out, nil
	}
	if err := storeError(c.store.DeleteGroupOffsets(ctx, groupID, c.fence(g), eligible)); err != nil {
		c.fenced(g, err)
		return nil, err
	}
	for t, ps := range eligible {
		for _, p := range ps {
			set(t, p, nil)
		}
	}
	return out, nil
}

// groupForDeletion finds the group an admin operation applies to: one in memory, or one
// that exists only as committed offsets in the store (it is then loaded as Empty).
func (c *Coordinator) groupForDeletion(ctx context.Context, groupID string) (*group, error) {
	c.mu.Lock()
	if err := c.owns(groupID); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if g := c.groups[groupID]; g != nil {
		c.mu.Unlock()
		if g.state == Dead {
			return nil, kerr.GroupIDNotFound
		}
		return g, nil
	}
	c.mu.Unlock()
	offs, err := c.store.FetchOffsets(ctx, groupID, nil)
	if err != nil {
		return nil, storeError(err)
	}
	if len(offs) == 0 {
		return nil, kerr.GroupIDNotFound
	}
	return c.loadGroup(groupID)
}

// loadGroup returns the in-memory group, creating an Empty one.
func (c *Coordinator) loadGroup(groupID string) (*group, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.owns(groupID); err != nil {
		return nil, err
	}
	g := c.groups[groupID]
	if g == nil {
		g = c.newGroup(groupID)
	}
	return g, nil
}

// dropIfUnused forgets an Empty group that has nothing left in memory worth keeping; its
// offsets (if any) stay in the store, where the group is found again.
func (c *Coordinator) dropIfUnused(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g && g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 && g.protocolType == "" {
		delete(c.groups, g.id)
	}
}
