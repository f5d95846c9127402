package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestScaleCommandUsage: the scaling commands refuse incomplete command lines before
// connecting anywhere.
func TestScaleCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"controller", "add", "--address", "h:1"}, // no node
		{"controller", "add", "--node", "4"},      // no address
		{"controller", "remove"},
		{"broker", "drain"},
		{"broker", "unregister"},
		{"broker", "unregister", "--node", "4", "extra"},
		{"cluster", "shuffle"},
	} {
		if r := shale(t, "", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	for _, cmd := range []string{"controller", "broker", "cluster"} {
		if out := must(t, "", "help", cmd); !strings.Contains(out, "Usage: shale "+cmd) {
			t.Errorf("help %s: %q", cmd, out)
		}
	}
}

// TestRebalanceDryRun: with RF 3 on three brokers every broker holds every partition, so
// the plan copies nothing and at most reorders replicas so that each broker is preferred
// leader of two of the six partitions.
func TestRebalanceDryRun(t *testing.T) {
	b := startKfake(t, kfake.NumBrokers(3), kfake.SeedTopics(-1))
	must(t, "", "topic", "create", b, "--topic", "t", "--partitions", "6", "--replication-factor", "3")
	out := must(t, "", "cluster", "rebalance", b, "--dry-run")
	t.Log(out)
	if !strings.Contains(out, "BROKER") || strings.Count(out, "6 -> 6") != 3 || strings.Count(out, "-> 2\n") != 3 ||
		(strings.Contains(out, "Plan:") && !strings.Contains(out, ", 0 replicas copied")) {
		t.Fatalf("dry run printed %q", out)
	}
}
