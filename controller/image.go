package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"

	pb "github.com/shalelog/shale/controller/proto"
)

// The same applyDelta builds the controllers' images from their FSM's deltas and the
// brokers' caches from the deltas they watch, so the two cannot drift apart.

func emptyImage() *metadata.Image {
	return &metadata.Image{ControllerID: -1, Brokers: map[int32]metadata.Broker{}, Topics: map[string]*metadata.Topic{}}
}

func brokerFromPB(b *pb.BrokerState) metadata.Broker {
	out := metadata.Broker{ID: b.Id, Rack: b.Rack, Incarnation: b.Incarnation, Epoch: b.Epoch, Fenced: b.Fenced}
	if len(b.Listeners) > 0 {
		out.Host, out.Port = b.Listeners[0].Host, b.Listeners[0].Port
	}
	for _, l := range b.Listeners {
		out.Listeners = append(out.Listeners, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	return out
}

func partitionFromPB(topic string, p *pb.PartitionState) metadata.Partition {
	return metadata.Partition{
		Topic:          topic,
		Index:          p.Index,
		Replicas:       slices.Clone(p.Replicas),
		ISR:            slices.Clone(p.Isr),
		Leader:         p.Leader,
		LeaderEpoch:    p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch,

		AddingReplicas:   slices.Clone(p.AddingReplicas),
		RemovingReplicas: slices.Clone(p.RemovingReplicas),
	}
}

func partitionToPB(p *metadata.Partition) *pb.PartitionState {
	return &pb.PartitionState{
		Index:          p.Index,
		Replicas:       slices.Clone(p.Replicas),
		Isr:            slices.Clone(p.ISR),
		Leader:         p.Leader,
		LeaderEpoch:    p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch,

		AddingReplicas:   slices.Clone(p.AddingReplicas),
		RemovingReplicas: slices.Clone(p.RemovingReplicas),
	}
}

func topicToPB(t *metadata.Topic) *pb.TopicState {
	out := &pb.TopicState{Name: t.Name, Id: slices.Clone(t.ID[:]), Configs: maps.Clone(t.Configs)}
	out.Partitions = make([]*pb.PartitionState, len(t.Partitions))
	for i := range t.Partitions {
		out.Partitions[i] = partitionToPB(&t.Partitions[i])
	}
	return out
}

func topicFromPB(t *pb.TopicState) (*metadata.Topic, error) {
	out := &metadata.Topic{Name: t.Name, Configs: maps.Clone(t.Configs)}
	if out.Configs == nil {
		out.Configs = map[string]string{}
	}
	if len(t.Id) != len(out.ID) {
		return nil, fmt.Errorf("topic %q: id has %d bytes, want 16", t.Name, len(t.Id))
	}
	copy(out.ID[:], t.Id)
	out.Partitions = make([]metadata.Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		if p.Index != int32(i) {
			return nil, fmt.Errorf("topic %q: partition %d at position %d", t.Name, p.Index, i)
		}
		out.Partitions[i] = partitionFromPB(t.Name, p)
	}
	return out, nil
}

func topicIDOf(b []byte) (id [16]byte, ok bool) {
	if len(b) != 16 {
		return id, false
	}
	copy(id[:], b)
	return id, true
}

// applyDelta returns the image that results from applying d to im, which it leaves
// untouched. It fails when d does not follow im or does not fit it, which for a broker
// means its cache must be rebuilt from a complete image.
func applyDelta(im *metadata.Image, d *pb.MetadataDelta) (*metadata.Image, error) {
	if d.PrevOffset != im.Offset {
		return nil, fmt.Errorf("delta at offset %d follows offset %d, image is at %d", d.Offset, d.PrevOffset, im.Offset)
	}
	if d.Offset <= im.Offset {
		return nil, fmt.Errorf("delta offset %d does not advance image offset %d", d.Offset, im.Offset)
	}
	out := *im
	out.Offset = d.Offset
	if d.ClusterId != nil {
		out.ClusterID = *d.ClusterId
	}
	if d.ControllerId != nil {
		out.ControllerID = *d.ControllerId
	}
	if len(d.Brokers) > 0 || len(d.UnregisteredBrokers) > 0 {
		out.Brokers = maps.Clone(im.Brokers)
		for _, b := range d.Brokers {
			out.Brokers[b.Id] = brokerFromPB(b)
		}
		for _, id := range d.UnregisteredBrokers {
			delete(out.Brokers, id)
		}
	}
	if len(d.Coordinators) > 0 {
		cs, err := applyCoordinators(im.Coordinators, d.Coordinators)
		if err != nil {
			return nil, fmt.Errorf("delta at offset %d: %w", d.Offset, err)
		}
		out.Coordinators = cs
	}
	if len(d.AclsCreated) > 0 || len(d.AclsDeleted) > 0 {
		out.ACLs = applyACLDelta(im.ACLs, d)
	}
	if len(d.ClientQuotas) > 0 {
		out.ClientQuotas = applyClientQuotas(im.ClientQuotas, d.ClientQuotas)
	}
	if d.SchemaRegistry != nil {
		out.SchemaRegistry = applyRegistryDelta(im.SchemaRegistry, d.SchemaRegistry)
	}
	if len(d.ClientMetrics) > 0 {
		out.ClientMetrics = applyClientMetrics(im.ClientMetrics, d.ClientMetrics)
	}
	if len(d.GroupConfigs) > 0 {
		out.GroupConfigs = applyGroupConfigs(im.GroupConfigs, d.GroupConfigs)
	}
	if len(d.DeletedTopics) > 0 {
		out.RemoteLogs = dropTopicRemoteLogs(im.RemoteLogs, d.DeletedTopics)
	}
	if len(d.RemoteLogs) > 0 {
		out.RemoteLogs = applyRemoteLogs(out.RemoteLogs, d.RemoteLogs)
	}
	if len(d.RemotePurges) > 0 || len(d.RemotePurgesDone) > 0 {
		out.RemotePurges = applyRemotePurges(im.RemotePurges, d.RemotePurges, d.RemotePurgesDone)
	}
	if linksChanged(d) {
		out.Links, out.Mirrors = applyLinks(im.Links, im.Mirrors, d.ClusterLinks, d.DeletedClusterLinks, d.MirrorTopics, d.DeletedMirrorTopics)
	}
	if len(d.Topics) == 0 && len(d.DeletedTopics) == 0 {
		return &out, nil
	}
	out.Topics = maps.Clone(im.Topics)
	for _, name := range d.DeletedTopics {
		if out.Topics[name] == nil {
			return nil, fmt.Errorf("delta at offset %d deletes unknown topic %q", d.Offset, name)
		}
		delete(out.Topics, name)
	}
	for _, td := range d.Topics {
		t, err := applyTopicDelta(out.Topics[td.Name], td)
		if err != nil {
			return nil, fmt.Errorf("delta at offset %d: %w", d.Offset, err)
		}
		out.Topics[td.Name] = t
	}
	return &out, nil
}

func applyTopicDelta(old *metadata.Topic, td *pb.TopicDelta) (*metadata.Topic, error) {
	id, ok := topicIDOf(td.Id)
	if !ok {
		return nil, fmt.Errorf("topic %q: bad id", td.Name)
	}
	var t metadata.Topic
	switch {
	case td.Created:
		if old != nil {
			return nil, fmt.Errorf("topic %q created twice", td.Name)
		}
		t = metadata.Topic{Name: td.Name, ID: id, Configs: map[string]string{}}
	case old == nil:
		return nil, fmt.Errorf("topic %q changed but unknown", td.Name)
	case old.ID != id:
		return nil, fmt.Errorf("topic %q changed under another id", td.Name)
	default:
		t = *old
		t.Partitions = slices.Clone(old.Partitions)
	}
	if td.Created || td.ConfigsChanged {
		t.Configs = maps.Clone(td.Configs)
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
	}
	for _, p := range td.Partitions {
		switch {
		case int(p.Index) < len(t.Partitions) && p.Index >= 0:
			t.Partitions[p.Index] = partitionFromPB(t.Name, p)
		case int(p.Index) == len(t.Partitions):
			t.Partitions = append(t.Partitions, partitionFromPB(t.Name, p))
		default:
			return nil, fmt.Errorf("topic %q: partition %d out of order (have %d)", t.Name, p.Index, len(t.Partitions))
		}
	}
	return &t, nil
}

// imageChunks splits a complete image into WatchMetadata chunks of about maxPartitions
// partitions each. brokers gives each broker's complete state (with listeners).
func imageChunks(im *metadata.Image, brokers []*pb.BrokerState, maxPartitions int) []*pb.MetadataImageChunk {
	first := &pb.MetadataImageChunk{Offset: im.Offset, ClusterId: im.ClusterID, ControllerId: im.ControllerID,
		Brokers: brokers, First: true, Coordinators: coordinatorsToPB(im.Coordinators), Acls: aclsToPB(im.ACLs.All()),
		ClientQuotas: clientQuotasToPB(im.ClientQuotas), ClientMetrics: clientMetricsToPB(im.ClientMetrics),
		GroupConfigs: groupConfigsToPB(im.GroupConfigs), ClusterLinks: linksToPB(im.Links), MirrorTopics: mirrorsToPB(im.Mirrors),
		RemotePurges: remotePurgesToPB(im.RemotePurges)}
	if im.SchemaRegistry != nil {
		first.SchemaRegistry = registryToPB(im.SchemaRegistry)
	}
	chunks := []*pb.MetadataImageChunk{first}
	remote := remoteLogsByTopic(im.RemoteLogs)
	cur, n := first, 0
	for _, name := range slices.Sorted(maps.Keys(im.Topics)) {
		t := im.Topics[name]
		if n > 0 && n+len(t.Partitions) > maxPartitions {
			cur = &pb.MetadataImageChunk{Offset: im.Offset, ClusterId: im.ClusterID, ControllerId: im.ControllerID}
			chunks = append(chunks, cur)
			n = 0
		}
		cur.Topics = append(cur.Topics, topicToPB(t))
		cur.RemoteLogs = append(cur.RemoteLogs, remote[name]...)
		n += len(t.Partitions)
	}
	cur.Last = true
	return chunks
}

// imageAssembler rebuilds an image from chunks.
type imageAssembler struct {
	im *metadata.Image
}

// add takes the next chunk and returns the image once the last chunk is in.
func (a *imageAssembler) add(c *pb.MetadataImageChunk) (*metadata.Image, error) {
	if c.First {
		a.im = emptyImage()
		a.im.Offset, a.im.ClusterID, a.im.ControllerID = c.Offset, c.ClusterId, c.ControllerId
		for _, b := range c.Brokers {
			a.im.Brokers[b.Id] = brokerFromPB(b)
		}
		cs, err := applyCoordinators(nil, c.Coordinators)
		if err != nil {
			a.im = nil
			return nil, err
		}
		a.im.Coordinators = cs
		if len(c.Acls) > 0 {
			a.im.ACLs = acl.NewSet(aclsFromPB(c.Acls))
		}
		a.im.ClientQuotas = applyClientQuotas(nil, c.ClientQuotas)
		a.im.ClientMetrics = applyClientMetrics(nil, c.ClientMetrics)
		a.im.GroupConfigs = applyGroupConfigs(nil, c.GroupConfigs)
		a.im.Links, a.im.Mirrors = applyLinks(nil, nil, c.ClusterLinks, nil, c.MirrorTopics, nil)
		if len(c.RemotePurges) > 0 {
			a.im.RemotePurges = applyRemotePurges(nil, c.RemotePurges, nil)
		}
		if c.SchemaRegistry != nil {
			a.im.SchemaRegistry = applyRegistryDelta(nil, c.SchemaRegistry)
		}
	}
	if a.im == nil || a.im.Offset != c.Offset {
		a.im = nil
		return nil, fmt.Errorf("image chunk at offset %d out of sequence", c.Offset)
	}
	for _, ts := range c.Topics {
		t, err := topicFromPB(ts)
		if err != nil {
			a.im = nil
			return nil, err
		}
		a.im.Topics[t.Name] = t
	}
	if len(c.RemoteLogs) > 0 {
		a.im.RemoteLogs = applyRemoteLogs(a.im.RemoteLogs, c.RemoteLogs)
	}
	if !c.Last {
		return nil, nil
	}
	im := a.im
	a.im = nil
	return im, nil
}
