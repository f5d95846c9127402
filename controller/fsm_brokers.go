package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/topicconfig"

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
		nb.Fenced = true
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

func (f *fsm) applyElectLeaders(c *change) applyResult {
	f.electLeaders(c, true)
	return applyResult{}
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
			if !c.eligible(leader) {
				leader, isr = f.chooseLeader(c, name, p.Replicas, isr)
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
			case leader < 0 || !c.eligible(leader):
				leader, isr = f.chooseLeader(c, name, p.Replicas, p.Isr)
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
func (f *fsm) chooseLeader(c *change, topic string, replicas, isr []int32) (int32, []int32) {
	for _, r := range replicas {
		if slices.Contains(isr, r) && c.eligible(r) {
			return r, isr
		}
	}
	if f.uncleanAllowed(c, topic) {
		for _, r := range replicas {
			if c.eligible(r) {
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
	np := &pb.PartitionState{
		Index:          p.Index,
		Replicas:       p.Replicas,
		Isr:            slices.Clone(isr),
		Leader:         leader,
		LeaderEpoch:    p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch + 1,
	}
	if leader != p.Leader {
		np.LeaderEpoch++
	}
	c.setPartition(topic, np)
}

// electionNeeded reports whether an ElectLeadersRecord would change anything now.
func (f *fsm) electionNeeded() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := newChange(f, f.img.Offset+1)
	f.electLeaders(c, true)
	return len(c.parts) > 0
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
