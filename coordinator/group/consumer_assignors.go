package group

import (
	"bytes"
	"maps"
	"slices"
	"strings"
)

// The server-side assignors of consumer groups (group.consumer.assignors). Both are
// deterministic in the group's state (members are taken in id order) so that a
// recomputation that sees nothing new changes nothing.
const (
	// UniformAssignor spreads all subscribed partitions evenly over the members,
	// keeping each partition where it is when balance allows (Kafka's UniformAssignor).
	UniformAssignor = "uniform"
	// RangeAssignor gives each member a contiguous range of every topic it subscribes
	// to, so that members co-partitioned topics land together (Kafka's RangeAssignor).
	RangeAssignor = "range"
)

// DefaultConsumerAssignors is group.consumer.assignors' default: the first is the one a
// group uses when no member asks for another.
var DefaultConsumerAssignors = []string{UniformAssignor, RangeAssignor}

// KnownConsumerAssignor reports whether name is an assignor Shale implements.
func KnownConsumerAssignor(name string) bool {
	return name == UniformAssignor || name == RangeAssignor
}

func assign(assignor string, cg *consumerGroup) map[string]assignment {
	if assignor == RangeAssignor {
		return assignRange(cg)
	}
	return assignUniform(cg)
}

// subscribersOf lists, per subscribed topic name, the members subscribed to it, in id
// order.
func subscribersOf(cg *consumerGroup) (names []string, subs map[string][]*consumerMember) {
	ids := slices.Sorted(maps.Keys(cg.members))
	names = slices.Sorted(maps.Keys(cg.topics))
	subs = map[string][]*consumerMember{}
	for _, name := range names {
		for _, id := range ids {
			if m := cg.members[id]; m.subscribes(name) {
				subs[name] = append(subs[name], m)
			}
		}
	}
	return names, subs
}

func emptyTargets(cg *consumerGroup) map[string]assignment {
	out := make(map[string]assignment, len(cg.members))
	for id := range cg.members {
		out[id] = assignment{}
	}
	return out
}

// assignRange: per topic, the subscribers in id order take contiguous ranges, the first
// partitions%members of them one partition more.
func assignRange(cg *consumerGroup) map[string]assignment {
	out := emptyTargets(cg)
	names, subs := subscribersOf(cg)
	for _, name := range names {
		ms := subs[name]
		if len(ms) == 0 {
			continue
		}
		t := cg.topics[name]
		n := int32(len(ms))
		per, extra := t.parts/n, t.parts%n
		p := int32(0)
		for i, m := range ms {
			k := per
			if int32(i) < extra {
				k++
			}
			for j := int32(0); j < k; j++ {
				out[m.id].add(tpKey{t.id, p})
				p++
			}
		}
	}
	return out
}

// assignUniform is a sticky balanced assignment over all subscribed partitions: each
// partition stays with its current target holder while that member is still subscribed
// and below its share, the rest go to the least loaded subscriber, and partitions then
// move from the most to the least loaded member that can take them until no move
// narrows the gap. With homogeneous subscriptions every member ends with the floor or
// the ceiling of partitions/members.
func assignUniform(cg *consumerGroup) map[string]assignment {
	out := emptyTargets(cg)
	names, subs := subscribersOf(cg)
	total := 0
	for _, name := range names {
		if len(subs[name]) > 0 {
			total += int(cg.topics[name].parts)
		}
	}
	if total == 0 || len(cg.members) == 0 {
		return out
	}
	ceil := (total + len(cg.members) - 1) / len(cg.members)
	load := func(id string) int { return out[id].size() }
	// previous holder of each partition in the last target
	prev := map[tpKey]string{}
	for id, a := range cg.target {
		a.each(func(k tpKey) { prev[k] = id })
	}
	var rest []tpKey
	for _, name := range names {
		ms := subs[name]
		if len(ms) == 0 {
			continue
		}
		t := cg.topics[name]
		for p := int32(0); p < t.parts; p++ {
			k := tpKey{t.id, p}
			if id, ok := prev[k]; ok {
				if m := cg.members[id]; m != nil && m.subscribes(name) && load(id) < ceil {
					out[id].add(k)
					continue
				}
			}
			rest = append(rest, k)
		}
	}
	topicName := map[topicID]string{}
	for _, name := range names {
		topicName[cg.topics[name].id] = name
	}
	for _, k := range rest {
		var best *consumerMember
		for _, m := range subs[topicName[k.topic]] {
			if best == nil || load(m.id) < load(best.id) {
				best = m
			}
		}
		out[best.id].add(k)
	}
	// Balance: move one partition at a time from a most loaded member to a least loaded
	// one subscribed to its topic. Each move lowers the sum of squared loads, so this
	// ends; the bound is a guard.
	ids := slices.Sorted(maps.Keys(cg.members))
	for range total * len(ids) {
		moved := false
		slices.SortStableFunc(ids, func(a, b string) int { return load(b) - load(a) })
		for _, from := range ids {
			for i := len(ids) - 1; i >= 0 && !moved; i-- {
				to := ids[i]
				if load(from)-load(to) < 2 {
					break
				}
				if k, ok := lastMovable(out[from], func(k tpKey) bool { return cg.members[to].subscribes(topicName[k.topic]) }); ok {
					removeTP(out[from], k)
					out[to].add(k)
					moved = true
				}
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	return out
}

// lastMovable is the last partition of a, in topic id and partition order, that ok
// accepts.
func lastMovable(a assignment, ok func(tpKey) bool) (tpKey, bool) {
	ids := slices.SortedFunc(maps.Keys(a), func(x, y topicID) int { return bytes.Compare(x[:], y[:]) })
	for i := len(ids) - 1; i >= 0; i-- {
		ps := a[ids[i]]
		for j := len(ps) - 1; j >= 0; j-- {
			if k := (tpKey{ids[i], ps[j]}); ok(k) {
				return k, true
			}
		}
	}
	return tpKey{}, false
}

func removeTP(a assignment, k tpKey) {
	ps := a[k.topic]
	if i, ok := slices.BinarySearch(ps, k.part); ok {
		a[k.topic] = slices.Delete(ps, i, i+1)
		if len(a[k.topic]) == 0 {
			delete(a, k.topic)
		}
	}
}

// ParseConsumerAssignors parses group.consumer.assignors: a comma-separated list of
// assignor names, each one Shale implements.
func ParseConsumerAssignors(s string) ([]string, bool) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !KnownConsumerAssignor(a) {
			return nil, false
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, len(out) > 0
}
