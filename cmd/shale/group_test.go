package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestGroupCommands(t *testing.T) {
	b := startKfake(t, kfake.SeedTopics(1, "t"))
	must(t, "a\nb\nc\nd\n", "produce", b, "--topic", "t")
	must(t, "", "consume", b, "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "3")

	if out := must(t, "", "group", "list", b); !strings.Contains(out, "g ") {
		t.Errorf("list: %q", out)
	}
	out := must(t, "", "group", "describe", b, "--group", "g")
	if !strings.Contains(out, "Total lag: 1") {
		t.Errorf("describe after consuming 3 of 4: %q", out)
	}
	plan := must(t, "", "group", "reset-offsets", b, "--group", "g", "--topic", "t", "--to-earliest")
	if !strings.Contains(plan, "Dry run") {
		t.Errorf("reset without --execute: %q", plan)
	}
	if out := must(t, "", "group", "describe", b, "--group", "g"); !strings.Contains(out, "Total lag: 1") {
		t.Errorf("a dry run changed offsets: %q", out)
	}
	must(t, "", "group", "reset-offsets", b, "--group", "g", "--topic", "t", "--to-earliest", "--execute")
	if out := must(t, "", "group", "describe", b, "--group", "g"); !strings.Contains(out, "Total lag: 4") {
		t.Errorf("after reset to earliest: %q", out)
	}
	if r := shale(t, "", "group", "reset-offsets", b, "--group", "g", "--topic", "t"); r.code != exitUsage {
		t.Errorf("reset without a target: exit %d", r.code)
	}
	must(t, "", "group", "delete", b, "--group", "g")
	if out := must(t, "", "group", "list", b); strings.Contains(out, "g ") {
		t.Errorf("group still listed after delete: %q", out)
	}
}
