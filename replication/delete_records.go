package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/partition"
)

// Purge is a DeleteRecords in progress on one partition: the leader's log start offset
// has moved to Target, and the purge is done once every live replica's has (Kafka's
// DelayedDeleteRecords). Answering before that would let a follower that has not yet
// heard of it become leader and serve the deleted records again.
type Purge struct {
	m     *Manager
	p     *partition.Partition
	topic string
	index int32
	// Target is the log start offset the purge waits for.
	Target int64
	// remoteOnly: the purge moved only the remote log's start (tiered storage), which
	// the controller committed; the replicas' local logs already start after it.
	remoteOnly bool
}

// StartDeleteRecords advances the leader's log start offset to offset (-1: the high
// watermark). Poll, or AwaitPurges, tells when the followers have followed.
func (m *Manager) StartDeleteRecords(topic string, index int32, offset int64) (*Purge, error) {
	p, err := m.Leader(topic, index, -1)
	if err != nil {
		return nil, err
	}
	if rl := m.remoteLog(p); rl != nil {
		if offset == -1 {
			offset = p.HighWatermark()
		}
		if offset >= 0 && offset <= p.HighWatermark() && offset > logStart(p, rl) {
			if err := m.deleteRemoteBefore(p, rl, offset); err != nil {
				return nil, err
			}
			if offset < p.LogStartOffset() {
				// Only the remote log moved: the local replicas already start later.
				return &Purge{m: m, p: p, topic: topic, index: index, Target: offset, remoteOnly: true}, nil
			}
		}
	}
	start, err := p.DeleteRecordsBefore(offset)
	if err != nil {
		return nil, m.ReplicaGone(topic, index, err)
	}
	return &Purge{m: m, p: p, topic: topic, index: index, Target: start}, nil
}

// deleteRemoteBefore moves the remote log's start to offset through the controller,
// starting the deletion of the segments wholly below it (the uploader finishes them),
// and waits until the applied image shows it, so that no read below offset is served
// from the remote log after the answer.
func (m *Manager) deleteRemoteBefore(p *partition.Partition, rl *metadata.RemoteLog, offset int64) error {
	var ids []string
	for _, s := range rl.Segments {
		if s.EndOffset >= offset {
			break
		}
		ids = append(ids, s.UploadID)
	}
	ctx, cancel := m.withTimeout(m.ctx, m.cfg.RemoteRequestTimeout)
	defer cancel()
	if err := m.tier.logs.StartRemoteDelete(ctx, p.Topic(), p.TopicID(), p.Index(), p.LeaderEpoch(), ids, offset); err != nil {
		return err
	}
	if !m.WaitApplied(ctx, func(im *metadata.Image) bool {
		r := im.RemoteLog(p.Topic(), p.Index())
		return r == nil || r.LogStart >= offset
	}) {
		return fmt.Errorf("%w: the remote log start did not show in time", kerr.RequestTimedOut)
	}
	return nil
}

// Poll reports the low watermark and whether it has reached the target. An error (this
// replica is no longer the leader, or was removed) ends the purge undecided: the log
// start may or may not have reached the other replicas.
//
// A fenced broker's leadership may have moved, and its view of which replicas are alive
// is stale: the purge is not done while the controller says it is fenced.
func (g *Purge) Poll() (low int64, done bool, err error) {
	if g.remoteOnly {
		return g.Target, true, nil
	}
	low, err = g.p.LowWatermark(g.m.brokerAlive)
	if err != nil {
		return -1, true, g.m.ReplicaGone(g.topic, g.index, err)
	}
	return low, low >= g.Target && !g.m.store.Fenced(), nil
}

// purgeRecheck bounds how long a purge waits without a wake-up from its partition: a
// follower that is fenced, and so no longer counted, changes no partition state, and
// neither does the controller unfencing this broker.
const purgeRecheck = 200 * time.Millisecond

// PurgeResult is one purge's answer: the low watermark once the purge is done, or why
// it is not.
type PurgeResult struct {
	LowWatermark int64
	Err          error
}

// AwaitPurges waits for every purge of one DeleteRecords, under one deadline, ctx's:
// waiting for each in turn takes as long as the slowest, and one that completed while
// another was awaited is answered done even after ctx ends. Each result is Await's.
func (m *Manager) AwaitPurges(ctx context.Context, purges []*Purge) []PurgeResult {
	out := make([]PurgeResult, len(purges))
	for i, g := range purges {
		out[i].LowWatermark, out[i].Err = g.Await(ctx)
	}
	return out
}

// Await waits for Poll until the purge is done or ctx ends, when it fails with
// REQUEST_TIMED_OUT (the purge may still complete: the leader's log start has moved).
// It returns the low watermark. It wakes at each change of the partition's state, and
// at least every purgeRecheck of the manager's clock.
func (g *Purge) Await(ctx context.Context) (int64, error) {
	recheck := g.m.after(purgeRecheck)
	for {
		w := g.p.Waiter()
		low, done, err := g.Poll()
		if done || err != nil {
			return low, err
		}
		select {
		case <-w:
		case <-recheck:
			recheck = g.m.after(purgeRecheck)
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: the low watermark is %d, short of %d: %w", kerr.RequestTimedOut, low, g.Target, ctx.Err())
		}
	}
}

// brokerAlive says whether a broker counts for the low watermark: registered and not
// fenced, as Kafka counts only live brokers' replicas.
func (m *Manager) brokerAlive(id int32) bool {
	b, ok := m.Image().Brokers[id]
	return ok && !b.Fenced
}
