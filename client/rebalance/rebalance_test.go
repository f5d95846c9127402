package rebalance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func brokers(ids ...int32) []Broker {
	var out []Broker
	for _, id := range ids {
		out = append(out, Broker{ID: id})
	}
	return out
}

// roundRobin assigns n partitions of topic t with rf replicas over bs, leaders spread.
func roundRobin(t string, n, rf int, bs []int32) []Partition {
	var out []Partition
	for i := range n {
		var rs []int32
		for j := range rf {
			rs = append(rs, bs[(i+j)%len(bs)])
		}
		out = append(out, Partition{Topic: t, Partition: int32(i), Replicas: rs})
	}
	return out
}

// apply returns the assignment after plan.
func apply(parts []Partition, plan Plan) []Partition {
	out := make([]Partition, len(parts))
	for i, p := range parts {
		out[i] = Partition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)}
		for _, m := range plan.Moves {
			if m.Topic == p.Topic && m.Partition == p.Partition {
				out[i].Replicas = slices.Clone(m.To)
			}
		}
	}
	return out
}

// checkValid fails on a partition with a duplicate replica, a changed replication
// factor, or a replica on a broker outside allowed.
func checkValid(t *testing.T, before, after []Partition, allowed []int32) {
	t.Helper()
	for i, p := range after {
		if len(p.Replicas) != len(before[i].Replicas) {
			t.Fatalf("%s-%d: replication factor changed: %v -> %v", p.Topic, p.Partition, before[i].Replicas, p.Replicas)
		}
		if d := duplicate(p.Replicas); d >= 0 {
			t.Fatalf("%s-%d: broker %d twice in %v", p.Topic, p.Partition, d, p.Replicas)
		}
		for _, r := range p.Replicas {
			if !slices.Contains(allowed, r) {
				t.Fatalf("%s-%d: replica on broker %d, outside %v", p.Topic, p.Partition, r, allowed)
			}
		}
	}
}

func spread(counts map[int32]int, among []int32) int {
	lo, hi := -1, -1
	for _, b := range among {
		c := counts[b]
		if lo < 0 || c < lo {
			lo = c
		}
		if c > hi {
			hi = c
		}
	}
	return hi - lo
}

// TestNewBrokerGetsItsShare: three balanced brokers and an empty fourth. The plan moves
// exactly the fourth broker's share (the fewest possible moves: every move fills it),
// never two replicas of a partition onto one broker, and evens out leaders too.
func TestNewBrokerGetsItsShare(t *testing.T) {
	parts := roundRobin("t", 12, 3, []int32{1, 2, 3})
	plan, err := Compute(brokers(1, 2, 3, 4), parts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.ReplicaMoves != 9 {
		t.Fatalf("%d replica moves, want 9 (36 replicas over 4 brokers: 9 land on the new one)", plan.ReplicaMoves)
	}
	for _, m := range plan.Moves {
		if moved := m.Moved(); len(moved) > 1 || (len(moved) == 1 && moved[0] != 4) {
			t.Fatalf("move %+v copies to %v: only the new broker should receive replicas", m, moved)
		}
	}
	after := apply(parts, plan)
	checkValid(t, parts, after, []int32{1, 2, 3, 4})
	all := []int32{1, 2, 3, 4}
	if s := spread(plan.ReplicasAfter, all); s != 0 {
		t.Fatalf("replicas after: %v", plan.ReplicasAfter)
	}
	if s := spread(plan.LeadersAfter, all); s != 0 {
		t.Fatalf("leaders after: %v", plan.LeadersAfter)
	}
}

// TestBalancedClusterIsLeftAlone: a plan computed on a balanced cluster, and a plan
// computed on the result of a plan, are empty.
func TestBalancedClusterIsLeftAlone(t *testing.T) {
	parts := roundRobin("t", 12, 3, []int32{1, 2, 3, 4})
	plan, err := Compute(brokers(1, 2, 3, 4), parts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Moves) != 0 {
		t.Fatalf("a balanced cluster got %d moves: %+v", len(plan.Moves), plan.Moves)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		bs, parts := randomCluster(rng, false)
		plan, err := Compute(bs, parts, Options{})
		if err != nil {
			t.Fatal(err)
		}
		again, err := Compute(bs, apply(parts, plan), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Moves) != 0 {
			t.Fatalf("trial %d: a second plan moves %d partitions: %+v", trial, len(again.Moves), again.Moves)
		}
	}
}

// randomCluster is 3-7 brokers (with two or three racks when racks), a few topics of
// random sizes and replication factors, placed unevenly.
func randomCluster(rng *rand.Rand, racks bool) ([]Broker, []Partition) {
	n := 3 + rng.IntN(5)
	var bs []Broker
	var ids []int32
	for i := range n {
		b := Broker{ID: int32(i + 1)}
		if racks {
			b.Rack = fmt.Sprintf("r%d", i%(2+rng.IntN(2)))
		}
		bs = append(bs, b)
		ids = append(ids, b.ID)
	}
	var parts []Partition
	for ti := range 1 + rng.IntN(4) {
		rf := 1 + rng.IntN(3)
		// Crowd the replicas onto the first brokers.
		crowd := ids[:max(rf, 1+rng.IntN(n))]
		for pi := range 1 + rng.IntN(20) {
			perm := rng.Perm(len(crowd))
			var rs []int32
			for _, k := range perm[:rf] {
				rs = append(rs, crowd[k])
			}
			parts = append(parts, Partition{Topic: fmt.Sprintf("t%d", ti), Partition: int32(pi), Replicas: rs})
		}
	}
	return bs, parts
}

// TestRandomClustersBalance: whatever the starting point, the result has no duplicate
// replica, keeps each replication factor, and leaves replica counts within one of each
// other.
func TestRandomClustersBalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		bs, parts := randomCluster(rng, false)
		plan, err := Compute(bs, parts, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, b := range bs {
			ids = append(ids, b.ID)
		}
		checkValid(t, parts, apply(parts, plan), ids)
		if s := spread(plan.ReplicasAfter, ids); s > 1 {
			t.Fatalf("trial %d: replicas after %v (before %v)", trial, plan.ReplicasAfter, plan.ReplicasBefore)
		}
	}
}

// TestDrain: a drained broker ends with nothing, the others share its replicas evenly,
// and only its replicas move.
func TestDrain(t *testing.T) {
	parts := roundRobin("t", 12, 3, []int32{1, 2, 3, 4})
	plan, err := Compute(brokers(1, 2, 3, 4), parts, Options{Drain: []int32{2}})
	if err != nil {
		t.Fatal(err)
	}
	after := apply(parts, plan)
	checkValid(t, parts, after, []int32{1, 3, 4})
	if plan.ReplicasAfter[2] != 0 || plan.LeadersAfter[2] != 0 {
		t.Fatalf("drained broker still holds %d replicas", plan.ReplicasAfter[2])
	}
	if plan.ReplicaMoves != plan.ReplicasBefore[2] {
		t.Fatalf("%d replica moves for the %d replicas of the drained broker", plan.ReplicaMoves, plan.ReplicasBefore[2])
	}
	if s := spread(plan.ReplicasAfter, []int32{1, 3, 4}); s != 0 {
		t.Fatalf("replicas after: %v", plan.ReplicasAfter)
	}
	// Too few brokers left for RF 3.
	if _, err := Compute(brokers(1, 2, 3), roundRobin("t", 3, 3, []int32{1, 2, 3}), Options{Drain: []int32{3}}); err == nil {
		t.Fatal("drained below the replication factor")
	}
}

// TestRacks: partitions crowded into one rack are spread over both, replica counts
// even out, and no later step narrows a partition's racks again.
func TestRacks(t *testing.T) {
	bs := []Broker{{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}}
	var parts []Partition
	for i := range 8 {
		rs := []int32{1, 2}
		if i%2 == 1 {
			rs = []int32{2, 1}
		}
		parts = append(parts, Partition{Topic: "t", Partition: int32(i), Replicas: rs})
	}
	plan, err := Compute(bs, parts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	after := apply(parts, plan)
	checkValid(t, parts, after, []int32{1, 2, 3, 4})
	rack := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}
	for _, p := range after {
		if rack[p.Replicas[0]] == rack[p.Replicas[1]] {
			t.Fatalf("%s-%d stays in one rack: %v", p.Topic, p.Partition, p.Replicas)
		}
	}
	if s := spread(plan.ReplicasAfter, []int32{1, 2, 3, 4}); s != 0 {
		t.Fatalf("replicas after: %v", plan.ReplicasAfter)
	}
	if plan.ReplicaMoves != 8 {
		t.Fatalf("%d replica moves; one per partition is the fewest that spreads them", plan.ReplicaMoves)
	}

	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		bs, parts := randomCluster(rng, true)
		plan, err := Compute(bs, parts, Options{})
		if err != nil {
			t.Fatal(err)
		}
		racks := map[string]bool{}
		rackOf := map[int32]string{}
		var ids []int32
		for _, b := range bs {
			racks[b.Rack], rackOf[b.ID] = true, b.Rack
			ids = append(ids, b.ID)
		}
		after := apply(parts, plan)
		checkValid(t, parts, after, ids)
		for _, p := range after {
			used := map[string]bool{}
			for _, r := range p.Replicas {
				used[rackOf[r]] = true
			}
			if len(used) < min(len(p.Replicas), len(racks)) {
				t.Fatalf("trial %d: %s-%d uses racks %v of %v: %v", trial, p.Topic, p.Partition, used, racks, p.Replicas)
			}
		}
	}
}

// TestLeadersOnly: replicas are even but every partition prefers broker 1; the plan only
// reorders replicas (no data moves) so that preferred leaders are even.
func TestLeadersOnly(t *testing.T) {
	var parts []Partition
	for i := range 6 {
		rs := []int32{1, 2, 3}
		if i%2 == 1 {
			rs = []int32{1, 3, 2}
		}
		parts = append(parts, Partition{Topic: "t", Partition: int32(i), Replicas: rs})
	}
	plan, err := Compute(brokers(1, 2, 3), parts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.ReplicaMoves != 0 {
		t.Fatalf("%d replica moves to balance leaders", plan.ReplicaMoves)
	}
	if s := spread(plan.LeadersAfter, []int32{1, 2, 3}); s != 0 {
		t.Fatalf("leaders after: %v", plan.LeadersAfter)
	}
	if len(plan.Moves) != 4 {
		t.Fatalf("%d partitions reordered, want 4 (6 leaders: 2 each)", len(plan.Moves))
	}
}

// TestRefusesBadInput: more replicas than brokers, a duplicated replica, no brokers.
func TestRefusesBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		bs    []Broker
		parts []Partition
	}{
		"rf above brokers": {brokers(1, 2), []Partition{{Topic: "t", Replicas: []int32{1, 2, 3}}}},
		"duplicate":        {brokers(1, 2, 3), []Partition{{Topic: "t", Replicas: []int32{1, 1}}}},
		"no brokers":       {nil, []Partition{{Topic: "t", Replicas: []int32{1}}}},
	} {
		if _, err := Compute(tc.bs, tc.parts, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
