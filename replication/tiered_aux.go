package replication

import (
	"context"
	"errors"

	"github.com/shalelog/shale/partition"
)

// restartFollower restarts a follower's log at offset, the leader's local log start,
// because the leader's log starts after everything this replica holds. For a Tiered
// partition that is KIP-1023's fetch from the tiered offset: the follower copies only
// the leader's local log, and, as Kafka builds its auxiliary state, takes the producer
// state from the snapshot uploaded with the remote segment holding offset-1, restarting
// at that segment's end. Without it, the producers whose batches are all remote would be
// unknown here, and this replica, once leader, would append their retries again and
// not fence their older epochs. The segment's end may lie past offset (another leader
// rolled it elsewhere), never past limit, the leader's log end as far as the fetcher
// knows. When the snapshot cannot be had (no such segment in the image yet, one uploaded
// without it, a store error), the follower restarts at offset without it, as before,
// and says so.
func (m *Manager) restartFollower(ctx context.Context, p *partition.Partition, offset, limit int64) error {
	rl := m.remoteLog(p)
	if rl == nil || offset <= 0 {
		return p.RestartAt(offset)
	}
	lg := m.lg.With("topic", p.Topic(), "partition", p.Index(), "offset", offset)
	s, ok := rl.Find(offset - 1)
	if !ok || s.BaseOffset > offset-1 || s.EndOffset+1 > limit {
		lg.Warn("no remote segment ends at the leader's local log start; the follower restarts there without the producer state of the remote log")
		return p.RestartAt(offset)
	}
	seg, ok := storeSegment(s)
	if !ok {
		lg.Warn("the remote segment before the leader's local log start has a malformed upload id; the follower restarts without the producer state of the remote log", "upload_id", s.UploadID)
		return p.RestartAt(offset)
	}
	cctx, cancel := m.withTimeout(ctx, m.cfg.RemoteRequestTimeout)
	snap, err := m.tier.reader.ProducerSnapshot(cctx, seg)
	cancel()
	if err != nil {
		m.tier.errs.WithLabelValues("read").Inc()
		lg.Warn("reading the producer snapshot of the remote log failed; the follower restarts without it", "base_offset", s.BaseOffset, "err", err)
		return p.RestartAt(offset)
	}
	if snap == nil {
		lg.Warn("the remote segment before the leader's local log start was uploaded without a producer snapshot; the follower restarts without it", "base_offset", s.BaseOffset)
		return p.RestartAt(offset)
	}
	err = p.RestartAtWithProducers(s.EndOffset+1, snap)
	if errors.Is(err, partition.ErrProducerSnapshot) {
		lg.Warn("the producer snapshot of the remote log is unusable; the follower restarts without it", "base_offset", s.BaseOffset, "err", err)
		return p.RestartAt(offset)
	}
	return err
}
