package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// validateConsumerCommit checks an offset commit to a consumer group, as Kafka's
// ConsumerGroup.validateOffsetCommit does: a commit without a member only while the
// group has none; a member's only with OffsetCommit v9+ (whose generation is the member
// epoch) or from a transaction, and only at the member's current epoch, older ones
// getting STALE_MEMBER_EPOCH (Kafka 4.0) and newer ones FENCED_MEMBER_EPOCH. Callers
// hold c.mu.
func (g *group) validateConsumerCommit(req CommitRequest, transactional bool) error {
	if req.MemberID == "" && req.InstanceID == "" && req.Generation < 0 {
		if len(g.cg.members) > 0 {
			return kerr.UnknownMemberID
		}
		return nil
	}
	m := g.cg.members[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	if m.classic != nil && !req.MemberEpochs {
		// A classic member commits with its generation, which is its member epoch.
		if req.Generation != m.epoch {
			return fmt.Errorf("%w: generation %d, member epoch %d", kerr.IllegalGeneration, req.Generation, m.epoch)
		}
		return nil
	}
	if !transactional && !req.MemberEpochs {
		return fmt.Errorf("%w: members of consumer groups commit with OffsetCommit v9 or later", kerr.UnsupportedVersion)
	}
	return checkCommitEpoch(req.Generation, m.epoch)
}

func checkCommitEpoch(got, want int32) error {
	switch {
	case got > want:
		return fmt.Errorf("%w: member epoch %d is newer than %d", kerr.FencedMemberEpoch, got, want)
	case got < want:
		return fmt.Errorf("%w: member epoch %d, current %d", kerr.StaleMemberEpoch, got, want)
	}
	return nil
}

// ValidateOffsetFetch is OffsetFetch v9's member check: a fetch that names a member of a
// consumer group must carry its current epoch (STALE_MEMBER_EPOCH otherwise), so that a
// member reads its starting offsets only for an assignment it still has. A fetch
// without a member id, or for a group that is not a consumer group, is not checked.
func (c *Coordinator) ValidateOffsetFetch(groupID, memberID string, memberEpoch int32) error {
	if memberID == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.owns(groupID); err != nil {
		return err
	}
	g := c.groups[groupID]
	if g == nil || g.cg == nil {
		// Classic members send their generation here too; Kafka checks only
		// consumer groups' members.
		return nil
	}
	m := g.cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	return checkCommitEpoch(memberEpoch, m.epoch)
}
