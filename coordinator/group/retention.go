package group

import (
	"context"
	"time"

	"github.com/shalelog/shale/metadata"
)

func (c *Coordinator) retentionLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.OffsetsRetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.ExpireOffsets(ctx); err != nil && ctx.Err() == nil {
				c.lg.Warn("offset retention sweep failed", "err", err)
			}
		}
	}
}

// ExpireOffsets deletes the committed offsets that offsets.retention.minutes has
// expired, for the groups this broker coordinates, as Kafka's cleanupGroupMetadata
// does: every offset of a consumer group that has been Empty for the retention period;
// offsets of topics a Stable consumer group no longer subscribes to, retention after
// their last commit; offsets of groups that never used group management, retention
// after their last commit; and any offset past an explicit expiry (OffsetCommit v2-v4).
// Empty groups left with no offsets are forgotten. It runs every
// OffsetsRetentionCheckInterval; tests call it directly.
func (c *Coordinator) ExpireOffsets(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.StoreTimeout)
	stored, err := c.store.ListOffsetGroups(sctx)
	cancel()
	if err != nil {
		return err
	}
	withOffsets := map[string]bool{}
	for _, id := range stored {
		c.mu.Lock()
		owned := c.owns(id) == nil
		c.mu.Unlock()
		if !owned {
			continue
		}
		left, err := c.expireGroupOffsets(ctx, id)
		if err != nil {
			return err
		}
		if left > 0 {
			withOffsets[id] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, g := range c.groups {
		if !withOffsets[id] && g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 {
			g.transition(Dead, c.cfg.Now())
			delete(c.groups, id)
		}
	}
	return nil
}

// expireGroupOffsets deletes one group's expired offsets and returns how many are left.
func (c *Coordinator) expireGroupOffsets(ctx context.Context, id string) (int, error) {
	g, err := c.loadGroup(id)
	if err != nil {
		return 0, nil // moved meanwhile: no longer ours to expire
	}
	g.offsetsLock.Lock()
	defer g.offsetsLock.Unlock()
	sctx, cancel := context.WithTimeout(ctx, c.cfg.StoreTimeout)
	defer cancel()
	offs, err := c.store.FetchOffsets(sctx, id, nil)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if c.groups[id] != g || g.state == Dead {
		c.mu.Unlock()
		return len(offs), nil
	}
	expired, n := g.expiredOffsets(offs, c.cfg.Now(), c.cfg.OffsetsRetention)
	c.mu.Unlock()
	if n == 0 {
		return len(offs), nil
	}
	if n == len(offs) {
		// Everything expired: drop the group's entry as a whole.
		expired = nil
	}
	if err := c.store.DeleteGroupOffsets(sctx, id, c.fence(g), expired); err != nil {
		c.fenced(g, err)
		return 0, err
	}
	c.lg.Info("expired committed offsets", "group", id, "partitions", n)
	return len(offs) - n, nil
}

// expiredOffsets picks the offsets retention has expired, by Kafka's rules for the
// group's state; n counts them.
func (g *group) expiredOffsets(offs []metadata.CommittedOffset, now time.Time, retention time.Duration) (map[string][]int32, int) {
	var base func(metadata.CommittedOffset) time.Time
	var skipSubscribed bool
	switch {
	case g.protocolType == "":
		// Offsets only ("simple" consumers): each offset lives retention past its commit.
		base = func(o metadata.CommittedOffset) time.Time { return o.CommitTime }
	case g.state == Empty:
		// A group that used group management: retention runs from when it emptied.
		base = func(metadata.CommittedOffset) time.Time { return g.stateSince }
	case g.state == Stable && g.protocolType == consumerProtocolType && g.subscribed != nil:
		base = func(o metadata.CommittedOffset) time.Time { return o.CommitTime }
		skipSubscribed = true
	default:
		return nil, 0
	}
	out := map[string][]int32{}
	n := 0
	for _, o := range offs {
		if skipSubscribed && g.isSubscribedTo(o.Topic) {
			continue
		}
		var expired bool
		if !o.ExpireTime.IsZero() {
			expired = !now.Before(o.ExpireTime)
		} else {
			expired = now.Sub(base(o)) >= retention
		}
		if expired {
			out[o.Topic] = append(out[o.Topic], o.Partition)
			n++
		}
	}
	return out, n
}
