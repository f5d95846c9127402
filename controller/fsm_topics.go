package controller

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// maxNewPartitions bounds the partitions one topic creation or extension may add, so that
// a typo cannot make one record (and every broker's cache) enormous.
const maxNewPartitions = 100_000

// createTopicResult is one topic's outcome of a CreateTopicsRecord.
type createTopicResult struct {
	err   error
	topic *metadata.Topic
}

// placementFor builds a placer over the eligible brokers with the load as of the base
// image plus whatever this change already placed (the placer keeps counting).
func (f *fsm) placementFor(c *change) *placer {
	var eligible []int32
	racks := map[int32]string{}
	for _, id := range c.brokerIDs() {
		if c.eligible(id) {
			eligible = append(eligible, id)
			racks[id] = c.broker(id).Rack
		}
	}
	leaders, replicas := leaderCounts(c.base)
	return newPlacer(eligible, racks, leaders, replicas)
}

func (f *fsm) applyCreateTopics(c *change, r *pb.CreateTopicsRecord) applyResult {
	results := make([]createTopicResult, len(r.Topics))
	var pl *placer
	for i, nt := range r.Topics {
		if pl == nil {
			pl = f.placementFor(c)
		}
		if t := c.existingTopic(nt.Name); t != nil && slices.Equal(t.ID[:], nt.Id) {
			// The same call again (its id is the caller's, the same in every attempt): the
			// earlier attempt created the topic and its answer was lost.
			results[i].topic = t
			continue
		}
		td, err := f.createTopic(c, nt, pl)
		if err != nil {
			results[i].err = err
			continue
		}
		c.createTopic(td)
		results[i].topic = topicFromDelta(td)
	}
	return applyResult{value: results}
}

func (f *fsm) createTopic(c *change, nt *pb.NewTopic, pl *placer) (*pb.TopicDelta, error) {
	if err := metadata.ValidateTopicName(nt.Name); err != nil {
		return nil, err
	}
	if c.topicExists(nt.Name) || nt.Name == metadata.OffsetsTopic {
		// __consumer_offsets is the controller's own view of the committed offsets: it
		// always exists, and no broker may create a real topic under its name.
		return nil, kafkaErrorf(kerr.TopicAlreadyExists, "topic %q already exists", nt.Name)
	}
	key := collisionKey(nt.Name)
	for _, other := range c.topicNames() {
		if collisionKey(other) == key {
			return nil, kafkaErrorf(kerr.InvalidTopicException,
				"topic %q collides with existing topic %q: '.' and '_' are interchangeable in metric names", nt.Name, other)
		}
	}
	if _, ok := topicIDOf(nt.Id); !ok {
		return nil, kafkaErrorf(kerr.InvalidRequest, "topic %q: id must have 16 bytes", nt.Name)
	}
	var assignments [][]int32
	if len(nt.Assignments) > 0 {
		if len(nt.Assignments) > maxNewPartitions {
			return nil, kafkaErrorf(kerr.InvalidPartitions, "topic %q: %d partitions is more than the %d one request may create",
				nt.Name, len(nt.Assignments), maxNewPartitions)
		}
		var err error
		if assignments, err = validateAssignments(c, nt.Assignments, 0); err != nil {
			return nil, err
		}
	} else {
		switch {
		case nt.NumPartitions <= 0:
			return nil, kafkaErrorf(kerr.InvalidPartitions, "topic %q: number of partitions must be larger than 0", nt.Name)
		case nt.NumPartitions > maxNewPartitions:
			return nil, kafkaErrorf(kerr.InvalidPartitions, "topic %q: %d partitions is more than the %d one request may create",
				nt.Name, nt.NumPartitions, maxNewPartitions)
		case nt.ReplicationFactor <= 0:
			return nil, kafkaErrorf(kerr.InvalidReplicationFactor, "topic %q: replication factor must be larger than 0", nt.Name)
		case int(nt.ReplicationFactor) > len(pl.brokers):
			return nil, kafkaErrorf(kerr.InvalidReplicationFactor,
				"topic %q: replication factor %d is larger than the %d available brokers", nt.Name, nt.ReplicationFactor, len(pl.brokers))
		}
		assignments = pl.place(int(nt.NumPartitions), int(nt.ReplicationFactor), 0, nt.Seed)
	}
	td := &pb.TopicDelta{Name: nt.Name, Id: slices.Clone(nt.Id), Configs: maps.Clone(nt.Configs)}
	if td.Configs == nil {
		td.Configs = map[string]string{}
	}
	for i, replicas := range assignments {
		td.Partitions = append(td.Partitions, newPartitionState(c, int32(i), replicas))
	}
	return td, nil
}

// validateAssignments checks explicit replica assignments: each non-empty, without
// duplicates, of registered brokers with at least one eligible, all of one size (rf when
// rf > 0).
func validateAssignments(c *change, lists []*pb.ReplicaList, rf int) ([][]int32, error) {
	out := make([][]int32, len(lists))
	for i, l := range lists {
		rs := l.GetReplicas()
		switch {
		case len(rs) == 0:
			return nil, kafkaErrorf(kerr.InvalidReplicaAssignment, "partition %d has no replicas", i)
		case rf > 0 && len(rs) != rf:
			return nil, kafkaErrorf(kerr.InvalidReplicaAssignment,
				"partition %d has %d replicas; the topic's replication factor is %d", i, len(rs), rf)
		case i > 0 && len(rs) != len(out[0]):
			return nil, kafkaErrorf(kerr.InvalidReplicaAssignment, "partitions 0 and %d have different replication factors", i)
		}
		anyEligible := false
		for j, b := range rs {
			if slices.Contains(rs[:j], b) {
				return nil, kafkaErrorf(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice", i, b)
			}
			if c.broker(b) == nil {
				return nil, kafkaErrorf(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", i, b)
			}
			anyEligible = anyEligible || c.eligible(b)
		}
		if !anyEligible {
			return nil, kafkaErrorf(kerr.InvalidReplicaAssignment, "partition %d: all of its brokers are fenced", i)
		}
		out[i] = slices.Clone(rs)
	}
	return out, nil
}

// newPartitionState is a new partition: its eligible replicas form the ISR and the first
// of them leads.
func newPartitionState(c *change, idx int32, replicas []int32) *pb.PartitionState {
	var isr []int32
	for _, r := range replicas {
		if c.eligible(r) {
			isr = append(isr, r)
		}
	}
	leader := int32(-1)
	if len(isr) > 0 {
		leader = isr[0]
	}
	return &pb.PartitionState{Index: idx, Replicas: replicas, Isr: isr, Leader: leader}
}

func topicFromDelta(td *pb.TopicDelta) *metadata.Topic {
	t, _ := applyTopicDelta(nil, &pb.TopicDelta{Name: td.Name, Id: td.Id, Created: true, Configs: td.Configs, Partitions: td.Partitions})
	return t
}

// resolveTopic finds the topic a record names, checking its id when the record has one.
func resolveTopic(c *change, name string, id []byte) (*metadata.Topic, error) {
	t := c.existingTopic(name)
	if t == nil {
		return nil, kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if len(id) > 0 && !slices.Equal(t.ID[:], id) {
		return nil, kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q was deleted and recreated", name)
	}
	return t, nil
}

func (f *fsm) applyDeleteTopics(c *change, r *pb.DeleteTopicsRecord) applyResult {
	errs := make([]error, len(r.Topics))
	for i, ref := range r.Topics {
		if _, err := resolveTopic(c, ref.Name, ref.Id); err != nil {
			errs[i] = err
			continue
		}
		c.deleteTopic(ref.Name)
		name := ref.Name
		c.after(func() { f.dropTopicOffsets(name) })
		c.after(func() { f.dropTopicShareState(name) })
	}
	return applyResult{value: errs}
}

func (f *fsm) applyCreatePartitions(c *change, r *pb.CreatePartitionsRecord) applyResult {
	errs := make([]error, len(r.Specs))
	var pl *placer
	for i, spec := range r.Specs {
		if pl == nil {
			pl = f.placementFor(c)
		}
		errs[i] = f.createPartitions(c, spec, pl)
	}
	return applyResult{value: errs}
}

func (f *fsm) createPartitions(c *change, spec *pb.NewPartitions, pl *placer) error {
	t, err := resolveTopic(c, spec.Topic, spec.TopicId)
	if err != nil {
		return err
	}
	have := c.partitionCount(spec.Topic)
	switch {
	case spec.Count < have:
		return kafkaErrorf(kerr.InvalidPartitions, "topic %q has %d partitions, more than the requested %d", spec.Topic, have, spec.Count)
	case spec.Count == have:
		return kafkaErrorf(kerr.InvalidPartitions, "topic %q already has %d partitions", spec.Topic, have)
	case spec.Count-have > maxNewPartitions:
		return kafkaErrorf(kerr.InvalidPartitions, "topic %q: adding %d partitions is more than the %d one request may create",
			spec.Topic, spec.Count-have, maxNewPartitions)
	}
	// The replication factor a reassignment in progress is heading for.
	rf := len(t.Partitions[0].Replicas) - len(t.Partitions[0].RemovingReplicas)
	var assignments [][]int32
	if len(spec.Assignments) > 0 {
		if int32(len(spec.Assignments)) != spec.Count-have {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "topic %q: %d assignments for %d new partitions",
				spec.Topic, len(spec.Assignments), spec.Count-have)
		}
		if assignments, err = validateAssignments(c, spec.Assignments, rf); err != nil {
			return err
		}
	} else {
		if rf > len(pl.brokers) {
			return kafkaErrorf(kerr.InvalidReplicationFactor, "topic %q: replication factor %d is larger than the %d available brokers",
				spec.Topic, rf, len(pl.brokers))
		}
		assignments = pl.place(int(spec.Count-have), rf, have, spec.Seed)
	}
	for i, replicas := range assignments {
		c.setPartition(spec.Topic, newPartitionState(c, have+int32(i), replicas))
	}
	return nil
}

func (f *fsm) applySetTopicConfigs(c *change, r *pb.SetTopicConfigsRecord) applyResult {
	if _, err := resolveTopic(c, r.Topic, r.TopicId); err != nil {
		return applyResult{err: err}
	}
	cfg := maps.Clone(r.Configs)
	if cfg == nil {
		cfg = map[string]string{}
	}
	c.setConfigs(r.Topic, cfg)
	return applyResult{}
}

// alterPartitionResult is AlterPartition's outcome.
type alterPartitionResult struct {
	partition metadata.Partition
}

func (f *fsm) applyAlterPartition(c *change, r *pb.AlterPartitionRecord) applyResult {
	fail := func(err error) applyResult { return applyResult{err: err} }
	b := c.broker(r.BrokerId)
	switch {
	case b == nil:
		return fail(kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", r.BrokerId))
	case b.Epoch != r.BrokerEpoch:
		return fail(kafkaErrorf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", r.BrokerId, b.Epoch, r.BrokerEpoch))
	}
	if _, err := resolveTopic(c, r.Topic, nil); err != nil {
		return fail(err)
	}
	p, ok := c.partition(r.Topic, r.Partition)
	if !ok {
		return fail(kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", r.Topic, r.Partition))
	}
	switch {
	case r.LeaderEpoch != p.LeaderEpoch:
		return fail(kafkaErrorf(kerr.FencedLeaderEpoch, "%s-%d: leader epoch is %d, not %d", r.Topic, r.Partition, p.LeaderEpoch, r.LeaderEpoch))
	case r.BrokerId != p.Leader:
		return fail(kafkaErrorf(kerr.NotLeaderForPartition, "%s-%d: broker %d is not the leader", r.Topic, r.Partition, r.BrokerId))
	case r.PartitionEpoch != p.PartitionEpoch:
		return fail(kafkaErrorf(kerr.InvalidUpdateVersion, "%s-%d: partition epoch is %d, not %d", r.Topic, r.Partition, p.PartitionEpoch, r.PartitionEpoch))
	case !slices.Contains(r.NewIsr, p.Leader):
		return fail(kafkaErrorf(kerr.InvalidRequest, "%s-%d: the new ISR must contain the leader", r.Topic, r.Partition))
	}
	for i, id := range r.NewIsr {
		switch {
		case slices.Contains(r.NewIsr[:i], id):
			return fail(kafkaErrorf(kerr.InvalidRequest, "%s-%d: the new ISR lists %d twice", r.Topic, r.Partition, id))
		case !slices.Contains(p.Replicas, id):
			return fail(kafkaErrorf(kerr.InvalidRequest, "%s-%d: %d is not a replica", r.Topic, r.Partition, id))
		case !c.alive(id):
			return fail(kafkaErrorf(kerr.IneligibleReplica, "%s-%d: broker %d is fenced", r.Topic, r.Partition, id))
		case !c.eligible(id) && !slices.Contains(p.Isr, id):
			// A broker in controlled shutdown may stay in an ISR but not join one.
			return fail(kafkaErrorf(kerr.IneligibleReplica, "%s-%d: broker %d is shutting down", r.Topic, r.Partition, id))
		}
	}
	// The ISR it already has still moves the partition epoch: a leader sends that to
	// fence off its earlier sends of a change whose outcome it does not know (a send that
	// was refused does not prove that an earlier one, delayed, will not be applied yet).
	f.bumpPartitionState(c, r.Topic, p, p.Leader, r.NewIsr)
	p, _ = c.partition(r.Topic, r.Partition)
	return applyResult{value: alterPartitionResult{partition: partitionFromPB(r.Topic, p)}}
}
