package controller

// placer assigns replicas to brokers greedily, partition by partition: each partition's
// leader (its first replica) is the eligible broker leading the fewest partitions, the
// other replicas the brokers holding the fewest replicas, and when brokers have racks no
// two replicas of a partition share a rack while an unused rack is left. Counts include
// every existing topic, so leaders and replicas stay balanced across topics, not only
// within one. Ties go round-robin from a seed the leader picked, so the result is
// deterministic for the FSM.
type placer struct {
	brokers  []int32 // eligible brokers, sorted
	racks    map[int32]string
	rackful  bool
	leaders  map[int32]int
	replicas map[int32]int
}

func newPlacer(brokers []int32, racks map[int32]string, leaders, replicas map[int32]int) *placer {
	p := &placer{brokers: brokers, racks: racks, leaders: leaders, replicas: replicas}
	for _, b := range brokers {
		if racks[b] != "" {
			p.rackful = true
		}
	}
	return p
}

// place returns the replicas for partitions first..first+count-1, counting them in.
func (p *placer) place(count, rf int, first int32, seed uint32) [][]int32 {
	n := len(p.brokers)
	out := make([][]int32, count)
	for i := range count {
		rot := (int(seed%uint32(n)) + int(first) + i) % n
		chosen := make([]int32, 0, rf)
		usedRacks := map[string]bool{}
		for j := range rf {
			best := -1
			rackLeft := p.rackful && p.unusedRackLeft(chosen, usedRacks)
			for pos := range n {
				bi := (rot + pos) % n
				b := p.brokers[bi]
				if contains32(chosen, b) || rackLeft && usedRacks[p.racks[b]] {
					continue
				}
				if best < 0 || p.better(b, p.brokers[best], j == 0) {
					best = bi
				}
			}
			b := p.brokers[best]
			chosen = append(chosen, b)
			usedRacks[p.racks[b]] = true
			p.replicas[b]++
			if j == 0 {
				p.leaders[b]++
			}
		}
		out[i] = chosen
	}
	return out
}

// better reports whether a is a better pick than b; scanning in rotated order, ties keep
// the earlier broker.
func (p *placer) better(a, b int32, leader bool) bool {
	if leader && p.leaders[a] != p.leaders[b] {
		return p.leaders[a] < p.leaders[b]
	}
	return p.replicas[a] < p.replicas[b]
}

func (p *placer) unusedRackLeft(chosen []int32, used map[string]bool) bool {
	for _, b := range p.brokers {
		if !contains32(chosen, b) && !used[p.racks[b]] {
			return true
		}
	}
	return false
}

func contains32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
