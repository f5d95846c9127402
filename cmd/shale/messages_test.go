package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestMessagesAgainstShale checks what a user reads from the commands against a Shale
// node: each part of an error once, failures that say what is wrong with a non-zero
// exit, and warnings where a request is quietly adjusted.
func TestMessagesAgainstShale(t *testing.T) {
	b, _ := startServe(t)

	if got := must(t, "", "topic", "create", b, "--topic", "small", "--partitions", "1"); got != "Created topic small with 1 partition, replication factor 1.\n" {
		t.Errorf("create printed %q", got)
	}
	must(t, "", "topic", "create", b, "--topic", "t1", "--partitions", "5")

	r := shale(t, "", "topic", "alter", b, "--topic", "t1", "--partitions", "2")
	want := "shale topic alter: set partitions of topic t1: " + kerr.InvalidPartitions.Error() + `: topic "t1" has 5 partitions, more than the requested 2` + "\n"
	if r.code != exitFailed || r.stderr != want {
		t.Errorf("lowering the partition count: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}

	for _, flag := range []string{"--add-config=no.such.key=1", "--delete-config=no.such.key"} {
		r := shale(t, "", "topic", "alter", b, "--topic", "t1", flag)
		if r.code != exitFailed || strings.Count(r.stderr, "INVALID_CONFIG") != 1 || !strings.Contains(r.stderr, `unknown topic config "no.such.key"`) {
			t.Errorf("alter %s: exit %d, stderr %q", flag, r.code, r.stderr)
		}
	}

	r = shale(t, "", "topic", "create", b, "--topic", "c", "--config", "retention.ms=soon")
	want = "shale topic create: create topic c: " + kerr.InvalidConfig.Error() + `: retention.ms: invalid value "soon": invalid syntax` + "\n"
	if r.code != exitFailed || r.stderr != want {
		t.Errorf("create with a bad config: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}

	r = shale(t, "", "group", "describe", b, "--group", "nosuch")
	if r.code != exitFailed || r.stdout != "" || r.stderr != "shale group describe: Consumer group 'nosuch' does not exist.\n" {
		t.Errorf("describe a group that does not exist: %+v", r)
	}

	r = shale(t, "", "consume", b, "--topic", "nosuchtopic", "--timeout", "1s")
	if r.code != exitFailed || r.stderr != "shale consume: topic nosuchtopic does not exist\n" {
		t.Errorf("consume a topic that does not exist: %+v", r)
	}

	must(t, "a\nb\n", "produce", b, "--topic", "small")
	must(t, "", "consume", b, "--topic", "small", "--group", "g", "--from-beginning", "--max-messages", "1")
	out := must(t, "", "group", "describe", b, "--group", "g")
	if !strings.HasPrefix(out, "Group g: state Empty, 0 members, coordinator 1\n") {
		t.Errorf("describe an empty group: %q", out)
	}

	r = shale(t, "", "group", "reset-offsets", b, "--group", "g", "--topic", "nosuch", "--to-earliest")
	if r.code != exitFailed || !strings.HasPrefix(r.stderr, "shale group reset-offsets: topic nosuch does not exist: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("reset the offsets of a topic that does not exist: %+v", r)
	}

	r = shale(t, "", "group", "reset-offsets", b, "--group", "g", "--topic", "small", "--to-offset", "7")
	if r.code != exitOK || !strings.Contains(r.stdout, "g      small  0          2\n") ||
		!strings.Contains(r.stderr, "warning: new offset (7) is higher than the latest offset of small-0; it will be set to 2.") {
		t.Errorf("reset beyond the end: %+v", r)
	}
}
