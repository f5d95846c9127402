package main

import (
	"strings"
	"testing"
)

func TestTopicElectLeaders(t *testing.T) {
	b := startKfake(t)
	must(t, "", "topic", "create", b, "--topic", "orders", "--partitions", "3")
	must(t, "", "topic", "create", b, "--topic", "logs", "--partitions", "1")

	// kfake elects on every request, so each named partition reports an election.
	if got := must(t, "", "topic", "elect-leaders", b, "--topic", "orders", "--election-type", "preferred"); got !=
		"Successfully completed leader election (PREFERRED) for partitions orders-0, orders-1, orders-2\n" {
		t.Errorf("whole topic: %q", got)
	}
	if got := must(t, "", "topic", "elect-leaders", b, "--topic", "orders", "--partition", "1", "--election-type", "unclean"); got !=
		"Successfully completed leader election (UNCLEAN) for partitions orders-1\n" {
		t.Errorf("one partition: %q", got)
	}
	got := must(t, "", "topic", "elect-leaders", b, "--all-topic-partitions", "--election-type", "preferred")
	for _, want := range []string{"logs-0", "orders-0", "orders-2"} {
		if !strings.Contains(got, want) {
			t.Errorf("all partitions: %q lacks %s", got, want)
		}
	}
	r := shale(t, "", "topic", "elect-leaders", b, "--topic", "orders", "--partition", "7", "--election-type", "preferred")
	if r.code != exitFailed || !strings.Contains(r.stderr, "orders-7: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("unknown partition: %+v", r)
	}

	for _, args := range [][]string{
		{"--topic", "orders"}, // no election type
		{"--topic", "orders", "--election-type", "dirty"},
		{"--election-type", "preferred"}, // nothing named
		{"--all-topic-partitions", "--topic", "orders", "--election-type", "preferred"},
		{"--topic", "orders", "--topic", "logs", "--partition", "0", "--election-type", "preferred"},
	} {
		if r := shale(t, "", append([]string{"topic", "elect-leaders", b}, args...)...); r.code != exitUsage {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
