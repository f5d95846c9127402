package metadata

import (
	"context"
	"slices"
	"sort"
)

// Tiered storage (KIP-405). Kafka keeps remote log segment metadata in the
// __remote_log_metadata topic behind a RemoteLogMetadataManager; Shale commits it through
// the controller, so that which segments make up a partition's remote log is decided once,
// by the quorum, and every broker sees it in the image.
//
// The partition's leader uploads a closed segment under a fresh upload id, then commits
// it (CommitRemoteSegment). Deleting is two-phase, as Kafka's DELETE_SEGMENT_STARTED and
// DELETE_SEGMENT_FINISHED: StartRemoteDelete takes the earliest committed segments out of
// service (they are no longer read, counted or offered), the leader deletes their
// objects, then FinishRemoteDelete drops their record. Objects under an upload id that is
// not in the image (a failed or abandoned upload) are orphans the leader deletes later.
//
// Deleting a tiered topic deletes its objects too, as Kafka does. The controller keeps,
// in the record that deletes the topic, a RemotePurge for each of its partitions, by
// topic id; one broker (Image.RemotePurger) deletes every object under the partition's
// prefix and reports it done (RemotePurged), which drops the entry. The entry is in the
// image, the controller's log and its snapshots, so a broker that restarts before it is
// done, or every broker restarting, leaves no object behind.

// RemoteSegmentState is where a remote segment is in its life.
type RemoteSegmentState int8

const (
	// RemoteSegmentCommitted: the objects are in the store, the segment is served.
	RemoteSegmentCommitted RemoteSegmentState = iota
	// RemoteSegmentDeleteStarted: no longer served; its objects are being deleted.
	RemoteSegmentDeleteStarted
)

// RemoteEpochStart is one leader epoch entry of a segment: the epoch's first offset in the
// segment (or, for the first entry, the segment's base offset).
type RemoteEpochStart struct {
	Epoch       int32
	StartOffset int64
}

// RemoteSegment is one segment of a partition's remote log, as Kafka's
// RemoteLogSegmentMetadata.
type RemoteSegment struct {
	TopicID   [16]byte
	Partition int32
	// UploadID is unique per upload attempt and names the segment's objects in the store:
	// a resent commit of the same upload is recognised by it.
	UploadID   string
	BaseOffset int64
	// EndOffset is the segment's last offset, inclusive.
	EndOffset int64
	// MaxTimestampMs is the largest batch max timestamp in the segment.
	MaxTimestampMs int64
	// SizeBytes is the size of the segment's log data.
	SizeBytes int64
	// Broker and LeaderEpoch name the leader that uploaded it.
	Broker      int32
	LeaderEpoch int32
	// Epochs are the leader epochs of the segment's batches and where each starts, in
	// order; the first starts at BaseOffset.
	Epochs []RemoteEpochStart
	State  RemoteSegmentState
}

// Contains reports whether offset lies in the segment.
func (s *RemoteSegment) Contains(offset int64) bool {
	return offset >= s.BaseOffset && offset <= s.EndOffset
}

// RemoteLog is one partition's remote log in an image. Immutable.
type RemoteLog struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	// Segments are the committed segments, by base offset, never overlapping.
	Segments []RemoteSegment
	// Deleting are the segments whose deletion has started, by base offset.
	Deleting []RemoteSegment
	// LogStart is the least offset DeleteRecords or retention has left to the remote log
	// (0 when never moved): offsets below it are not served even if a segment holds them.
	LogStart int64
	// StartOffset is the first offset the remote log serves, -1 when it has no segment.
	StartOffset int64
	// HighestOffset is the last offset of the last committed segment, -1 when none: the
	// next upload starts above it.
	HighestOffset int64
	// SizeBytes is the committed segments' size, those wholly below LogStart included
	// (retention's bookkeeping subtracts them as it deletes them); the remote log's size
	// as reported is Size's.
	SizeBytes int64
}

// NewRemoteLog builds a partition's remote log and its summary fields. segments are
// sorted into their places; the caller must not modify them afterwards.
func NewRemoteLog(topic string, topicID [16]byte, partition int32, logStart int64, segments []RemoteSegment) *RemoteLog {
	r := &RemoteLog{Topic: topic, TopicID: topicID, Partition: partition, LogStart: logStart, StartOffset: -1, HighestOffset: -1}
	for _, s := range segments {
		if s.State == RemoteSegmentCommitted {
			r.Segments = append(r.Segments, s)
		} else {
			r.Deleting = append(r.Deleting, s)
		}
	}
	byBase := func(a, b RemoteSegment) int { return int(sign(a.BaseOffset - b.BaseOffset)) }
	slices.SortFunc(r.Segments, byBase)
	slices.SortFunc(r.Deleting, byBase)
	if n := len(r.Segments); n > 0 {
		r.StartOffset = max(r.Segments[0].BaseOffset, logStart)
		r.HighestOffset = r.Segments[n-1].EndOffset
		for _, s := range r.Segments {
			r.SizeBytes += s.SizeBytes
		}
	}
	return r
}

func sign(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// CoveredEnd is the offset below which the remote log holds or has deleted every
// offset: one past HighestOffset, or the log start when retention or DeleteRecords moved
// it further (0 for an empty remote log). A local segment wholly below it may be deleted,
// and uploads go on from it.
func (r *RemoteLog) CoveredEnd() int64 {
	if r == nil {
		return 0
	}
	return max(r.HighestOffset+1, r.LogStart)
}

// Size is the remote log's size as Kafka reports it (KIP-963's RemoteLogSizeBytes): the
// bytes and number of the segments still part of the log, that is the committed ones
// that hold an offset at or above LogStart. Segments whose deletion has started are out
// of the log, and so are committed ones wholly below LogStart: DeleteRecords moved the
// start past a segment committed after it chose which to delete, and the next retention
// pass starts their deletion. No segment is ever superseded by another: the controller
// refuses a commit that overlaps a committed or deleting segment. A partly deleted
// segment (LogStart inside it) counts whole, since its objects are all still stored.
func (r *RemoteLog) Size() (bytes int64, segments int) {
	if r == nil {
		return 0, 0
	}
	for _, s := range r.Segments {
		if s.EndOffset >= r.LogStart {
			bytes += s.SizeBytes
			segments++
		}
	}
	return bytes, segments
}

// Find returns the committed segment holding offset, or the first one after it (a read
// at a gap goes on at the next segment); ok is false when no segment is at or past it or
// the offset is below StartOffset.
func (r *RemoteLog) Find(offset int64) (RemoteSegment, bool) {
	if r == nil || len(r.Segments) == 0 || offset < r.StartOffset {
		return RemoteSegment{}, false
	}
	i := sort.Search(len(r.Segments), func(i int) bool { return r.Segments[i].EndOffset >= offset })
	if i == len(r.Segments) {
		return RemoteSegment{}, false
	}
	return r.Segments[i], true
}

// Upload returns the segment (committed or being deleted) uploaded under id.
func (r *RemoteLog) Upload(id string) (RemoteSegment, bool) {
	if r == nil {
		return RemoteSegment{}, false
	}
	for _, ss := range [][]RemoteSegment{r.Segments, r.Deleting} {
		for _, s := range ss {
			if s.UploadID == id {
				return s, true
			}
		}
	}
	return RemoteSegment{}, false
}

// EpochEnd is Kafka's end offset for a leader epoch over the remote log (for
// OffsetForLeaderEpoch where the local log no longer holds the epoch): the start of the
// first epoch above epoch, or HighestOffset+1 when epoch is the remote log's last. It
// returns the largest epoch at most epoch that the remote log holds, and ok false when
// the remote log holds none at or below it.
func (r *RemoteLog) EpochEnd(epoch int32) (foundEpoch int32, endOffset int64, ok bool) {
	if r == nil {
		return -1, -1, false
	}
	foundEpoch = -1
	for _, s := range r.Segments {
		for _, e := range s.Epochs {
			switch {
			case e.Epoch <= epoch:
				foundEpoch, ok = e.Epoch, true
			case ok:
				return foundEpoch, e.StartOffset, true
			default:
				return -1, -1, false
			}
		}
	}
	if !ok {
		return -1, -1, false
	}
	return foundEpoch, r.HighestOffset + 1, true
}

// RemoteLogKey names a partition's remote log in the image.
type RemoteLogKey struct {
	Topic     string
	Partition int32
}

// RemoteLogs are every partition's remote log, by topic name and partition. Immutable
// once in an image; a topic recreated under the same name starts with none.
type RemoteLogs map[RemoteLogKey]*RemoteLog

// RemoteLog returns a partition's remote log, nil when it has none.
func (im *Image) RemoteLog(topic string, partition int32) *RemoteLog {
	if im == nil {
		return nil
	}
	return im.RemoteLogs[RemoteLogKey{topic, partition}]
}

// RemotePurgeKey names a partition of a deleted topic by its topic id, which no other
// topic ever takes (a topic recreated under the same name has a new one).
type RemotePurgeKey struct {
	TopicID   [16]byte
	Partition int32
}

// RemotePurge is a partition of a deleted tiered topic whose objects in the remote store
// are still to be deleted: every object under remotelog.PartitionPrefix(TopicID,
// Partition), committed segments and orphans of failed uploads alike.
type RemotePurge struct {
	// Topic is the deleted topic's name, for logs.
	Topic     string
	TopicID   [16]byte
	Partition int32
	// Leader was the partition's leader when the topic was deleted, -1 when none.
	Leader int32
}

// RemotePurges are the pending purges, by topic id and partition. Immutable once in an
// image; nil when there are none.
type RemotePurges map[RemotePurgeKey]RemotePurge

// RemotePurger returns the broker that is to delete a purge's objects: the partition's
// leader when its topic was deleted, while that broker is registered and unfenced (it
// uploaded the segments, and its own uploader runs one pass at a time, so its purge
// comes after any upload of the partition it had under way), else the registered,
// unfenced broker of the lowest id; -1 when there is none. One broker per image, not
// every broker, so that a failing store is not listed by the whole cluster every pass;
// any other choice would be as safe, since deleting a deleted topic's objects and
// reporting it done are idempotent: two brokers whose images disagree for a moment both
// purging is harmless.
func (im *Image) RemotePurger(p RemotePurge) int32 {
	if im == nil {
		return -1
	}
	if b, ok := im.Brokers[p.Leader]; ok && !b.Fenced {
		return p.Leader
	}
	out := int32(-1)
	for id, b := range im.Brokers {
		if !b.Fenced && (out < 0 || id < out) {
			out = id
		}
	}
	return out
}

// RemoteLogStore is what a partition leader needs from the quorum for tiered storage.
// Every call but RemotePurged is fenced: the caller must be the partition's leader at
// leaderEpoch (FENCED_LEADER_EPOCH otherwise, NOT_LEADER_OR_FOLLOWER when another broker
// leads at that epoch), and the topic must still be the one topicID names
// (UNKNOWN_TOPIC_ID).
type RemoteLogStore interface {
	// CommitRemoteSegment records an uploaded segment as part of the remote log. A resend
	// of an already committed upload (same upload id and range) succeeds again; a segment
	// that overlaps another committed or deleting one, or lies wholly below the remote
	// log start, is refused (INVALID_REQUEST, resp. OFFSET_OUT_OF_RANGE) so that no offset
	// is ever counted twice: its objects are then orphans to delete.
	CommitRemoteSegment(ctx context.Context, topic string, leaderEpoch int32, seg RemoteSegment) error
	// StartRemoteDelete takes the earliest committed segments, up to and including the
	// one uploaded under the last of uploadIDs, out of service (uploadIDs must name a
	// prefix of the committed segments, in order), and moves the remote log start to at
	// least logStart (DeleteRecords may move it into a segment; the caller deletes the
	// segments wholly below it). uploadIDs may be empty to move the start alone. Ids
	// already deleting are accepted again.
	StartRemoteDelete(ctx context.Context, topic string, topicID [16]byte, partition, leaderEpoch int32, uploadIDs []string, logStart int64) error
	// FinishRemoteDelete drops the records of segments whose deletion started, once their
	// objects are gone. Ids no longer known are accepted (a resend).
	FinishRemoteDelete(ctx context.Context, topic string, topicID [16]byte, partition, leaderEpoch int32, uploadIDs []string) error
	// RemotePurged drops the purge entry of a deleted topic's partition once every object
	// under its prefix is gone. Any broker may send it; an entry already dropped (a
	// resend, another broker's purge) is accepted.
	RemotePurged(ctx context.Context, topicID [16]byte, partition int32) error
}
