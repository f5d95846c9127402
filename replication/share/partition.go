package share

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

// State is a record's delivery state; the values are Kafka's RecordState ids, which the
// persisted state batches use too.
type State int8

const (
	Available    State = 0
	Acquired     State = 1
	Acknowledged State = 2
	Archived     State = 4
)

func (s State) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archived:
		return "ARCHIVED"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge.
type AckType int8

const (
	AckGap     AckType = 0 // an offset with no record (compacted, control): archived
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4 // KIP-1222: extend the acquisition lock
)

// Limits are the broker configs a share partition follows.
type Limits struct {
	// LockDuration is group.share.record.lock.duration.ms.
	LockDuration time.Duration
	// DeliveryLimit is group.share.delivery.count.limit: a record delivered this many
	// times is archived instead of made available again.
	DeliveryLimit int
	// MaxRecordLocks is group.share.partition.max.record.locks: the in-flight window
	// (from the SPSO) grows no further once it holds this many records.
	MaxRecordLocks int
}

// Kafka's defaults.
const (
	DefaultLockDuration   = 30 * time.Second
	DefaultDeliveryLimit  = 5
	DefaultMaxRecordLocks = 2000
)

func (l *Limits) defaults() {
	if l.LockDuration <= 0 {
		l.LockDuration = DefaultLockDuration
	}
	if l.DeliveryLimit <= 0 {
		l.DeliveryLimit = DefaultDeliveryLimit
	}
	if l.MaxRecordLocks <= 0 {
		l.MaxRecordLocks = DefaultMaxRecordLocks
	}
}

// record is one in-flight record.
type record struct {
	state    State
	count    int16 // deliveries so far
	member   string
	deadline time.Time // lock expiry while acquired
	// dead marks an archived record still to be written to the dead-letter topic: it is
	// persisted as available until then, so that a failover redelivers rather than loses
	// it.
	dead bool
}

// Batch is the offset range of one record batch in the log.
type Batch struct {
	First, Last int64
}

// AcquiredRange is a run of acquired offsets with one delivery count.
type AcquiredRange struct {
	First, Last int64
	Count       int16
}

// AckBatch is one acknowledgement batch: one type for the whole range, or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// DeadLetter is a record archived by REJECT or by reaching the delivery limit, to be
// written to the dead-letter topic.
type DeadLetter struct {
	Offset int64
	Count  int16
}

// Partition is a share group's state of one topic partition (Kafka's SharePartition):
// the share-partition start offset (SPSO) and the in-flight records from it to the end
// offset (SPEO, exclusive). Offsets below the SPSO are complete; offsets at or past the
// SPEO have never been delivered. It is not safe for concurrent use.
type Partition struct {
	limits     Limits
	spso       int64
	recs       []record // recs[i] is offset spso+i
	stateEpoch int32
}

// NewPartition starts a share partition with nothing in flight at spso.
func NewPartition(limits Limits, spso int64) *Partition {
	limits.defaults()
	return &Partition{limits: limits, spso: spso}
}

// LoadPartition rebuilds a share partition from its persisted state: what was in flight
// comes back available with its delivery count, since locks die with the leader.
func LoadPartition(limits Limits, st *metadata.SharePartitionState) *Partition {
	p := NewPartition(limits, st.StartOffset)
	p.stateEpoch = st.StateEpoch
	for _, b := range st.Batches {
		if b.LastOffset < p.spso {
			continue
		}
		for off := max(b.FirstOffset, p.spso); off <= b.LastOffset; off++ {
			for p.end() < off {
				// A hole in the persisted batches has never been delivered.
				p.recs = append(p.recs, record{state: Available})
			}
			st := State(b.DeliveryState)
			if st != Acknowledged && st != Archived {
				st = Available
			}
			p.recs = append(p.recs, record{state: st, count: int16(min(b.DeliveryCount, 1<<15-1))})
		}
	}
	p.advance()
	return p
}

// StartOffset is the SPSO.
func (p *Partition) StartOffset() int64 { return p.spso }

// EndOffset is the SPEO: one past the last in-flight offset.
func (p *Partition) EndOffset() int64 { return p.end() }

func (p *Partition) end() int64 { return p.spso + int64(len(p.recs)) }

// StateEpoch is the state epoch the partition was loaded at.
func (p *Partition) StateEpoch() int32 { return p.stateEpoch }

func (p *Partition) at(off int64) *record {
	if off < p.spso || off >= p.end() {
		return nil
	}
	return &p.recs[off-p.spso]
}

// Counts are the numbers of in-flight records by state.
type Counts struct {
	Available, Acquired, Acknowledged, Archived int
}

// Counts counts the in-flight records by state.
func (p *Partition) Counts() Counts {
	var c Counts
	for i := range p.recs {
		switch p.recs[i].state {
		case Available:
			c.Available++
		case Acquired:
			c.Acquired++
		case Acknowledged:
			c.Acknowledged++
		case Archived:
			c.Archived++
		}
	}
	return c
}

// State returns an offset's state and delivery count; offsets below the SPSO are
// complete (reported as acknowledged) and those past the SPEO available and undelivered.
func (p *Partition) State(off int64) (State, int16, string) {
	if r := p.at(off); r != nil {
		return r.state, r.count, r.member
	}
	if off < p.spso {
		return Acknowledged, 0, ""
	}
	return Available, 0, ""
}

// FetchFrom is the offset a fetch should read the log from: the first available
// in-flight record, else the SPEO while the window may grow, or -1 when nothing can be
// acquired below hw.
func (p *Partition) FetchFrom(hw int64) int64 {
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.spso + int64(i)
		}
	}
	if p.end() < hw && len(p.recs) < p.limits.MaxRecordLocks {
		return p.end()
	}
	return -1
}

// Acquire locks up to maxRecords available records for member among the log batches
// read (in offset order), below hw, the high watermark: Kafka's SharePartition.acquire.
// Offsets between batches (compacted away) are archived as they are passed. Records
// that have reached the delivery limit are archived (and returned as dead letters)
// instead of being delivered again.
func (p *Partition) Acquire(member string, batches []Batch, hw int64, maxRecords int, now time.Time) ([]AcquiredRange, []DeadLetter) {
	var out []AcquiredRange
	var dead []DeadLetter
	deadline := now.Add(p.limits.LockDuration)
	n := 0
	for _, b := range batches {
		if n >= maxRecords {
			break
		}
		for off := max(b.First, p.spso); off <= b.Last && off < hw && n < maxRecords; off++ {
			if off >= p.end() {
				if len(p.recs) >= p.limits.MaxRecordLocks {
					break
				}
				for p.end() < off {
					// A gap between batches: nothing to deliver there.
					p.recs = append(p.recs, record{state: Archived})
				}
				p.recs = append(p.recs, record{state: Available})
			}
			r := p.at(off)
			if r.state != Available {
				continue
			}
			if int(r.count) >= p.limits.DeliveryLimit {
				r.state, r.member, r.dead = Archived, "", true
				dead = append(dead, DeadLetter{Offset: off, Count: r.count})
				continue
			}
			r.state, r.member, r.deadline = Acquired, member, deadline
			r.count++
			n++
			if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].Count == r.count {
				out[k].Last = off
			} else {
				out = append(out, AcquiredRange{First: off, Last: off, Count: r.count})
			}
		}
	}
	p.advance()
	return out, dead
}

// Acknowledge applies a member's acknowledgement batches for this partition, all or
// none: every offset must be in flight and acquired by member (INVALID_RECORD_STATE
// otherwise; INVALID_REQUEST for a malformed batch or one past the SPEO). Offsets below
// the SPSO are already complete and skipped. It returns the records to dead-letter.
func (p *Partition) Acknowledge(member string, batches []AckBatch, allowRenew bool, now time.Time) ([]DeadLetter, error) {
	maxType := AckReject
	if allowRenew {
		maxType = AckRenew
	}
	prev := int64(-1)
	for _, b := range batches {
		switch {
		case b.First > b.Last || b.First <= prev:
			return nil, fmt.Errorf("%w: acknowledgement batch %d-%d out of order", kerr.InvalidRequest, b.First, b.Last)
		case len(b.Types) == 0 || len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1:
			return nil, fmt.Errorf("%w: acknowledgement batch %d-%d has %d types", kerr.InvalidRequest, b.First, b.Last, len(b.Types))
		case b.Last >= p.end():
			return nil, fmt.Errorf("%w: acknowledgement batch %d-%d is past the in-flight records (end %d)", kerr.InvalidRequest, b.First, b.Last, p.end())
		}
		for _, t := range b.Types {
			if t < AckGap || t > maxType {
				return nil, fmt.Errorf("%w: acknowledge type %d", kerr.InvalidRequest, t)
			}
		}
		for off := max(b.First, p.spso); off <= b.Last; off++ {
			r := p.at(off)
			if r.state != Acquired || r.member != member {
				return nil, fmt.Errorf("%w: offset %d is %s, not acquired by this member", kerr.InvalidRecordState, off, r.state)
			}
		}
		prev = b.Last
	}
	var dead []DeadLetter
	for _, b := range batches {
		for off := max(b.First, p.spso); off <= b.Last; off++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			r := p.at(off)
			switch t {
			case AckGap:
				r.state, r.member = Archived, ""
			case AckAccept:
				r.state, r.member = Acknowledged, ""
			case AckRelease:
				if d, ok := p.release(off, r); ok {
					dead = append(dead, d)
				}
			case AckReject:
				r.state, r.member, r.dead = Archived, "", true
				dead = append(dead, DeadLetter{Offset: off, Count: r.count})
			case AckRenew:
				r.deadline = now.Add(p.limits.LockDuration)
			}
		}
	}
	p.advance()
	return dead, nil
}

// release makes an acquired record available again, or archives it (a dead letter)
// once it has been delivered DeliveryLimit times. The delivery count is kept.
func (p *Partition) release(off int64, r *record) (DeadLetter, bool) {
	r.member = ""
	if int(r.count) >= p.limits.DeliveryLimit {
		r.state, r.dead = Archived, true
		return DeadLetter{Offset: off, Count: r.count}, true
	}
	r.state = Available
	return DeadLetter{}, false
}

// ExpireLocks releases the records whose lock expired by now, as a RELEASE would. It
// returns how many it released and the records it archived at the delivery limit.
func (p *Partition) ExpireLocks(now time.Time) (int, []DeadLetter) {
	n := 0
	var dead []DeadLetter
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && !r.deadline.After(now) {
			n++
			if d, ok := p.release(p.spso+int64(i), r); ok {
				dead = append(dead, d)
			}
		}
	}
	if n > 0 {
		p.advance()
	}
	return n, dead
}

// NextDeadline is the earliest lock expiry, zero with nothing acquired.
func (p *Partition) NextDeadline() time.Time {
	var next time.Time
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && (next.IsZero() || r.deadline.Before(next)) {
			next = r.deadline
		}
	}
	return next
}

// ReleaseMember releases every record member holds (its share session closed).
func (p *Partition) ReleaseMember(member string) (int, []DeadLetter) {
	n := 0
	var dead []DeadLetter
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && r.member == member {
			n++
			if d, ok := p.release(p.spso+int64(i), r); ok {
				dead = append(dead, d)
			}
		}
	}
	if n > 0 {
		p.advance()
	}
	return n, dead
}

// DeadLettered records that dead letters were written: their archival may now be
// persisted.
func (p *Partition) DeadLettered(offsets []int64) {
	for _, off := range offsets {
		if r := p.at(off); r != nil {
			r.dead = false
		}
	}
	p.advance()
}

// PendingDeadLetters lists the archived records not yet written to the dead-letter
// topic (after a failed write, or a reload that found them at the delivery limit).
func (p *Partition) PendingDeadLetters() []DeadLetter {
	var out []DeadLetter
	for i := range p.recs {
		if p.recs[i].dead {
			out = append(out, DeadLetter{Offset: p.spso + int64(i), Count: p.recs[i].count})
		}
	}
	return out
}

// DropDeadLetters gives up on dead-lettering (no dead-letter topic): the records stay
// archived.
func (p *Partition) DropDeadLetters() {
	for i := range p.recs {
		p.recs[i].dead = false
	}
	p.advance()
}

// advance moves the SPSO over completed records: acknowledged, and archived ones whose
// dead letter, if any, is written.
func (p *Partition) advance() {
	i := 0
	for i < len(p.recs) {
		r := &p.recs[i]
		if r.state != Acknowledged && (r.state != Archived || r.dead) {
			break
		}
		i++
	}
	if i == 0 {
		return
	}
	p.spso += int64(i)
	p.recs = append(p.recs[:0], p.recs[i:]...)
}

// Persisted is the state to commit: acquired records, and archived ones whose dead
// letter is not written yet, are stored as available so that a new leader redelivers
// them with their delivery counts.
func (p *Partition) Persisted(group, topic string, partition, leaderEpoch int32) *metadata.SharePartitionState {
	st := &metadata.SharePartitionState{Group: group, Topic: topic, Partition: partition, StartOffset: p.spso,
		StateEpoch: p.stateEpoch, LeaderEpoch: leaderEpoch}
	for i := range p.recs {
		r := &p.recs[i]
		s := r.state
		if s == Acquired || r.dead {
			s = Available
		}
		off := p.spso + int64(i)
		if n := len(st.Batches); n > 0 && st.Batches[n-1].DeliveryState == int32(s) && st.Batches[n-1].DeliveryCount == int32(r.count) {
			st.Batches[n-1].LastOffset = off
			continue
		}
		st.Batches = append(st.Batches, metadata.ShareStateBatch{FirstOffset: off, LastOffset: off, DeliveryState: int32(s), DeliveryCount: int32(r.count)})
	}
	return st
}

// SkipTo archives everything below off, which the log no longer holds (retention or
// DeleteRecords moved its start past the SPSO); nothing is dead-lettered.
func (p *Partition) SkipTo(off int64) {
	if off <= p.spso {
		return
	}
	if off >= p.end() {
		p.spso, p.recs = off, p.recs[:0]
		return
	}
	for i := range p.recs[:off-p.spso] {
		p.recs[i] = record{state: Archived, count: p.recs[i].count}
	}
	p.advance()
}
