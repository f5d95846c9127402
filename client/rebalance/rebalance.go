// Package rebalance plans partition reassignments that even out replicas and preferred
// leaders over brokers, and spread each partition over racks when brokers have them,
// with as few replica moves as it can: what `shale cluster rebalance` and `shale broker
// drain` apply through AlterPartitionReassignments. The planner is pure: it reads an
// assignment and returns a new one, and touches no cluster.
//
// The plan is built in steps, each of which only moves a replica when that improves what
// the step is about, so a cluster that is already balanced gets an empty plan:
//  1. replicas on brokers being drained (or gone) move to the least loaded broker that
//     does not hold the partition, preferring a rack the partition does not use yet;
//  2. a partition that uses fewer racks than it could moves a replica from a rack it
//     uses twice to the least loaded broker of a rack it does not use;
//  3. while one broker holds at least two replicas more than another, a replica moves
//     from the most to the least loaded broker, choosing a partition the target does not
//     hold and whose rack spread the move does not narrow;
//  4. preferred leaders (the first replica) are evened out by reordering replicas within
//     a partition, which moves no data.
package rebalance

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Broker is a broker that may hold replicas.
type Broker struct {
	ID   int32
	Rack string // "" when broker.rack is unset
}

// Partition is one partition's replica assignment; Replicas[0] is its preferred leader.
type Partition struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// Options adjust a plan.
type Options struct {
	// Drain lists brokers that must end up holding no replica (shale broker drain).
	Drain []int32
}

// Move is one partition's change of assignment.
type Move struct {
	Topic     string
	Partition int32
	From, To  []int32
}

// Moved lists the brokers a move adds to the partition: the replicas that are copied.
func (m Move) Moved() []int32 {
	var out []int32
	for _, b := range m.To {
		if !slices.Contains(m.From, b) {
			out = append(out, b)
		}
	}
	return out
}

// Plan is the outcome of Compute.
type Plan struct {
	// Moves are the partitions whose assignment changes, sorted by topic and partition.
	Moves []Move
	// ReplicaMoves counts the replicas copied to a new broker (a reordering counts none).
	ReplicaMoves int
	// Replicas and Leaders count, per broker, the replicas held and the partitions
	// preferring it as leader, before and after the plan.
	ReplicasBefore, ReplicasAfter map[int32]int
	LeadersBefore, LeadersAfter   map[int32]int
}

// Compute plans a rebalance of partitions over brokers. Replicas on brokers that are not
// in brokers (unregistered) are moved as if drained. It fails when a partition has more
// replicas than there are brokers to hold them.
func Compute(brokers []Broker, partitions []Partition, opts Options) (Plan, error) {
	p := newPlanner(brokers, partitions, opts)
	if len(p.eligible) == 0 {
		return Plan{}, errors.New("rebalance: no broker may hold replicas")
	}
	for _, part := range p.parts {
		if len(part.Replicas) > len(p.eligible) {
			return Plan{}, fmt.Errorf("rebalance: %s-%d has %d replicas but only %d brokers may hold them",
				part.Topic, part.Partition, len(part.Replicas), len(p.eligible))
		}
		if dup := duplicate(part.Replicas); dup >= 0 {
			return Plan{}, fmt.Errorf("rebalance: %s-%d lists broker %d twice", part.Topic, part.Partition, dup)
		}
	}
	plan := Plan{ReplicasBefore: p.replicaCounts(), LeadersBefore: p.leaderCounts()}
	p.evacuate()
	p.spreadRacks()
	p.balanceReplicas()
	p.balanceLeaders()
	plan.ReplicasAfter, plan.LeadersAfter = p.replicaCounts(), p.leaderCounts()
	for i, part := range p.parts {
		orig := partitions[p.order[i]]
		if slices.Equal(orig.Replicas, part.Replicas) {
			continue
		}
		m := Move{Topic: part.Topic, Partition: part.Partition, From: slices.Clone(orig.Replicas), To: slices.Clone(part.Replicas)}
		plan.ReplicaMoves += len(m.Moved())
		plan.Moves = append(plan.Moves, m)
	}
	return plan, nil
}

func duplicate(rs []int32) int32 {
	for i, r := range rs {
		if slices.Contains(rs[i+1:], r) {
			return r
		}
	}
	return -1
}

type planner struct {
	eligible []int32 // sorted
	rack     map[int32]string
	racks    int // distinct racks among eligible brokers; 0 without racks
	parts    []Partition
	order    []int // parts[i] came from partitions[order[i]]
	count    map[int32]int
}

func newPlanner(brokers []Broker, partitions []Partition, opts Options) *planner {
	p := &planner{rack: map[int32]string{}, count: map[int32]int{}}
	rackSet := map[string]bool{}
	for _, b := range brokers {
		p.rack[b.ID] = b.Rack
		if slices.Contains(opts.Drain, b.ID) || slices.Contains(p.eligible, b.ID) {
			continue
		}
		p.eligible = append(p.eligible, b.ID)
		if b.Rack != "" {
			rackSet[b.Rack] = true
		}
	}
	slices.Sort(p.eligible)
	p.racks = len(rackSet)
	for _, b := range p.eligible {
		p.count[b] = 0
	}
	// A fixed order makes the plan deterministic whatever order partitions came in.
	p.order = make([]int, len(partitions))
	for i := range p.order {
		p.order[i] = i
	}
	slices.SortFunc(p.order, func(a, b int) int {
		pa, pb := partitions[a], partitions[b]
		return cmp.Or(cmp.Compare(pa.Topic, pb.Topic), cmp.Compare(pa.Partition, pb.Partition))
	})
	for _, i := range p.order {
		part := partitions[i]
		part.Replicas = slices.Clone(part.Replicas)
		p.parts = append(p.parts, part)
		for _, r := range part.Replicas {
			if p.isEligible(r) {
				p.count[r]++
			}
		}
	}
	return p
}

func (p *planner) isEligible(b int32) bool {
	_, ok := slices.BinarySearch(p.eligible, b)
	return ok
}

func (p *planner) replicaCounts() map[int32]int {
	out := map[int32]int{}
	for _, part := range p.parts {
		for _, r := range part.Replicas {
			out[r]++
		}
	}
	for _, b := range p.eligible {
		out[b] += 0
	}
	return out
}

func (p *planner) leaderCounts() map[int32]int {
	out := map[int32]int{}
	for _, b := range p.eligible {
		out[b] = 0
	}
	for _, part := range p.parts {
		if len(part.Replicas) > 0 {
			out[part.Replicas[0]]++
		}
	}
	return out
}

// racksOf counts the replicas of rs per rack, leaving out position skip (-1: none).
func (p *planner) racksOf(rs []int32, skip int) map[string]int {
	out := map[string]int{}
	for i, r := range rs {
		if i != skip {
			out[p.rack[r]]++
		}
	}
	return out
}

// leastLoaded returns the eligible broker with the fewest replicas (ties by id) among
// those ok accepts, or -1.
func (p *planner) leastLoaded(ok func(int32) bool) int32 {
	best := int32(-1)
	for _, b := range p.eligible {
		if ok(b) && (best < 0 || p.count[b] < p.count[best]) {
			best = b
		}
	}
	return best
}

// replace puts broker to at position i of partition part.
func (p *planner) replace(part *Partition, i int, to int32) {
	if from := part.Replicas[i]; p.isEligible(from) {
		p.count[from]--
	}
	part.Replicas[i] = to
	p.count[to]++
}

// evacuate moves every replica off brokers that may not hold one.
func (p *planner) evacuate() {
	for pi := range p.parts {
		part := &p.parts[pi]
		for i, r := range part.Replicas {
			if p.isEligible(r) {
				continue
			}
			used := p.racksOf(part.Replicas, i)
			notHeld := func(b int32) bool { return !slices.Contains(part.Replicas, b) }
			to := p.leastLoaded(func(b int32) bool { return notHeld(b) && (p.racks == 0 || used[p.rack[b]] == 0) })
			if to < 0 {
				to = p.leastLoaded(notHeld)
			}
			p.replace(part, i, to)
		}
	}
}

// spreadRacks moves replicas so that each partition uses as many racks as it can.
func (p *planner) spreadRacks() {
	if p.racks < 2 {
		return
	}
	for pi := range p.parts {
		part := &p.parts[pi]
		for {
			used := p.racksOf(part.Replicas, -1)
			if len(used) >= min(len(part.Replicas), p.racks) {
				break
			}
			// The most loaded replica in a rack the partition uses more than once.
			from := -1
			for i, r := range part.Replicas {
				if used[p.rack[r]] > 1 && (from < 0 || p.count[r] > p.count[part.Replicas[from]]) {
					from = i
				}
			}
			to := p.leastLoaded(func(b int32) bool { return used[p.rack[b]] == 0 })
			if from < 0 || to < 0 {
				break
			}
			p.replace(part, from, to)
		}
	}
}

// rackSpreadKept reports whether putting broker to at position i keeps the number of
// racks partition rs uses from falling.
func (p *planner) rackSpreadKept(rs []int32, i int, to int32) bool {
	if p.racks < 2 {
		return true
	}
	before := len(p.racksOf(rs, -1))
	after := p.racksOf(rs, i)
	after[p.rack[to]]++
	return len(after) >= before
}

// balanceReplicas moves replicas from the most to the least loaded brokers until no
// broker holds two more than another, or no move is possible.
func (p *planner) balanceReplicas() {
	for {
		brokers := slices.Clone(p.eligible)
		slices.SortStableFunc(brokers, func(a, b int32) int { return cmp.Compare(p.count[b], p.count[a]) })
		moved := false
	search:
		for _, hi := range brokers {
			for j := len(brokers) - 1; j >= 0; j-- {
				lo := brokers[j]
				if p.count[hi]-p.count[lo] < 2 {
					break
				}
				// Prefer moving a follower: the leader's replica set stays put.
				for _, wantFollower := range []bool{true, false} {
					for pi := range p.parts {
						part := &p.parts[pi]
						i := slices.Index(part.Replicas, hi)
						if i < 0 || (i > 0) != wantFollower || slices.Contains(part.Replicas, lo) || !p.rackSpreadKept(part.Replicas, i, lo) {
							continue
						}
						p.replace(part, i, lo)
						moved = true
						break search
					}
				}
			}
		}
		if !moved {
			return
		}
	}
}

// balanceLeaders evens out preferred leaders by moving another replica of a partition to
// its front, until no broker is preferred by two partitions more than another one that
// could lead them.
func (p *planner) balanceLeaders() {
	lead := p.leaderCounts()
	for range len(p.parts) * len(p.eligible) { // each swap lowers the imbalance; this only bounds it
		best, bestGain := -1, 0
		var bestTo int
		for pi, part := range p.parts {
			if len(part.Replicas) < 2 {
				continue
			}
			l := part.Replicas[0]
			for i := 1; i < len(part.Replicas); i++ {
				if gain := lead[l] - lead[part.Replicas[i]]; gain >= 2 && gain > bestGain {
					best, bestGain, bestTo = pi, gain, i
				}
			}
		}
		if best < 0 {
			return
		}
		rs := p.parts[best].Replicas
		lead[rs[0]]--
		lead[rs[bestTo]]++
		rs[0], rs[bestTo] = rs[bestTo], rs[0]
	}
}

// Brokers lists the ids in counts, sorted, for printing a plan's summary.
func Brokers(counts ...map[int32]int) []int32 {
	set := map[int32]bool{}
	for _, c := range counts {
		for b := range maps.Keys(c) {
			set[b] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
