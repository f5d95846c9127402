package controller

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Cluster links and mirror topics (issue 29) live in the image, as group configs do: a
// ClusterLinksRecord upserts links and mirrors whole and creates mirror topics in the
// same apply, and brokers receive both in deltas and image chunks. Deleting a topic
// deletes its mirror state in the same record (change.linksDelta).
//
// Promotion (a mirror moving to STOPPED) bumps each partition's leader epoch above the
// mirror's source epoch floor: while mirroring, the destination's logs carry the
// source's leader epochs (replication/mirror.go), and the destination's own epochs must
// continue above them once it writes batches of its own.

func linkToPB(l *metadata.ClusterLink) *pb.ClusterLinkState {
	return &pb.ClusterLinkState{Name: l.Name, Id: slices.Clone(l.ID[:]), Configs: maps.Clone(l.Configs), CreatedMs: l.CreatedMs}
}

func linkFromPB(s *pb.ClusterLinkState) *metadata.ClusterLink {
	l := &metadata.ClusterLink{Name: s.Name, Configs: maps.Clone(s.Configs), CreatedMs: s.CreatedMs}
	copy(l.ID[:], s.Id)
	if l.Configs == nil {
		l.Configs = map[string]string{}
	}
	return l
}

func mirrorToPB(m *metadata.MirrorTopic) *pb.MirrorTopicState {
	return &pb.MirrorTopicState{Topic: m.Topic, Link: m.Link, SourceTopic: m.SourceTopic, State: int32(m.State),
		StateChangedMs: m.StateChangedMs, SourceEpochs: slices.Clone(m.SourceEpochs)}
}

func mirrorFromPB(s *pb.MirrorTopicState) *metadata.MirrorTopic {
	return &metadata.MirrorTopic{Topic: s.Topic, Link: s.Link, SourceTopic: s.SourceTopic, State: metadata.MirrorState(s.State),
		StateChangedMs: s.StateChangedMs, SourceEpochs: slices.Clone(s.SourceEpochs)}
}

// linksToPB lists the links in name order.
func linksToPB(ls metadata.ClusterLinks) []*pb.ClusterLinkState {
	var out []*pb.ClusterLinkState
	for _, name := range slices.Sorted(maps.Keys(ls)) {
		out = append(out, linkToPB(ls[name]))
	}
	return out
}

// mirrorsToPB lists the mirror topics in topic order.
func mirrorsToPB(ms metadata.MirrorTopics) []*pb.MirrorTopicState {
	var out []*pb.MirrorTopicState
	for _, name := range slices.Sorted(maps.Keys(ms)) {
		out = append(out, mirrorToPB(ms[name]))
	}
	return out
}

// applyLinks returns the image's links and mirrors with the deletions, then the
// upserts, applied; the inputs are left untouched.
func applyLinks(ls metadata.ClusterLinks, ms metadata.MirrorTopics, links []*pb.ClusterLinkState, deletedLinks []string,
	mirrors []*pb.MirrorTopicState, deletedMirrors []string) (metadata.ClusterLinks, metadata.MirrorTopics) {
	if len(links) > 0 || len(deletedLinks) > 0 {
		ls = maps.Clone(ls)
		if ls == nil {
			ls = metadata.ClusterLinks{}
		}
		for _, name := range deletedLinks {
			delete(ls, name)
		}
		for _, l := range links {
			ls[l.Name] = linkFromPB(l)
		}
	}
	if len(mirrors) > 0 || len(deletedMirrors) > 0 {
		ms = maps.Clone(ms)
		if ms == nil {
			ms = metadata.MirrorTopics{}
		}
		for _, name := range deletedMirrors {
			delete(ms, name)
		}
		for _, m := range mirrors {
			ms[m.Topic] = mirrorFromPB(m)
		}
	}
	return ls, ms
}

// linkChange is what one record does to links and mirrors.
type linkChange struct {
	links          map[string]*pb.ClusterLinkState
	deletedLinks   map[string]bool
	mirrors        map[string]*pb.MirrorTopicState
	deletedMirrors map[string]bool
}

// link returns a link as of this change, or nil.
func (c *change) link(name string) *pb.ClusterLinkState {
	if c.lc.deletedLinks[name] {
		return nil
	}
	if l, ok := c.lc.links[name]; ok {
		return l
	}
	if l := c.base.Links[name]; l != nil {
		return linkToPB(l)
	}
	return nil
}

// mirror returns a mirror's state as of this change (a copy the caller may change and
// set), or nil.
func (c *change) mirror(topic string) *pb.MirrorTopicState {
	if c.lc.deletedMirrors[topic] || c.deleted[topic] {
		return nil
	}
	if m, ok := c.lc.mirrors[topic]; ok {
		return proto.Clone(m).(*pb.MirrorTopicState)
	}
	if m := c.base.Mirrors[topic]; m != nil {
		return mirrorToPB(m)
	}
	return nil
}

// mirrorsOf lists the mirror topics of a link as of this change.
func (c *change) mirrorsOf(link string) []string {
	names := map[string]bool{}
	for name := range c.base.Mirrors {
		names[name] = true
	}
	for name := range c.lc.mirrors {
		names[name] = true
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if m := c.mirror(name); m != nil && m.Link == link {
			out = append(out, name)
		}
	}
	return out
}

func (c *change) setLink(l *pb.ClusterLinkState) {
	if c.lc.links == nil {
		c.lc.links = map[string]*pb.ClusterLinkState{}
	}
	delete(c.lc.deletedLinks, l.Name)
	c.lc.links[l.Name] = l
}

func (c *change) deleteLink(name string) {
	if c.lc.deletedLinks == nil {
		c.lc.deletedLinks = map[string]bool{}
	}
	delete(c.lc.links, name)
	c.lc.deletedLinks[name] = true
}

func (c *change) setMirror(m *pb.MirrorTopicState) {
	if c.lc.mirrors == nil {
		c.lc.mirrors = map[string]*pb.MirrorTopicState{}
	}
	delete(c.lc.deletedMirrors, m.Topic)
	c.lc.mirrors[m.Topic] = m
}

// stopMirror promotes a mirror: state STOPPED, and every partition's leader epoch moved
// above the source epochs its replicas may hold, so that the destination's first own
// batches start a new, larger epoch in every replica's epoch cache.
func (c *change) stopMirror(m *pb.MirrorTopicState, ms int64) {
	if metadata.MirrorState(m.State) == metadata.MirrorStopped {
		return
	}
	m.State = int32(metadata.MirrorStopped)
	m.StateChangedMs = ms
	c.setMirror(m)
	n := c.partitionCount(m.Topic)
	for i := int32(0); i < n; i++ {
		p, ok := c.partition(m.Topic, i)
		if !ok {
			continue
		}
		floor := int32(-1)
		if int(i) < len(m.SourceEpochs) {
			floor = m.SourceEpochs[i]
		}
		np := proto.Clone(p).(*pb.PartitionState)
		np.LeaderEpoch = max(p.LeaderEpoch, floor) + 1
		np.PartitionEpoch++
		c.setPartition(m.Topic, np)
	}
}

// applyClusterLinks checks the whole record before it changes anything: a refused
// record leaves the state as it was.
// startMirrorOnExisting makes an existing topic a mirror (failback). Its logs hold
// epochs of its own, up to each partition's current leader epoch: the epoch floor starts
// there, so that a later promotion starts above them too, and the partition epoch is
// bumped so that every replica takes the mirror role.
func (c *change) startMirrorOnExisting(m *pb.MirrorTopicState) {
	m = proto.Clone(m).(*pb.MirrorTopicState)
	n := c.partitionCount(m.Topic)
	m.SourceEpochs = make([]int32, n)
	for i := int32(0); i < n; i++ {
		p, ok := c.partition(m.Topic, i)
		if !ok {
			continue
		}
		m.SourceEpochs[i] = p.LeaderEpoch
		np := proto.Clone(p).(*pb.PartitionState)
		np.PartitionEpoch++
		c.setPartition(m.Topic, np)
	}
	c.setMirror(m)
}

func (f *fsm) applyClusterLinks(c *change, r *pb.ClusterLinksRecord) applyResult {
	deleting := map[string]bool{}
	for _, name := range r.DeletedLinks {
		if c.link(name) == nil {
			return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "cluster link %q does not exist", name)}
		}
		deleting[name] = true
	}
	adding := map[string]bool{}
	for _, l := range r.Links {
		if old := c.link(l.Name); old != nil && !deleting[l.Name] && !slices.Equal(old.Id, l.Id) {
			return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "cluster link %q already exists", l.Name)}
		}
		adding[l.Name] = true
	}
	creating := map[string]bool{}
	for _, nt := range r.MirrorTopics {
		creating[nt.Name] = true
	}
	for _, m := range r.Mirrors {
		if (c.link(m.Link) == nil || deleting[m.Link]) && !adding[m.Link] {
			return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "cluster link %q does not exist", m.Link)}
		}
		if !c.topicExists(m.Topic) && !creating[m.Topic] {
			return applyResult{err: kafkaErrorf(kerr.UnknownTopicOrPartition, "mirror topic %q does not exist", m.Topic)}
		}
	}
	for _, e := range r.Epochs {
		m := c.mirror(e.Topic)
		if m == nil || metadata.MirrorState(m.State) != metadata.MirrorActive {
			return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "topic %q is no active mirror", e.Topic)}
		}
		if e.Partition < 0 || e.Partition >= c.partitionCount(e.Topic) {
			return applyResult{err: kafkaErrorf(kerr.UnknownTopicOrPartition, "mirror topic %q has no partition %d", e.Topic, e.Partition)}
		}
	}
	// Topic creation is the one step that can still fail on the state (placement, a
	// name taken): it runs first, each topic on its own overlay check.
	var pl *placer
	var created []*pb.TopicDelta
	for _, nt := range r.MirrorTopics {
		if t := c.existingTopic(nt.Name); t != nil && slices.Equal(t.ID[:], nt.Id) {
			continue // a retry of a create that committed
		}
		if pl == nil {
			pl = f.placementFor(c)
		}
		td, err := f.createTopic(c, nt, pl)
		if err != nil {
			return applyResult{err: err}
		}
		created = append(created, td)
	}
	for _, td := range created {
		c.createTopic(td)
	}
	for _, name := range r.DeletedLinks {
		for _, topic := range c.mirrorsOf(name) {
			c.stopMirror(c.mirror(topic), r.TimeMs)
		}
		c.deleteLink(name)
	}
	for _, l := range r.Links {
		c.setLink(l)
	}
	for _, m := range r.Mirrors {
		old := c.mirror(m.Topic)
		if metadata.MirrorState(m.State) == metadata.MirrorStopped && old != nil {
			c.stopMirror(old, r.TimeMs)
			continue
		}
		if metadata.MirrorState(m.State) == metadata.MirrorActive && !creating[m.Topic] &&
			(old == nil || metadata.MirrorState(old.State) != metadata.MirrorActive) {
			c.startMirrorOnExisting(m)
			continue
		}
		c.setMirror(m)
	}
	for _, e := range r.Epochs {
		m := c.mirror(e.Topic)
		for int32(len(m.SourceEpochs)) <= e.Partition {
			m.SourceEpochs = append(m.SourceEpochs, -1)
		}
		if m.SourceEpochs[e.Partition] >= e.Epoch {
			continue
		}
		m.SourceEpochs[e.Partition] = e.Epoch
		c.setMirror(m)
	}
	return applyResult{}
}

// linksDelta fills the delta's links and mirrors; a deleted topic's mirror goes with it.
func (c *change) linksDelta(d *pb.MetadataDelta) {
	for _, name := range slices.Sorted(maps.Keys(c.lc.deletedLinks)) {
		if c.base.Links[name] != nil {
			d.DeletedClusterLinks = append(d.DeletedClusterLinks, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.lc.links)) {
		d.ClusterLinks = append(d.ClusterLinks, c.lc.links[name])
	}
	deleted := map[string]bool{}
	for name := range c.lc.deletedMirrors {
		deleted[name] = true
	}
	for name := range c.deleted {
		deleted[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(deleted)) {
		if c.base.Mirrors[name] != nil {
			d.DeletedMirrorTopics = append(d.DeletedMirrorTopics, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.lc.mirrors)) {
		if !c.deleted[name] || c.created[name] != nil {
			d.MirrorTopics = append(d.MirrorTopics, c.lc.mirrors[name])
		}
	}
}

// linksChanged reports whether the delta changes links or mirrors.
func linksChanged(d *pb.MetadataDelta) bool {
	return len(d.ClusterLinks) > 0 || len(d.DeletedClusterLinks) > 0 || len(d.MirrorTopics) > 0 || len(d.DeletedMirrorTopics) > 0
}
