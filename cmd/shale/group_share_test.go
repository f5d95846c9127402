package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupCommandsShareGroup runs a franz-go share consumer against kfake's share
// groups and checks that `group list` and `group describe` show it as a share group.
func TestGroupCommandsShareGroup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "q"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := "--bootstrap-server=" + strings.Join(c.ListenAddrs(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ClientID("worker"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// share.auto.offset.reset is latest: produce until the member, once it has joined,
	// has consumed three records.
	for n := 0; n < 3 && ctx.Err() == nil; {
		must(t, "x\n", "produce", b, "--topic", "q")
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
		n += fs.NumRecords()
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}

	if out := must(t, "", "group", "list", b); !strings.Contains(out, "sg ") || !strings.Contains(out, "share") {
		t.Errorf("list: %q", out)
	}
	out := must(t, "", "group", "describe", b, "--group", "sg")
	for _, want := range []string{"Share group sg: state Stable, 1 member", "assignor simple", "worker", "q[0]", "START-OFFSET"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	t.Logf("describe:\n%s", out)
	// Reset: the plan, then (the member gone) the share-partition start offset.
	cl.Close()
	plan := must(t, "", "group", "reset-offsets", b, "--group", "sg", "--topic", "q", "--to-earliest")
	if !strings.Contains(plan, "Dry run") {
		t.Errorf("reset without --execute: %q", plan)
	}
	if out := must(t, "", "group", "reset-offsets", b, "--group", "sg", "--topic", "q", "--to-earliest", "--execute"); !strings.Contains(out, "Share-partition start offsets reset") {
		t.Errorf("reset: %q", out)
	}
	after := must(t, "", "group", "describe", b, "--group", "sg")
	for _, l := range lines(after) {
		if f := strings.Fields(l); len(f) == 8 && f[0] == "q" && f[2] != "0" {
			t.Errorf("start offset after the reset to earliest: %q", l)
		}
	}
	// --share makes a share group of a new group id.
	must(t, "", "group", "reset-offsets", b, "--group", "fresh", "--topic", "q", "--to-latest", "--share", "--execute")
	if out := must(t, "", "group", "describe", b, "--group", "fresh"); !strings.Contains(out, "Share group fresh: state Empty") {
		t.Errorf("describe the group the reset made: %q", out)
	}

	// kfake keeps the share-partition state, but not Shale's record counts.
	row := ""
	for _, l := range lines(out) {
		if strings.HasPrefix(l, "q ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) != 8 || f[2] == "-" || f[4] != "-" {
		t.Errorf("share partition row %q, want a start offset and no counts:\n%s", row, out)
	}
}
