package controller

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"

	pb "github.com/shalelog/shale/controller/proto"
)

func sortBrokers(bs []*pb.BrokerState) {
	slices.SortFunc(bs, func(a, b *pb.BrokerState) int { return int(a.Id) - int(b.Id) })
}

func (f *fsm) applyLeaderChange(c *change, r *pb.LeaderChangeRecord) applyResult {
	id := r.LeaderId
	c.controllerID = &id
	if c.base.ClusterID == "" && r.ClusterId != "" {
		cid := r.ClusterId
		c.clusterID = &cid
	}
	unclean := r.UncleanLeaderElection
	c.after(func() { f.unclean = unclean })
	if len(c.base.Coordinators) == 0 {
		c.offsetsPartitions = r.OffsetsTopicNumPartitions
		if c.offsetsPartitions <= 0 {
			c.offsetsPartitions = metadata.DefaultOffsetsTopicPartitions
		}
	}
	return applyResult{}
}

// registerResult is RegisterBroker's outcome.
type registerResult struct {
	epoch int64
}

func (f *fsm) applyRegisterBroker(c *change, r *pb.RegisterBrokerRecord) applyResult {
	old := c.broker(r.BrokerId)
	if old != nil && old.Incarnation == r.Incarnation {
		// A retried registration of the same process.
		return applyResult{value: registerResult{epoch: old.Epoch}}
	}
	b := &pb.BrokerState{
		Id:          r.BrokerId,
		Listeners:   r.Listeners,
		Rack:        r.Rack,
		Incarnation: r.Incarnation,
		Epoch:       int64(c.offset),
		Fenced:      true, // until its first heartbeat shows it has caught up
	}
	c.setBroker(b)
	if old != nil {
		// A new process: whatever the old one held is gone from its memory.
		f.fenceEffects(c, []int32{r.BrokerId})
	}
	return applyResult{value: registerResult{epoch: b.Epoch}}
}

func (f *fsm) applyFenceBrokers(c *change, r *pb.FenceBrokersRecord) applyResult {
	var fenced []int32
	for i, id := range r.BrokerIds {
		b := c.broker(id)
		if b == nil || b.Fenced || i >= len(r.BrokerEpochs) || b.Epoch != r.BrokerEpochs[i] {
			continue // already fenced, or re-registered since the decision
		}
		nb := proto.CloneOf(b)
		nb.Fenced, nb.InControlledShutdown = true, false
		c.setBroker(nb)
		fenced = append(fenced, id)
	}
	slices.Sort(fenced)
	f.fenceEffects(c, fenced)
	return applyResult{}
}

func (f *fsm) applyUnfenceBroker(c *change, r *pb.UnfenceBrokerRecord) applyResult {
	b := c.broker(r.BrokerId)
	switch {
	case b == nil:
		return applyResult{err: kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", r.BrokerId)}
	case b.Epoch != r.BrokerEpoch:
		return applyResult{err: kafkaErrorf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", r.BrokerId, b.Epoch, r.BrokerEpoch)}
	case !b.Fenced:
		return applyResult{}
	}
	nb := proto.CloneOf(b)
	nb.Fenced = false
	c.setBroker(nb)
	f.electLeaders(c, false)
	return applyResult{}
}

// electionResults is an explicit election's outcome: nil or a Kafka error per partition.
type electionResults map[string]map[int32]error

func (r electionResults) set(topic string, idx int32, err error) {
	if r[topic] == nil {
		r[topic] = map[int32]error{}
	}
	r[topic][idx] = err
}

func (f *fsm) applyControlledShutdown(c *change, r *pb.ControlledShutdownRecord) applyResult {
	b := c.broker(r.BrokerId)
	switch {
	case b == nil:
		return applyResult{err: kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", r.BrokerId)}
	case b.Epoch != r.BrokerEpoch:
		return applyResult{err: kafkaErrorf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", r.BrokerId, b.Epoch, r.BrokerEpoch)}
	case b.Fenced:
		return applyResult{} // already out of every leadership and ISR it could leave
	}
	if !b.InControlledShutdown {
		nb := proto.CloneOf(b)
		nb.InControlledShutdown = true
		c.setBroker(nb)
	}
	id := r.BrokerId
	for _, name := range c.topicNames() {
		n := c.partitionCount(name)
		for idx := int32(0); idx < n; idx++ {
			p, _ := c.partition(name, idx)
			if p.Leader != id && !slices.Contains(p.Isr, id) {
				continue
			}
			isr := slices.Clone(p.Isr)
			if i := slices.Index(isr, id); i >= 0 && len(isr) > 1 {
				isr = slices.Delete(isr, i, i+1)
			}
			leader := p.Leader
			if leader == id {
				// Only a clean move: the broker is alive and keeps leading a partition no
				// other ISR member can take.
				if leader, _ = chooseLeaderFrom(c, p, isr, false); leader < 0 {
					leader, isr = id, p.Isr
				}
			}
			f.setPartitionState(c, name, p, leader, isr)
		}
	}
	return applyResult{}
}

// leadsMovable reports whether a broker leads a partition that another eligible ISR
// member could lead: a broker in controlled shutdown is told to go once it leads none.
func (f *fsm) leadsMovable(id int32) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := newChange(f, f.img.Offset+1)
	for _, t := range f.img.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != id {
				continue
			}
			for _, r := range p.ISR {
				if r != id && c.eligible(r) {
					return true
				}
			}
		}
	}
	return false
}

func (f *fsm) applyElectLeaders(c *change, r *pb.ElectLeadersRecord) applyResult {
	switch r.Type {
	case pb.ElectionType_ELECTION_TYPE_LEGACY:
		f.electLeaders(c, true)
		return applyResult{}
	case pb.ElectionType_ELECTION_TYPE_LEADERLESS:
		f.electLeaders(c, false)
		return applyResult{}
	case pb.ElectionType_ELECTION_TYPE_PREFERRED, pb.ElectionType_ELECTION_TYPE_UNCLEAN:
	default:
		return applyResult{err: kafkaErrorf(kerr.InvalidRequest, "unknown election type %d", r.Type)}
	}
	res := electionResults{}
	if r.AllPartitions {
		for _, name := range c.topicNames() {
			n := c.partitionCount(name)
			for idx := int32(0); idx < n; idx++ {
				// As Kafka does for a request naming no partitions, only the partitions an
				// election was attempted for are reported.
				if err := f.electOne(c, name, idx, r.Type); !errors.Is(err, kerr.ElectionNotNeeded) {
					res.set(name, idx, err)
				}
			}
		}
		return applyResult{value: res}
	}
	for _, tp := range r.Partitions {
		for _, idx := range tp.Partitions {
			if !c.partitionExists(tp.Topic, idx) {
				res.set(tp.Topic, idx, kafkaErrorf(kerr.UnknownTopicOrPartition, "partition %s-%d does not exist", tp.Topic, idx))
				continue
			}
			res.set(tp.Topic, idx, f.electOne(c, tp.Topic, idx, r.Type))
		}
	}
	return applyResult{value: res}
}

// electOne runs an explicit PREFERRED or UNCLEAN election for one existing partition.
func (f *fsm) electOne(c *change, topic string, idx int32, typ pb.ElectionType) error {
	p, _ := c.partition(topic, idx)
	if typ == pb.ElectionType_ELECTION_TYPE_PREFERRED {
		if len(p.Replicas) == 0 {
			return kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d has no replicas", topic, idx)
		}
		pref := p.Replicas[0]
		switch {
		case p.Leader == pref:
			return kafkaErrorf(kerr.ElectionNotNeeded, "%s-%d is led by its preferred replica %d", topic, idx, pref)
		case !c.eligible(pref) || !slices.Contains(p.Isr, pref):
			return kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d: preferred replica %d is fenced, shutting down or not in the ISR %v",
				topic, idx, pref, p.Isr)
		}
		f.setPartitionState(c, topic, p, pref, p.Isr)
		return nil
	}
	if p.Leader >= 0 && c.alive(p.Leader) {
		return kafkaErrorf(kerr.ElectionNotNeeded, "%s-%d has leader %d", topic, idx, p.Leader)
	}
	// An explicit unclean election may take a replica outside the ISR whatever
	// unclean.leader.election.enable says, as Kafka's does.
	leader, isr := chooseLeaderFrom(c, p, p.Isr, true)
	if leader < 0 {
		return kafkaErrorf(kerr.EligibleLeadersNotAvailable, "%s-%d: no live replica among %v", topic, idx, p.Replicas)
	}
	f.setPartitionState(c, topic, p, leader, isr)
	return nil
}

// uncleanAllowed resolves unclean.leader.election.enable for a topic: its own config, else
// the cluster default from the latest leader-change record.
func (f *fsm) uncleanAllowed(c *change, topic string) bool {
	if v, ok := c.topicConfigs(topic)[topicconfig.UncleanLeaderElectionEnable]; ok {
		return v == "true"
	}
	return f.unclean
}

// fenceEffects takes the fenced brokers (ascending) out of the partitions they were in:
// each leaves every ISR unless it is the last member, and each partition it led gets a new
// leader from the ISR with a bumped leader epoch, or none (leader -1) when no ISR member is
// eligible and unclean election is off.
func (f *fsm) fenceEffects(c *change, fenced []int32) {
	if len(fenced) == 0 {
		return
	}
	for _, name := range c.topicNames() {
		n := c.partitionCount(name)
		for idx := int32(0); idx < n; idx++ {
			p, _ := c.partition(name, idx)
			touched := slices.Contains(fenced, p.Leader)
			for _, id := range p.Isr {
				touched = touched || slices.Contains(fenced, id)
			}
			if !touched {
				continue
			}
			isr := slices.Clone(p.Isr)
			for _, id := range fenced {
				if i := slices.Index(isr, id); i >= 0 && len(isr) > 1 {
					isr = slices.Delete(isr, i, i+1)
				}
			}
			leader := p.Leader
			if !c.alive(leader) {
				leader, isr = f.chooseLeader(c, name, p, isr)
			}
			f.setPartitionState(c, name, p, leader, isr)
		}
	}
}

// electLeaders gives leaderless partitions a leader when one is eligible, and, with
// preferred set, moves leadership back to each partition's preferred replica when it is
// eligible and in the ISR.
func (f *fsm) electLeaders(c *change, preferred bool) {
	for _, name := range c.topicNames() {
		n := c.partitionCount(name)
		for idx := int32(0); idx < n; idx++ {
			p, _ := c.partition(name, idx)
			leader, isr := p.Leader, p.Isr
			switch {
			case leader < 0 || !c.alive(leader):
				leader, isr = f.chooseLeader(c, name, p, p.Isr)
			case preferred && len(p.Replicas) > 0 && p.Replicas[0] != leader &&
				c.eligible(p.Replicas[0]) && slices.Contains(p.Isr, p.Replicas[0]):
				leader = p.Replicas[0]
			default:
				continue
			}
			f.setPartitionState(c, name, p, leader, isr)
		}
	}
}

// chooseLeader picks the first eligible ISR member in replica order; failing that, with
// unclean election allowed, the first eligible replica, which becomes the whole ISR.
func (f *fsm) chooseLeader(c *change, topic string, p *pb.PartitionState, isr []int32) (int32, []int32) {
	return chooseLeaderFrom(c, p, isr, f.uncleanAllowed(c, topic))
}

// chooseLeaderFrom picks among p's replicas. An unclean election never picks a replica a
// reassignment is adding: it may hold nothing yet.
func chooseLeaderFrom(c *change, p *pb.PartitionState, isr []int32, unclean bool) (int32, []int32) {
	for _, r := range p.Replicas {
		if slices.Contains(isr, r) && c.eligible(r) {
			return r, isr
		}
	}
	if unclean {
		for _, r := range p.Replicas {
			if c.eligible(r) && !slices.Contains(p.AddingReplicas, r) {
				return r, []int32{r}
			}
		}
	}
	return -1, isr
}

// setPartitionState records a partition's new leader and ISR when they differ, bumping the
// partition epoch, and the leader epoch when the leader changes.
func (f *fsm) setPartitionState(c *change, topic string, p *pb.PartitionState, leader int32, isr []int32) {
	if leader == p.Leader && slices.Equal(isr, p.Isr) {
		return
	}
	f.bumpPartitionState(c, topic, p, leader, isr)
}

// bumpPartitionState writes the partition's new leader and ISR at the next partition
// epoch, even when neither changed.
func (f *fsm) bumpPartitionState(c *change, topic string, p *pb.PartitionState, leader int32, isr []int32) {
	np := &pb.PartitionState{
		Index:          p.Index,
		Replicas:       p.Replicas,
		Isr:            slices.Clone(isr),
		Leader:         leader,
		LeaderEpoch:    p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch + 1,

		AddingReplicas:   p.AddingReplicas,
		RemovingReplicas: p.RemovingReplicas,
	}
	// An ISR that now holds every target replica completes a reassignment in the same
	// change (fsm_reassign.go).
	completeReassignment(c, np)
	if np.Leader != p.Leader {
		np.LeaderEpoch++
	}
	c.setPartition(topic, np)
}

// electionNeeded reports whether an election of leaderless partitions (with preferred,
// also of preferred leaders everywhere) would change anything now.
func (f *fsm) electionNeeded(preferred bool) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := newChange(f, f.img.Offset+1)
	f.electLeaders(c, preferred)
	return len(c.parts) > 0
}

// imbalancedPartitions applies leader.imbalance.per.broker.percentage: for each broker,
// the partitions that prefer it (it is their first replica) but are led by another
// broker or by none, over all the partitions that prefer it; where that share is above
// pct percent, it returns those of the partitions whose preferred replica could lead now
// (unfenced, not shutting down, in the ISR), sorted.
func (f *fsm) imbalancedPartitions(pct int32) map[string][]int32 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := newChange(f, f.img.Offset+1)
	type tp struct {
		topic string
		idx   int32
	}
	preferring := map[int32]int{}
	ledElsewhere := map[int32]int{}
	movable := map[int32][]tp{}
	for _, name := range slices.Sorted(maps.Keys(f.img.Topics)) {
		t := f.img.Topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Replicas) == 0 {
				continue
			}
			pref := p.Replicas[0]
			preferring[pref]++
			if p.Leader == pref {
				continue
			}
			ledElsewhere[pref]++
			if c.eligible(pref) && slices.Contains(p.ISR, pref) {
				movable[pref] = append(movable[pref], tp{name, p.Index})
			}
		}
	}
	var out map[string][]int32
	for id, n := range ledElsewhere {
		// n/preferring > pct/100, in integers.
		if int64(n)*100 <= int64(pct)*int64(preferring[id]) || len(movable[id]) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]int32{}
		}
		for _, m := range movable[id] {
			out[m.topic] = append(out[m.topic], m.idx)
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// leaderCounts counts, per broker, the partitions it leads and the replicas it holds.
func leaderCounts(im *metadata.Image) (leaders, replicas map[int32]int) {
	leaders, replicas = map[int32]int{}, map[int32]int{}
	for _, t := range im.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader >= 0 {
				leaders[p.Leader]++
			}
			for _, r := range p.Replicas {
				replicas[r]++
			}
		}
	}
	return leaders, replicas
}
