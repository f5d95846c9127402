package cluster

import (
	"fmt"
	"testing"
)

// The failure tests end by checking what the log kept against what producers were told.
// The two checks live here so that every test holds the cluster to the same guarantee,
// stated once.

// checkExactlyOnceInOrder checks that every acknowledged record is in the log once, in
// the order it was acknowledged. acked and logs are indexed by partition; it returns how
// many records were acknowledged.
func checkExactlyOnceInOrder(t *testing.T, acked, logs [][]string) int {
	t.Helper()
	total := 0
	for p := range acked {
		total += len(acked[p])
		seen := map[string]int{}
		for i, v := range logs[p] {
			if _, dup := seen[v]; dup {
				t.Errorf("partition %d: %s duplicated at %d and %d", p, v, seen[v], i)
			}
			seen[v] = i
		}
		prev := -1
		for _, v := range acked[p] {
			i, ok := seen[v]
			if !ok {
				t.Errorf("partition %d: acknowledged record %s lost", p, v)
				continue
			}
			if i < prev {
				t.Errorf("partition %d: %s out of order", p, v)
			}
			prev = i
		}
	}
	return total
}

// checkCommittedOnce checks that a read_committed consumer saw (got) each committed
// value once and nothing else: no aborted record, no copy from a retried commit. Order is
// not checked, since got interleaves partitions.
func checkCommittedOnce(t *testing.T, got, committed []string) {
	t.Helper()
	copies := map[string]int{}
	for _, v := range got {
		copies[v]++
	}
	for _, v := range committed {
		if copies[v] != 1 {
			t.Errorf("%s: %d copies, want 1", v, copies[v])
		}
	}
	if len(got) != len(committed) {
		t.Fatalf("read_committed saw %d records, want the %d committed: %q", len(got), len(committed), got)
	}
}

// numbered is prefix-0 ... prefix-(n-1), the values the transaction tests produce.
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
