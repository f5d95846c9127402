package partition

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// followerState is the leader's view of one follower, as Kafka's Replica keeps it.
type followerState struct {
	// leo is the follower's log end offset, from its last fetch; -1 until it fetches in
	// this leader epoch.
	leo int64
	// logStart is the follower's log start offset, from its last fetch; -1 until it
	// reports one. DeleteRecords is answered only once every live follower's has moved.
	logStart int64
	// lastCaughtUp is the last time the follower had fetched up to the leader's log end
	// (or to where the log end was at its previous fetch): ISR membership is judged on it.
	lastCaughtUp time.Time
	// lastFetch and leaderEndAtLastFetch implement Kafka's rule that a follower that
	// reaches the leader's log end as it was at its previous fetch was caught up then.
	lastFetch            time.Time
	leaderEndAtLastFetch int64
	// partitionEpoch is the partition epoch the follower's last fetch said it had
	// applied (-1: the fetch did not say). See FollowerFetched.
	partitionEpoch int32
}

// seenState reports whether the follower's last fetch was sent by a replica that had
// applied this leader's partition state (or one after it). An ISR expansion rests on
// it: a fetch sent before the follower was removed from the replica set and added back
// (the replica deleted and made anew in between) carries the old replica's log end,
// and may arrive late, after the leader re-added the follower. The old replica only
// ever knew states from before its removal, which are older than any state that lists
// the follower again. A fetch that does not say (-1) is taken as current, as from a
// broker of an earlier version.
func (f *followerState) seenState(partitionEpoch int32) bool {
	return f.partitionEpoch < 0 || f.partitionEpoch >= partitionEpoch
}

// resetFollowersLocked starts tracking the replicas afresh. ISR members count as caught
// up now, so that a new leader gives them replica.lag.time.max.ms before shrinking.
func (p *Partition) resetFollowersLocked(now time.Time, newEpoch bool) {
	old := p.followers
	p.followers = map[int32]*followerState{}
	for _, id := range p.state.Replicas {
		if id == p.nodeID {
			continue
		}
		if f, ok := old[id]; ok && !newEpoch {
			p.followers[id] = f
			continue
		}
		f := &followerState{leo: -1, logStart: -1, leaderEndAtLastFetch: -1, partitionEpoch: -1}
		if slices.Contains(p.state.ISR, id) {
			f.lastCaughtUp = now
		}
		p.followers[id] = f
	}
}

// maximalISRLocked is the ISR the high watermark must respect: the committed one plus any
// member an in-flight AlterPartition adds (Kafka's "maximal ISR"), so that a record is
// never committed without a replica that may be in the ISR once the change commits.
func (p *Partition) maximalISRLocked() []int32 {
	if p.pendingISR == nil {
		return p.state.ISR
	}
	out := slices.Clone(p.state.ISR)
	for _, id := range p.pendingISR {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// maybeAdvanceHWLocked moves the high watermark to the least log end offset over the
// maximal ISR. It never moves backwards.
//
// Under durable acks (acks.all.fsync, flush.messages=1) the leader's own term is its
// flushed offset, not its log end, and it asks its group commit for the rest; a
// follower's term is its fetch offset as ever, which such a follower sends only once it
// has fsynced everything below it (replication's fetcher). So the high watermark is the
// least flushed offset over the ISR: an acknowledged record, and any record a consumer
// reads, is on the disk of every ISR member.
func (p *Partition) maybeAdvanceHWLocked() bool {
	if p.Role() != RoleLeader {
		return false
	}
	hw := p.log.EndOffset()
	if p.durable.Load() {
		if flushed := p.log.FlushedOffset(); flushed < hw {
			hw = flushed
			p.log.RequestSync()
		}
	}
	for _, id := range p.maximalISRLocked() {
		if id == p.nodeID {
			continue
		}
		f := p.followers[id]
		if f == nil || f.leo < 0 {
			return false
		}
		hw = min(hw, f.leo)
	}
	old := p.hw.Load()
	if hw <= old {
		return false
	}
	p.hw.Store(hw)
	p.noteHWLocked(old, hw)
	return true
}

// ErrNotReplica refuses a replica fetch from a broker outside the replica set.
var ErrNotReplica = fmt.Errorf("%w: the fetching broker is not a replica of the partition", kerr.NotLeaderForPartition)

// FollowerFetched records that follower id fetched from fetchOffset (so it holds
// everything below it) with its log starting at logStart (-1 when the fetch does not
// say), having applied the partition state of partitionEpoch (-1 when the fetch does
// not say), and advances the high watermark. It reports whether the high watermark
// moved, and whether the follower, outside the ISR, has caught up and should be added
// to it; a follower is added only on a fetch sent once it had applied this leader's
// partition state (see followerState.seenState).
func (p *Partition) FollowerFetched(id int32, fetchOffset, logStart int64, partitionEpoch int32, now time.Time) (hwMoved, expand bool, err error) {
	p.mu.Lock()
	if p.Role() != RoleLeader {
		p.mu.Unlock()
		return false, false, ErrNotLeader
	}
	f := p.followers[id]
	if f == nil {
		p.mu.Unlock()
		return false, false, ErrNotReplica
	}
	leo := p.log.EndOffset()
	fetchOffset = min(fetchOffset, leo)
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case fetchOffset >= f.leaderEndAtLastFetch && f.leaderEndAtLastFetch >= 0:
		if f.lastFetch.After(f.lastCaughtUp) {
			f.lastCaughtUp = f.lastFetch
		}
	}
	f.leo = fetchOffset
	f.lastFetch, f.leaderEndAtLastFetch = now, leo
	f.partitionEpoch = partitionEpoch
	// Taken as reported, even when lower than before: a lower start only makes a
	// DeleteRecords wait longer.
	startMoved := logStart >= 0 && logStart != f.logStart
	if logStart >= 0 {
		f.logStart = logStart
	}
	hwMoved = p.maybeAdvanceHWLocked()
	inISR := slices.Contains(p.maximalISRLocked(), id)
	expand = !inISR && p.pendingISR == nil && !now.Before(p.isrRetryAt) && f.leo >= p.hw.Load() && f.leo >= p.epochStart &&
		f.seenState(p.state.PartitionEpoch)
	p.mu.Unlock()
	if hwMoved || startMoved {
		// (A moved log start wakes a DeleteRecords waiting for its low watermark.)
		p.wake()
	}
	return hwMoved, expand, nil
}

// LowWatermark is the least log start offset over this leader, its followers that alive
// says are live (Kafka's low watermark) and every member of the maximal ISR, live or not:
// below it, no replica that could lead still holds a record. An ISR member counts even
// when this broker's metadata says it is fenced: that metadata may lag the partition
// state (a member unfenced and added back since), and any ISR member may be elected.
// A follower that has not reported its log start counts as -1. It fails when this
// replica is not the leader.
func (p *Partition) LowWatermark(alive func(id int32) bool) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Role() != RoleLeader {
		return 0, ErrNotLeader
	}
	low := p.log.StartOffset()
	isr := p.maximalISRLocked()
	for _, id := range isr {
		if _, ok := p.followers[id]; !ok && id != p.nodeID {
			low = -1
		}
	}
	for id, f := range p.followers {
		if alive(id) || slices.Contains(isr, id) {
			low = min(low, f.logStart)
		}
	}
	return low, nil
}

// ISRChange is an AlterPartition the leader should propose.
type ISRChange struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// ProposeExpand returns the ISR change that adds follower id, and marks it in flight; ok
// is false when the follower is no longer eligible or a change is already in flight.
func (p *Partition) ProposeExpand(id int32, now time.Time) (ISRChange, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followers[id]
	if p.Role() != RoleLeader || p.pendingISR != nil || now.Before(p.isrRetryAt) || f == nil || slices.Contains(p.state.ISR, id) ||
		f.leo < p.hw.Load() || f.leo < p.epochStart || !f.seenState(p.state.PartitionEpoch) {
		return ISRChange{}, false
	}
	isr := append(slices.Clone(p.state.ISR), id)
	p.pendingISR = isr
	return ISRChange{LeaderEpoch: p.state.LeaderEpoch, PartitionEpoch: p.state.PartitionEpoch, NewISR: slices.Clone(isr)}, true
}

// ProposeShrink returns the ISR change that drops the followers that have not caught up
// within maxLag, and marks it in flight; ok is false when none lag or a change is in
// flight.
func (p *Partition) ProposeShrink(now time.Time, maxLag time.Duration) (ISRChange, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Role() != RoleLeader || p.pendingISR != nil || now.Before(p.isrRetryAt) {
		return ISRChange{}, false
	}
	var isr []int32
	for _, id := range p.state.ISR {
		if f := p.followers[id]; id != p.nodeID && (f == nil || now.Sub(f.lastCaughtUp) > maxLag) {
			continue
		}
		isr = append(isr, id)
	}
	if len(isr) == len(p.state.ISR) || !slices.Contains(isr, p.nodeID) {
		return ISRChange{}, false
	}
	// The shrunk ISR applies to the high watermark only once committed (pendingISR is a
	// subset of the committed ISR, so the maximal ISR stays the committed one).
	p.pendingISR = isr
	return ISRChange{LeaderEpoch: p.state.LeaderEpoch, PartitionEpoch: p.state.PartitionEpoch, NewISR: slices.Clone(isr)}, true
}

// isrRetryBackoff is how long a leader waits after a refused ISR change before proposing
// another.
const isrRetryBackoff = time.Second

// ISRChangeRefused records that the controller refused c (INELIGIBLE_REPLICA,
// OPERATION_NOT_ATTEMPTED) and holds back the next proposal by isrRetryBackoff. The
// refusal proves only that this send was not applied: an earlier send of c, delayed on
// its way, may still be. So c stays pending, the high watermark respecting the ISR it
// adds, and the leader gets back the fence to send: the committed ISR at c's epochs,
// which the controller applies as a new partition epoch, refusing every send of c after
// it. The newer state it brings through ApplyState ends c. ok is false when c is no
// longer pending.
func (p *Partition) ISRChangeRefused(c ISRChange, now time.Time) (fence ISRChange, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pendingIsLocked(c) {
		return ISRChange{}, false
	}
	p.isrRetryAt = now.Add(isrRetryBackoff)
	return ISRChange{LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, NewISR: slices.Clone(p.state.ISR)}, true
}

// ISRChangePending reports whether c is still the ISR change in flight: this replica
// leads in c's leader epoch, at c's partition epoch, and has not dropped it. Until then
// no other change is proposed, so that c may be sent again as it is; once newer state
// arrives (or the replica steps down or closes) its outcome is known and it must not be.
func (p *Partition) ISRChangePending(c ISRChange) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pendingIsLocked(c)
}

func (p *Partition) pendingIsLocked(c ISRChange) bool {
	return p.Role() == RoleLeader && p.pendingISR != nil && p.state.LeaderEpoch == c.LeaderEpoch &&
		p.state.PartitionEpoch == c.PartitionEpoch && slices.Equal(p.pendingISR, c.NewISR)
}

// ReplicaLag describes one follower for metrics and describe output.
type ReplicaLag struct {
	ID           int32
	LogEndOffset int64 // -1 until it fetched in this epoch
	LastCaughtUp time.Time
}

// Followers returns the leader's view of its followers (nil unless leader).
func (p *Partition) Followers() []ReplicaLag {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ReplicaLag
	for _, id := range p.state.Replicas {
		if f := p.followers[id]; f != nil {
			out = append(out, ReplicaLag{ID: id, LogEndOffset: f.leo, LastCaughtUp: f.lastCaughtUp})
		}
	}
	return out
}
