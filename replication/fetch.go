package replication

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/partition"
)

// Reader says who fetches: a consumer (ReplicaID < 0), or a follower broker, which must
// be registered at BrokerEpoch and in the partition's replica set.
type Reader struct {
	ReplicaID   int32
	BrokerEpoch int64
	// Client is a consumer's metadata when its fetch carries it (Fetch v11+): such a
	// consumer may be served by a follower, and pointed at one by the leader.
	Client *ClientMetadata
}

// IsFollower reports whether the reader is a replica.
func (r Reader) IsFollower() bool { return r.ReplicaID >= 0 }

// FetchPartition is one partition of a fetch.
type FetchPartition struct {
	Topic string
	// TopicID is the id the fetch names the topic by (Fetch v13+); zero (older versions)
	// is not checked. A replica of another topic id is refused with UNKNOWN_TOPIC_ID.
	TopicID            [16]byte
	Index              int32
	CurrentLeaderEpoch int32
	FetchOffset        int64
	// LastFetchedEpoch is the epoch of the fetcher's last batch (-1 unknown): a log that
	// diverged from this leader's is told where to truncate instead of getting data.
	LastFetchedEpoch int32
	// LogStartOffset is a follower's own log start offset (-1 unknown, and for
	// consumers): the leader's DeleteRecords is answered once its followers' have moved.
	LogStartOffset int64
	// PartitionEpoch is the partition epoch of the state a follower's replica has
	// applied (FetchPartitionEpoch; -1 unknown): the leader adds a follower to the ISR
	// only on a fetch sent with its own partition state applied.
	PartitionEpoch int32
	MaxBytes       int
	// MinOne returns the first batch whole even when it is larger than MaxBytes.
	MinOne bool
	// ReadCommitted (isolation_level 1) reads a consumer's fetch only up to the last
	// stable offset, and lists the aborted transactions it spans.
	ReadCommitted bool
	// RemoteWait, shared by the partitions of one pass over a fetch, bounds the time
	// the pass waits for remote reads to remote.fetch.max.wait.ms in all; nil gives
	// this partition a wait of its own.
	RemoteWait *RemoteWait
}

// FetchRequestPartition is what one partition of a Fetch request asks of the replica
// manager, from the request alone: the Kafka handler and the simulation's wire both
// translate through it. The caller adds what the rest of the request and the reader
// decide: Topic and TopicID (by name or id, with the version), the bytes left in the
// response, MinOne and ReadCommitted.
func FetchRequestPartition(p *kmsg.FetchRequestTopicPartition) FetchPartition {
	return FetchPartition{Index: p.Partition, CurrentLeaderEpoch: p.CurrentLeaderEpoch, FetchOffset: p.FetchOffset,
		LastFetchedEpoch: p.LastFetchedEpoch, LogStartOffset: p.LogStartOffset, PartitionEpoch: FetchPartitionEpoch(p),
		MaxBytes: int(p.PartitionMaxBytes)}
}

// FetchResult is one partition's answer. View, when not nil, must be released.
type FetchResult struct {
	View           *shalelog.View
	HighWatermark  int64
	LogStartOffset int64
	// LastStableOffset is where read_committed consumers stop.
	LastStableOffset int64
	// AbortedTxns are the aborted transactions a read_committed read spans.
	AbortedTxns []partition.AbortedTxn
	// DivergingEpoch is >= 0 when the fetcher must truncate to DivergingEndOffset first.
	DivergingEpoch     int32
	DivergingEndOffset int64
	Err                error
	// Waiter, when not nil, is closed at the next append or high-watermark change.
	Waiter <-chan struct{}
	// Progress, when valid, tells a fetch parked on Waiter whether reading again could
	// return more; when not, every wake-up must read again.
	Progress Progress
	// PreferredReadReplica, when >= 0, is the follower the consumer should read from
	// (KIP-392): the answer then carries no records, and should be sent at once.
	PreferredReadReplica int32
}

// Progress lets a long poll parked on a partition bound, without reading the log, what
// a new read of it could add to the last one, so that the wake-ups every append causes
// read again only when MinBytes could be met (or something else changed).
type Progress struct {
	p     *partition.Partition
	mark  partition.Mark
	bound readBound
	lso   int64 // boundLSO: where the read stopped
}

// Valid reports whether the Progress can bound anything.
func (pr *Progress) Valid() bool { return pr.p != nil }

// Waiter re-arms: it returns the partition's current waiter. Call it before NewBytes,
// so that whatever NewBytes misses closes the channel returned.
func (pr *Progress) Waiter() <-chan struct{} { return pr.p.Waiter() }

// NewBytes bounds from above the bytes a read now could return beyond the read the
// Progress was taken for; reread is true when the fetch must read again whatever the
// bytes (a role, epoch, ISR or log start change, the replica closed, a last stable
// offset moved), as it did at every wake-up before.
func (pr *Progress) NewBytes() (n int64, reread bool) {
	since := pr.p.Since(pr.mark)
	if since.Changed {
		return 0, true
	}
	switch pr.bound {
	case boundLogEnd:
		// The leader decides on ISR expansion in the follower's read (FollowerFetched),
		// against the high watermark: a move of it is worth the read.
		return since.Appended, since.HWMoved
	case boundLSO:
		return 0, pr.p.LastStableOffset() != pr.lso
	}
	return since.Committed, false
}

// ErrStaleReplica refuses a replica fetch from a broker that is not registered at the
// broker epoch it claims (a zombie process, or a client pretending to be a replica).
var ErrStaleReplica = fmt.Errorf("%w: the fetching replica's broker epoch is not current", kerr.NotLeaderForPartition)

// Fetch reads one partition for a consumer (up to the high watermark) or a follower (up
// to the log end; its fetch offset is its log end offset, which moves the high watermark).
// A consumer that sent its client metadata may be served by a follower replica (up to
// that replica's high watermark), or told by the leader to read from one
// (PreferredReadReplica, see read_replica.go).
func (m *Manager) Fetch(who Reader, f FetchPartition) (res FetchResult) {
	res = FetchResult{HighWatermark: -1, LogStartOffset: -1, LastStableOffset: -1, DivergingEpoch: -1, DivergingEndOffset: -1, PreferredReadReplica: -1}
	defer func() { m.traffic.fetched(f.Topic, who.IsFollower(), &res) }()
	p, leader, err := m.replicaForRead(who, f)
	if err != nil {
		res.Err = err
		return res
	}
	if topicIDChanged(p.TopicID(), f.TopicID) {
		// The name resolved to a replica of another topic of that name: this broker or
		// the fetcher has not yet seen the topic recreated. Before the divergence check,
		// so that a follower never truncates against another topic's log.
		res.Err = fmt.Errorf("%w: %s-%d is held here for topic id %x, not %x", kerr.UnknownTopicID, f.Topic, f.Index, p.TopicID(), f.TopicID)
		return res
	}
	if who.IsFollower() {
		if b, ok := m.Image().Brokers[who.ReplicaID]; !ok || b.Epoch != who.BrokerEpoch {
			res.Err = ErrStaleReplica
			return res
		}
	}
	if leader {
		if id := m.preferredReadReplica(p, who.Client, f.FetchOffset); id >= 0 {
			// As Kafka: no read, the offsets of this leader, and the consumer moves.
			res.PreferredReadReplica = id
			res.HighWatermark, res.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
			res.LastStableOffset = p.LastStableOffset()
			return res
		}
	}
	if f.LastFetchedEpoch >= 0 && f.FetchOffset >= p.LogStartOffset() {
		// (Below the log start there is nothing to compare: the read answers
		// OFFSET_OUT_OF_RANGE and the fetcher restarts at the log start.)
		epoch, end := p.EndOffsetForEpoch(f.LastFetchedEpoch)
		if epoch < 0 {
			// Older than every epoch this log still holds: the fetcher shares nothing
			// with it before the log start.
			epoch, end = -1, p.LogStartOffset()
		}
		if epoch != f.LastFetchedEpoch || end < f.FetchOffset {
			res.DivergingEpoch, res.DivergingEndOffset = epoch, end
			res.HighWatermark, res.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
			res.LastStableOffset = p.LastStableOffset()
			return res
		}
	}
	if who.IsFollower() {
		_, expand, err := p.FollowerFetched(who.ReplicaID, f.FetchOffset, f.LogStartOffset, f.PartitionEpoch, m.now())
		if err != nil {
			res.Err = m.ReplicaGone(f.Topic, f.Index, err)
			return res
		}
		if expand {
			m.proposeExpand(p, who.ReplicaID)
		}
	}
	res.Waiter = p.Waiter()
	// After the waiter, before the read: see partition.Mark.
	mark := p.Mark()
	res.HighWatermark, res.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
	if rl := m.remoteLog(p); rl != nil && !who.IsFollower() {
		// Consumers see the whole log, remote and local; a follower copies only the
		// local part, and restarts at the leader's local log start (KIP-1023).
		res.LogStartOffset = logStart(p, rl)
		if f.FetchOffset < p.LogStartOffset() && f.FetchOffset >= rl.StartOffset {
			res.LastStableOffset = p.LastStableOffset()
			view, aborted, err := m.remoteFetch(rl, f.FetchOffset, max(f.MaxBytes, 0), f.MinOne,
				isolationFor(false, f.ReadCommitted) == isolationCommitted, f.RemoteWait)
			if err != nil {
				res.Err = err
				return res
			}
			res.View, res.AbortedTxns = view, aborted
			return res
		}
	}
	throttled := who.IsFollower() && m.leaderThrottled(f.Topic, f.Index, who.ReplicaID)
	if throttled && m.leaderQuota.exceeded(m.now()) {
		// Kafka's leader throttle: nothing for an out-of-sync throttled follower while
		// the broker's budget is spent; it asks again after the fetch wait. (No
		// Progress: the bytes held back are not counted as new, so every wake-up reads.)
		return res
	}
	var view *shalelog.View
	iso := isolationFor(who.IsFollower(), f.ReadCommitted)
	if iso == isolationCommitted {
		view, res.LastStableOffset, res.AbortedTxns, err = p.ReadCommitted(f.FetchOffset, max(f.MaxBytes, 0), f.MinOne)
	} else {
		res.LastStableOffset = p.LastStableOffset()
		view, err = p.Read(f.FetchOffset, max(f.MaxBytes, 0), iso == isolationLogEnd, f.MinOne)
	}
	if err != nil {
		if errors.Is(err, shalelog.ErrOffsetOutOfRange) {
			err = fmt.Errorf("%w: %w", kerr.OffsetOutOfRange, err)
		}
		res.Err = m.ReplicaGone(f.Topic, f.Index, err)
		return res
	}
	res.View = view
	res.Progress = Progress{p: p, mark: mark, bound: iso.progressBound(res.LastStableOffset, mark.HighWatermark())}
	if res.Progress.bound == boundLSO {
		res.Progress.lso = res.LastStableOffset
	}
	if throttled {
		m.leaderQuota.record(view.Size, m.now())
	}
	return res
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for a partition this broker leads.
func (m *Manager) EndOffsetForEpoch(topic string, index, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	p, err := m.Leader(topic, index, currentLeaderEpoch)
	if err != nil {
		return -1, -1, err
	}
	e, off := p.EndOffsetForEpoch(epoch)
	if rl := m.remoteLog(p); rl != nil && e < 0 {
		// Older than every epoch the local log still holds: the remote log's epochs
		// answer, where they begin (and end where the local log's first epoch begins).
		if re, end, ok := rl.EpochEnd(epoch); ok {
			if entries := p.EpochEntries(); len(entries) > 0 && entries[0].Epoch > re {
				end = min(end, entries[0].StartOffset)
			}
			return re, end, nil
		}
	}
	return e, off, nil
}

// LeaderHighWatermark is the high watermark of a replica this broker leads, and false
// for a partition it does not: only the leader knows where the partition's committed
// records end. (Its role, not the fencing check: the number is reported, not served.)
func (m *Manager) LeaderHighWatermark(topic string, index int32) (int64, bool) {
	p := m.parts.Get(topic, index)
	if p == nil || p.Role() != partition.RoleLeader {
		return -1, false
	}
	return p.HighWatermark(), true
}

// Replica returns this broker's replica of a partition whatever its role, or nil.
func (m *Manager) Replica(topic string, index int32) *partition.Partition {
	return m.parts.Get(topic, index)
}
