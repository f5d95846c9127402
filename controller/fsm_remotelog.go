package controller

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"

	pb "github.com/shalelog/shale/controller/proto"
)

// Remote logs (tiered storage, KIP-405) live in the image: Kafka keeps remote segment
// metadata in __remote_log_metadata, Shale commits it through the quorum. A
// RemoteLogRecord changes one partition's remote log, from that partition's current
// leader only (fenced by leader epoch), so that a deposed leader's late commit cannot
// add a segment its successor already uploaded again. The FSM keeps no state of its own
// for it: the image is the state, deltas carry each changed partition's complete remote
// log, and snapshots carry one item per partition.

func compareRemoteLogKey(a, b metadata.RemoteLogKey) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func remoteSegmentFromPB(topicID [16]byte, partition int32, s *pb.RemoteLogSegment) metadata.RemoteSegment {
	out := metadata.RemoteSegment{TopicID: topicID, Partition: partition, UploadID: s.UploadId,
		BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, MaxTimestampMs: s.MaxTimestampMs, SizeBytes: s.SizeBytes,
		Broker: s.Broker, LeaderEpoch: s.LeaderEpoch}
	for _, e := range s.Epochs {
		out.Epochs = append(out.Epochs, metadata.RemoteEpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if s.DeleteStarted {
		out.State = metadata.RemoteSegmentDeleteStarted
	}
	return out
}

func remoteSegmentToPB(s *metadata.RemoteSegment) *pb.RemoteLogSegment {
	out := &pb.RemoteLogSegment{UploadId: s.UploadID, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset,
		MaxTimestampMs: s.MaxTimestampMs, SizeBytes: s.SizeBytes, Broker: s.Broker, LeaderEpoch: s.LeaderEpoch,
		DeleteStarted: s.State == metadata.RemoteSegmentDeleteStarted}
	for _, e := range s.Epochs {
		out.Epochs = append(out.Epochs, &pb.RemoteEpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return out
}

func remoteLogFromPB(st *pb.RemoteLogState) (*metadata.RemoteLog, bool) {
	id, ok := topicIDOf(st.TopicId)
	if !ok {
		return nil, false
	}
	segs := make([]metadata.RemoteSegment, len(st.Segments))
	for i, s := range st.Segments {
		segs[i] = remoteSegmentFromPB(id, st.Partition, s)
	}
	return metadata.NewRemoteLog(st.Topic, id, st.Partition, st.LogStart, segs), true
}

// remoteLogToPB lists a remote log's segments, committed and deleting, by base offset.
func remoteLogToPB(r *metadata.RemoteLog) *pb.RemoteLogState {
	out := &pb.RemoteLogState{Topic: r.Topic, TopicId: slices.Clone(r.TopicID[:]), Partition: r.Partition, LogStart: r.LogStart}
	for _, ss := range [][]metadata.RemoteSegment{r.Deleting, r.Segments} {
		for i := range ss {
			out.Segments = append(out.Segments, remoteSegmentToPB(&ss[i]))
		}
	}
	slices.SortFunc(out.Segments, func(a, b *pb.RemoteLogSegment) int { return cmp.Compare(a.BaseOffset, b.BaseOffset) })
	return out
}

// remoteLogsToPB lists a set of remote logs in key order.
func remoteLogsToPB(logs metadata.RemoteLogs) []*pb.RemoteLogState {
	var out []*pb.RemoteLogState
	for _, k := range slices.SortedFunc(maps.Keys(logs), compareRemoteLogKey) {
		out = append(out, remoteLogToPB(logs[k]))
	}
	return out
}

// remoteLogsByTopic groups remote logs by topic, for the image chunk of each topic.
func remoteLogsByTopic(logs metadata.RemoteLogs) map[string][]*pb.RemoteLogState {
	out := map[string][]*pb.RemoteLogState{}
	for _, st := range remoteLogsToPB(logs) {
		out[st.Topic] = append(out[st.Topic], st)
	}
	return out
}

// applyRemoteLogs returns logs with each state's partition replaced; an empty state
// (no segments, no log start) removes it. logs is left untouched.
func applyRemoteLogs(logs metadata.RemoteLogs, states []*pb.RemoteLogState) metadata.RemoteLogs {
	out := maps.Clone(logs)
	if out == nil {
		out = metadata.RemoteLogs{}
	}
	for _, st := range states {
		k := metadata.RemoteLogKey{Topic: st.Topic, Partition: st.Partition}
		if len(st.Segments) == 0 && st.LogStart == 0 {
			delete(out, k)
			continue
		}
		if r, ok := remoteLogFromPB(st); ok {
			out[k] = r
		}
	}
	return out
}

// dropTopicRemoteLogs returns logs without those of the named topics; logs itself when
// none of them has any (images share what they do not change).
func dropTopicRemoteLogs(logs metadata.RemoteLogs, topics []string) metadata.RemoteLogs {
	var out metadata.RemoteLogs
	for k := range logs {
		if !slices.Contains(topics, k.Topic) {
			continue
		}
		if out == nil {
			out = maps.Clone(logs)
		}
		delete(out, k)
	}
	if out == nil {
		return logs
	}
	return out
}

// remoteLog returns a partition's remote log as of this change, nil when it has none.
// The returned state must not be modified; set a changed copy with setRemoteLog.
func (c *change) remoteLog(topic string, partition int32) *pb.RemoteLogState {
	k := metadata.RemoteLogKey{Topic: topic, Partition: partition}
	if st, ok := c.remoteLogs[k]; ok {
		return st
	}
	if c.deleted[topic] {
		return nil
	}
	if r := c.base.RemoteLogs[k]; r != nil {
		return remoteLogToPB(r)
	}
	return nil
}

func (c *change) setRemoteLog(st *pb.RemoteLogState) {
	if c.remoteLogs == nil {
		c.remoteLogs = map[metadata.RemoteLogKey]*pb.RemoteLogState{}
	}
	c.remoteLogs[metadata.RemoteLogKey{Topic: st.Topic, Partition: st.Partition}] = st
}

// remoteLogsDelta lists the change's remote logs for its delta.
func (c *change) remoteLogsDelta() []*pb.RemoteLogState {
	var out []*pb.RemoteLogState
	for _, k := range slices.SortedFunc(maps.Keys(c.remoteLogs), compareRemoteLogKey) {
		out = append(out, c.remoteLogs[k])
	}
	return out
}

func (f *fsm) applyRemoteLog(c *change, r *pb.RemoteLogRecord) applyResult {
	fail := func(err error) applyResult { return applyResult{err: err} }
	if _, ok := r.Op.(*pb.RemoteLogRecord_Purged); ok {
		return c.remotePurged(r) // the topic is gone: nothing to fence by
	}
	t := c.existingTopic(r.Topic)
	id, _ := topicIDOf(r.TopicId)
	switch {
	case t == nil:
		return fail(kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", r.Topic))
	case t.ID != id:
		return fail(kafkaErrorf(kerr.UnknownTopicID, "topic %q has another id", r.Topic))
	}
	ps, ok := c.partition(r.Topic, r.Partition)
	switch {
	case !ok:
		return fail(kafkaErrorf(kerr.UnknownTopicOrPartition, "%s-%d does not exist", r.Topic, r.Partition))
	case r.LeaderEpoch < ps.LeaderEpoch:
		return fail(kafkaErrorf(kerr.FencedLeaderEpoch, "%s-%d: leader epoch %d, the partition's is %d", r.Topic, r.Partition, r.LeaderEpoch, ps.LeaderEpoch))
	case r.LeaderEpoch > ps.LeaderEpoch:
		return fail(kafkaErrorf(kerr.UnknownLeaderEpoch, "%s-%d: leader epoch %d is newer than the partition's %d", r.Topic, r.Partition, r.LeaderEpoch, ps.LeaderEpoch))
	case ps.Leader != r.Broker:
		return fail(kafkaErrorf(kerr.NotLeaderForPartition, "%s-%d: broker %d is not the leader", r.Topic, r.Partition, r.Broker))
	}
	cur := c.remoteLog(r.Topic, r.Partition)
	if cur == nil {
		cur = &pb.RemoteLogState{Topic: r.Topic, TopicId: slices.Clone(t.ID[:]), Partition: r.Partition}
	}
	var next *pb.RemoteLogState
	var err error
	switch op := r.Op.(type) {
	case *pb.RemoteLogRecord_Commit:
		if !topicconfig.Resolve(c.topicConfigs(r.Topic), nil).RemoteStorage() {
			return fail(kafkaErrorf(kerr.InvalidRequest, "topic %q does not have remote.storage.enable", r.Topic))
		}
		next, err = commitRemoteSegment(cur, r, op.Commit)
	case *pb.RemoteLogRecord_DeleteStart:
		next, err = startRemoteDelete(cur, op.DeleteStart)
	case *pb.RemoteLogRecord_DeleteFinish:
		next, err = finishRemoteDelete(cur, op.DeleteFinish)
	default:
		return fail(kafkaErrorf(kerr.InvalidRequest, "empty remote log operation"))
	}
	if err != nil {
		return fail(err)
	}
	if next != nil {
		c.setRemoteLog(next)
	}
	return applyResult{}
}

// withSegments returns a copy of st's header with segs.
func withSegments(st *pb.RemoteLogState, segs []*pb.RemoteLogSegment) *pb.RemoteLogState {
	return &pb.RemoteLogState{Topic: st.Topic, TopicId: st.TopicId, Partition: st.Partition, LogStart: st.LogStart, Segments: segs}
}

// commitRemoteSegment adds seg to st; nil (and no error) when it is a resend of a
// commit already applied.
func commitRemoteSegment(st *pb.RemoteLogState, r *pb.RemoteLogRecord, seg *pb.RemoteLogSegment) (*pb.RemoteLogState, error) {
	name := func() string { return r.Topic + "-" + strconv.Itoa(int(r.Partition)) }
	switch {
	case seg == nil || seg.UploadId == "":
		return nil, kafkaErrorf(kerr.InvalidRequest, "%s: remote segment without an upload id", name())
	case seg.BaseOffset < 0 || seg.EndOffset < seg.BaseOffset || seg.SizeBytes < 0:
		return nil, kafkaErrorf(kerr.InvalidRequest, "%s: remote segment %s covers [%d, %d] with %d bytes", name(), seg.UploadId, seg.BaseOffset, seg.EndOffset, seg.SizeBytes)
	case seg.DeleteStarted:
		return nil, kafkaErrorf(kerr.InvalidRequest, "%s: a committed segment cannot start out deleting", name())
	}
	prevEpoch, prevStart := int32(-1), seg.BaseOffset-1
	for i, e := range seg.Epochs {
		if e.Epoch <= prevEpoch || e.StartOffset <= prevStart || e.StartOffset > seg.EndOffset || (i == 0 && e.StartOffset != seg.BaseOffset) {
			return nil, kafkaErrorf(kerr.InvalidRequest, "%s: remote segment %s: leader epochs out of order at epoch %d", name(), seg.UploadId, e.Epoch)
		}
		prevEpoch, prevStart = e.Epoch, e.StartOffset
	}
	for _, s := range st.Segments {
		if s.UploadId == seg.UploadId {
			if s.BaseOffset == seg.BaseOffset && s.EndOffset == seg.EndOffset {
				return nil, nil // a resend after a lost answer
			}
			return nil, kafkaErrorf(kerr.InvalidRequest, "%s: upload %s is already committed as [%d, %d]", name(), seg.UploadId, s.BaseOffset, s.EndOffset)
		}
	}
	if seg.EndOffset < st.LogStart {
		return nil, kafkaErrorf(kerr.OffsetOutOfRange, "%s: remote segment [%d, %d] lies below the remote log start %d", name(), seg.BaseOffset, seg.EndOffset, st.LogStart)
	}
	for _, s := range st.Segments {
		if seg.BaseOffset <= s.EndOffset && s.BaseOffset <= seg.EndOffset {
			return nil, kafkaErrorf(kerr.InvalidRequest, "%s: remote segment [%d, %d] overlaps upload %s [%d, %d]",
				name(), seg.BaseOffset, seg.EndOffset, s.UploadId, s.BaseOffset, s.EndOffset)
		}
	}
	add := &pb.RemoteLogSegment{UploadId: seg.UploadId, BaseOffset: seg.BaseOffset, EndOffset: seg.EndOffset,
		MaxTimestampMs: seg.MaxTimestampMs, SizeBytes: seg.SizeBytes, Broker: r.Broker, LeaderEpoch: r.LeaderEpoch, Epochs: seg.Epochs}
	segs := append(slices.Clone(st.Segments), add)
	slices.SortFunc(segs, func(a, b *pb.RemoteLogSegment) int { return cmp.Compare(a.BaseOffset, b.BaseOffset) })
	return withSegments(st, segs), nil
}

// startRemoteDelete marks the earliest committed segments deleting and moves the log
// start; ids already deleting are accepted again.
func startRemoteDelete(st *pb.RemoteLogState, op *pb.RemoteDeleteStart) (*pb.RemoteLogState, error) {
	segs := slices.Clone(st.Segments)
	logStart := max(st.LogStart, op.LogStart)
	next := 0 // index in segs of the first segment still committed
	for next < len(segs) && segs[next].DeleteStarted {
		next++
	}
	for _, id := range op.UploadIds {
		i := slices.IndexFunc(segs, func(s *pb.RemoteLogSegment) bool { return s.UploadId == id })
		switch {
		case i < 0:
			return nil, kafkaErrorf(kerr.InvalidRequest, "%s-%d: no remote segment %s", st.Topic, st.Partition, id)
		case segs[i].DeleteStarted:
			continue
		}
		// Deleting segments precede committed ones, so the first committed one is next
		// after skipping them.
		for next < len(segs) && segs[next].DeleteStarted {
			next++
		}
		if i != next {
			return nil, kafkaErrorf(kerr.InvalidRequest, "%s-%d: remote segment %s [%d, %d] is not the earliest committed one",
				st.Topic, st.Partition, id, segs[i].BaseOffset, segs[i].EndOffset)
		}
		d := proto.CloneOf(segs[i])
		d.DeleteStarted = true
		segs[i] = d
		logStart = max(logStart, d.EndOffset+1)
		next++
	}
	if logStart == st.LogStart && slices.Equal(segs, st.Segments) {
		return nil, nil
	}
	out := withSegments(st, segs)
	out.LogStart = logStart
	return out, nil
}

// finishRemoteDelete drops deleting segments; unknown ids are a resend's.
func finishRemoteDelete(st *pb.RemoteLogState, op *pb.RemoteDeleteFinish) (*pb.RemoteLogState, error) {
	segs := st.Segments
	changed := false
	for _, id := range op.UploadIds {
		i := slices.IndexFunc(segs, func(s *pb.RemoteLogSegment) bool { return s.UploadId == id })
		switch {
		case i < 0:
			continue
		case !segs[i].DeleteStarted:
			return nil, kafkaErrorf(kerr.InvalidRequest, "%s-%d: remote segment %s is committed; start its deletion first", st.Topic, st.Partition, id)
		}
		if !changed {
			segs, changed = slices.Clone(segs), true
		}
		segs = slices.Delete(segs, i, i+1)
	}
	if !changed {
		return nil, nil
	}
	return withSegments(st, segs), nil
}

// Purges of deleted tiered topics' remote objects (metadata.RemotePurge): the record that
// deletes a tiered topic keeps one entry per partition, by topic id, and a broker's
// RemotePurged op drops it once the objects are gone. Kept in the image (deltas, image
// chunks, snapshots), so that no restart forgets a deletion half done.

func compareRemotePurgeKey(a, b metadata.RemotePurgeKey) int {
	return cmp.Or(slices.Compare(a.TopicID[:], b.TopicID[:]), cmp.Compare(a.Partition, b.Partition))
}

func remotePurgeFromPB(p *pb.RemotePurge) (metadata.RemotePurge, bool) {
	id, ok := topicIDOf(p.TopicId)
	if !ok {
		return metadata.RemotePurge{}, false
	}
	return metadata.RemotePurge{Topic: p.Topic, TopicID: id, Partition: p.Partition, Leader: p.Leader}, true
}

func remotePurgeToPB(p metadata.RemotePurge) *pb.RemotePurge {
	return &pb.RemotePurge{TopicId: slices.Clone(p.TopicID[:]), Partition: p.Partition, Topic: p.Topic, Leader: p.Leader}
}

// remotePurgesToPB lists purges in key order.
func remotePurgesToPB(ps metadata.RemotePurges) []*pb.RemotePurge {
	var out []*pb.RemotePurge
	for _, k := range slices.SortedFunc(maps.Keys(ps), compareRemotePurgeKey) {
		out = append(out, remotePurgeToPB(ps[k]))
	}
	return out
}

// applyRemotePurges returns ps without done and with added; nil when none is left, and
// ps itself when nothing changes (images share what they do not change). ps is left
// untouched.
func applyRemotePurges(ps metadata.RemotePurges, added, done []*pb.RemotePurge) metadata.RemotePurges {
	out := maps.Clone(ps)
	if out == nil {
		out = metadata.RemotePurges{}
	}
	for _, d := range done {
		if id, ok := topicIDOf(d.TopicId); ok {
			delete(out, metadata.RemotePurgeKey{TopicID: id, Partition: d.Partition})
		}
	}
	for _, a := range added {
		if p, ok := remotePurgeFromPB(a); ok {
			out[metadata.RemotePurgeKey{TopicID: p.TopicID, Partition: p.Partition}] = p
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// purgeRemoteLogs keeps a purge entry for each partition of a topic this change deletes
// whose objects may be in the remote store: every partition of a topic with
// remote.storage.enable, uploaded or not (a failed upload's objects are orphans no
// remote log names), and any partition that has a remote log. Called before the topic
// is marked deleted, while its partitions and remote logs are still visible.
func (c *change) purgeRemoteLogs(name string) {
	t := c.existingTopic(name)
	if t == nil {
		return
	}
	tiered := topicconfig.Resolve(c.topicConfigs(name), nil).RemoteStorage()
	for i := range c.partitionCount(name) {
		if !tiered && c.remoteLog(name, i) == nil {
			continue
		}
		leader := int32(-1)
		if ps, ok := c.partition(name, i); ok {
			leader = ps.Leader
		}
		if c.remotePurges == nil {
			c.remotePurges = map[metadata.RemotePurgeKey]*pb.RemotePurge{}
		}
		c.remotePurges[metadata.RemotePurgeKey{TopicID: t.ID, Partition: i}] = remotePurgeToPB(
			metadata.RemotePurge{Topic: name, TopicID: t.ID, Partition: i, Leader: leader})
	}
}

// remotePurged drops a purge entry; one already dropped (a resend, a second broker's
// report) changes nothing and is no error: the objects of a deleted topic id stay gone.
func (c *change) remotePurged(r *pb.RemoteLogRecord) applyResult {
	id, ok := topicIDOf(r.TopicId)
	if !ok {
		return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "remote purge of %s-%d: bad topic id", r.Topic, r.Partition)}
	}
	k := metadata.RemotePurgeKey{TopicID: id, Partition: r.Partition}
	if _, ok := c.base.RemotePurges[k]; !ok {
		return applyResult{}
	}
	if c.purgesDone == nil {
		c.purgesDone = map[metadata.RemotePurgeKey]bool{}
	}
	c.purgesDone[k] = true
	return applyResult{}
}

// remotePurgesDelta lists the change's added and dropped purges for its delta.
func (c *change) remotePurgesDelta() (added, done []*pb.RemotePurge) {
	for _, k := range slices.SortedFunc(maps.Keys(c.remotePurges), compareRemotePurgeKey) {
		added = append(added, c.remotePurges[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.purgesDone), compareRemotePurgeKey) {
		done = append(done, &pb.RemotePurge{TopicId: slices.Clone(k.TopicID[:]), Partition: k.Partition})
	}
	return added, done
}
