package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// TxnCommitFunc stores a TxnOffsetCommit's offsets as pending in their transaction,
// under the group coordinator's fence; they become the group's committed offsets when
// the transaction commits.
type TxnCommitFunc func(ctx context.Context, fence metadata.GroupFence, offsets []metadata.CommittedOffset) error

// CommitTxnOffsets is the group's side of TxnOffsetCommit: the committer is validated
// against the group as OffsetCommit's is when it names a member or generation (KIP-447),
// and not at all otherwise (older producers do not know the consumer's group), and write
// stores the offsets. A non-nil error applies to every partition; otherwise the slice
// holds each offset's outcome, in request order.
func (c *Coordinator) CommitTxnOffsets(ctx context.Context, req CommitRequest, write TxnCommitFunc) ([]error, error) {
	g, err := c.groupForCommit(req)
	if err != nil {
		return nil, err
	}
	g.offsetsLock.RLock()
	defer g.offsetsLock.RUnlock()
	c.mu.Lock()
	switch {
	case c.groups[g.id] != g || g.state == Dead:
		err = kerr.CoordinatorNotAvailable
	case g.cg != nil:
		err = g.validateConsumerCommit(req, true)
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "":
		if err = g.validateMember(req.MemberID, req.InstanceID); err == nil && req.Generation != g.generation {
			err = kerr.IllegalGeneration
		}
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
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
			valid = append(valid, o)
		}
	}
	if len(valid) == 0 {
		return errs, nil
	}
	if err := write(ctx, c.fence(g), valid); err != nil {
		c.fenced(g, err)
		err = storeError(err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs, nil
}
