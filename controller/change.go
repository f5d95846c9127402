package controller

import (
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// change collects what one record does to the state, as an overlay on the image before
// it: handlers read through it (seeing their own earlier changes) and write into it. The
// FSM turns it into a delta and applies it only when the record commits; a validate-only
// request runs the same handler and throws the change away.
type change struct {
	f      *fsm
	base   *metadata.Image
	offset uint64

	clusterID    *string
	controllerID *int32
	brokers      map[int32]*pb.BrokerState
	unregistered map[int32]bool // brokers whose registration this record removes
	created      map[string]*pb.TopicDelta
	deleted      map[string]bool
	configs      map[string]map[string]string            // existing topics with new configs
	parts        map[string]map[int32]*pb.PartitionState // existing topics' changed or new partitions
	// offsetsPartitions, when set, fixes offsets.topic.num.partitions for a cluster
	// that has no coordinators yet.
	offsetsPartitions int32
	// coordinators are the changed coordinators, set by coordinatorChanges.
	coordinators map[int32]*pb.CoordinatorState
	// acls are the ACL bindings this record stores or removes.
	acls aclChange
	// quotas are the client quota entities set, complete (fsm_quotas.go).
	quotas map[metadata.QuotaEntity]*pb.ClientQuotaState
	// registry is the schema registry's change (fsm_schemas.go).
	registry *pb.SchemaRegistryDelta
	// clientMetrics are the client metrics subscriptions set, complete (fsm_clientmetrics.go).
	clientMetrics map[string]*pb.ClientMetricsState
	// groupConfigs are the groups' configs set, complete (fsm_groupconfigs.go).
	groupConfigs map[string]*pb.GroupConfigState
	// remoteLogs are the partitions' remote logs set, complete (fsm_remotelog.go).
	remoteLogs map[metadata.RemoteLogKey]*pb.RemoteLogState
	// remotePurges are the purges of deleted tiered topics' remote objects this change
	// starts, purgesDone those it drops (fsm_remotelog.go).
	remotePurges map[metadata.RemotePurgeKey]*pb.RemotePurge
	purgesDone   map[metadata.RemotePurgeKey]bool
	// lc are the cluster links and mirror topics changed (fsm_links.go).
	lc linkChange
	// sideEffects change the FSM's state outside the image (offsets, producer ids...).
	sideEffects []func()
}

func newChange(f *fsm, offset uint64) *change {
	return &change{f: f, base: f.img, offset: offset}
}

func (c *change) after(fn func()) { c.sideEffects = append(c.sideEffects, fn) }

// broker returns a broker's state as of this change, or nil.
func (c *change) broker(id int32) *pb.BrokerState {
	if c.unregistered[id] {
		return nil
	}
	if b, ok := c.brokers[id]; ok {
		return b
	}
	return c.f.brokers[id]
}

func (c *change) setBroker(b *pb.BrokerState) {
	if c.brokers == nil {
		c.brokers = map[int32]*pb.BrokerState{}
	}
	c.brokers[b.Id] = b
}

// eligible reports whether a broker may be given leadership or join an ISR: a broker in
// controlled shutdown is alive but may not.
func (c *change) eligible(id int32) bool {
	b := c.broker(id)
	return b != nil && !b.Fenced && !b.InControlledShutdown
}

// alive reports whether a broker is registered and unfenced: a leader that is alive
// keeps its leadership until something moves it.
func (c *change) alive(id int32) bool {
	b := c.broker(id)
	return b != nil && !b.Fenced
}

// brokerIDs returns the registered brokers' ids, sorted.
func (c *change) brokerIDs() []int32 {
	ids := slices.Collect(maps.Keys(c.f.brokers))
	for id := range c.brokers {
		if c.f.brokers[id] == nil {
			ids = append(ids, id)
		}
	}
	ids = slices.DeleteFunc(ids, func(id int32) bool { return c.unregistered[id] })
	slices.Sort(ids)
	return ids
}

// topicExists reports whether a topic of that name exists as of this change.
func (c *change) topicExists(name string) bool {
	if c.created[name] != nil {
		return true
	}
	return c.base.Topics[name] != nil && !c.deleted[name]
}

// existingTopic returns a topic that existed before this change and is not deleted by it.
func (c *change) existingTopic(name string) *metadata.Topic {
	if c.deleted[name] {
		return nil
	}
	return c.base.Topics[name]
}

// partitionCount returns a topic's partition count as of this change.
func (c *change) partitionCount(name string) int32 {
	if td := c.created[name]; td != nil {
		return int32(len(td.Partitions))
	}
	t := c.existingTopic(name)
	if t == nil {
		return 0
	}
	n := int32(len(t.Partitions))
	for idx := range c.parts[name] {
		n = max(n, idx+1)
	}
	return n
}

// partition returns a partition's state as of this change. The returned value's slices
// must not be modified; set a changed copy with setPartition.
func (c *change) partition(topic string, idx int32) (*pb.PartitionState, bool) {
	if td := c.created[topic]; td != nil {
		if idx < 0 || int(idx) >= len(td.Partitions) {
			return nil, false
		}
		return td.Partitions[idx], true
	}
	if p, ok := c.parts[topic][idx]; ok {
		return p, true
	}
	t := c.existingTopic(topic)
	if t == nil || idx < 0 || int(idx) >= len(t.Partitions) {
		return nil, false
	}
	// The image's slices are immutable, so the overlay can share them: every change
	// builds new slices (setPartitionState clones).
	bp := &t.Partitions[idx]
	return &pb.PartitionState{Index: bp.Index, Replicas: bp.Replicas, Isr: bp.ISR, Leader: bp.Leader,
		LeaderEpoch: bp.LeaderEpoch, PartitionEpoch: bp.PartitionEpoch, AddingReplicas: bp.AddingReplicas, RemovingReplicas: bp.RemovingReplicas}, true
}

// partitionExists reports whether a partition exists as of this change, without
// building its state.
func (c *change) partitionExists(topic string, idx int32) bool {
	return idx >= 0 && idx < c.partitionCount(topic)
}

func (c *change) setPartition(topic string, p *pb.PartitionState) {
	if td := c.created[topic]; td != nil {
		td.Partitions[p.Index] = p
		return
	}
	if c.parts == nil {
		c.parts = map[string]map[int32]*pb.PartitionState{}
	}
	if c.parts[topic] == nil {
		c.parts[topic] = map[int32]*pb.PartitionState{}
	}
	c.parts[topic][p.Index] = p
}

// topicConfigs returns a topic's configs as of this change.
func (c *change) topicConfigs(name string) map[string]string {
	if td := c.created[name]; td != nil {
		return td.Configs
	}
	if cfg, ok := c.configs[name]; ok {
		return cfg
	}
	if t := c.existingTopic(name); t != nil {
		return t.Configs
	}
	return nil
}

func (c *change) createTopic(td *pb.TopicDelta) {
	if c.created == nil {
		c.created = map[string]*pb.TopicDelta{}
	}
	td.Created = true
	c.created[td.Name] = td
}

func (c *change) deleteTopic(name string) {
	c.purgeRemoteLogs(name)
	if c.deleted == nil {
		c.deleted = map[string]bool{}
	}
	c.deleted[name] = true
	delete(c.parts, name)
	delete(c.configs, name)
	for k := range c.remoteLogs {
		if k.Topic == name {
			delete(c.remoteLogs, k)
		}
	}
}

func (c *change) setConfigs(name string, cfg map[string]string) {
	if td := c.created[name]; td != nil {
		td.Configs = cfg
		return
	}
	if c.configs == nil {
		c.configs = map[string]map[string]string{}
	}
	c.configs[name] = cfg
}

// topicNames returns the names of the topics as of this change, sorted.
func (c *change) topicNames() []string {
	var names []string
	for name := range c.base.Topics {
		if !c.deleted[name] {
			names = append(names, name)
		}
	}
	for name := range c.created {
		if c.base.Topics[name] == nil || c.deleted[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// delta builds the change as a delta, nil when it changes nothing in the image. Entries
// are sorted so that every controller produces the same bytes.
func (c *change) delta() *pb.MetadataDelta {
	d := &pb.MetadataDelta{Offset: c.offset, PrevOffset: c.base.Offset, ClusterId: c.clusterID, ControllerId: c.controllerID}
	for _, id := range slices.Sorted(maps.Keys(c.brokers)) {
		if !c.unregistered[id] {
			d.Brokers = append(d.Brokers, c.brokers[id])
		}
	}
	d.UnregisteredBrokers = slices.Sorted(maps.Keys(c.unregistered))
	d.DeletedTopics = slices.Sorted(maps.Keys(c.deleted))
	topics := map[string]*pb.TopicDelta{}
	for name, cfg := range c.configs {
		t := c.base.Topics[name]
		topics[name] = &pb.TopicDelta{Name: name, Id: slices.Clone(t.ID[:]), ConfigsChanged: true, Configs: cfg}
	}
	for name, ps := range c.parts {
		td := topics[name]
		if td == nil {
			t := c.base.Topics[name]
			td = &pb.TopicDelta{Name: name, Id: slices.Clone(t.ID[:])}
			topics[name] = td
		}
		for _, idx := range slices.Sorted(maps.Keys(ps)) {
			td.Partitions = append(td.Partitions, ps[idx])
		}
	}
	for name, td := range c.created {
		topics[name] = td
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		d.Topics = append(d.Topics, topics[name])
	}
	for _, p := range slices.Sorted(maps.Keys(c.coordinators)) {
		d.Coordinators = append(d.Coordinators, c.coordinators[p])
	}
	c.acls.fill(d)
	d.ClientQuotas = c.quotaDelta()
	d.SchemaRegistry = c.registry
	d.ClientMetrics = c.clientMetricsDelta()
	d.GroupConfigs = c.groupConfigsDelta()
	d.RemoteLogs = c.remoteLogsDelta()
	d.RemotePurges, d.RemotePurgesDone = c.remotePurgesDelta()
	c.linksDelta(d)
	if d.ClusterId == nil && d.SchemaRegistry == nil && d.ControllerId == nil && c.acls.empty() && len(d.Brokers) == 0 && len(d.UnregisteredBrokers) == 0 &&
		len(d.Topics) == 0 && len(d.DeletedTopics) == 0 &&
		len(d.Coordinators) == 0 && len(d.ClientQuotas) == 0 && len(d.ClientMetrics) == 0 && len(d.GroupConfigs) == 0 && len(d.RemoteLogs) == 0 &&
		len(d.RemotePurges) == 0 && len(d.RemotePurgesDone) == 0 && !linksChanged(d) {
		return nil
	}
	return d
}
