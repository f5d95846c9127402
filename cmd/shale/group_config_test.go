package main

import (
	"strings"
	"testing"
)

func TestGroupConfigCommand(t *testing.T) {
	b, _ := startServe(t)
	must(t, "", "group", "config", b, "--group", "sg", "--set", "share.auto.offset.reset=earliest", "--set", "share.record.lock.duration.ms=20000")
	out := must(t, "", "group", "config", b, "--group", "sg")
	for _, want := range []string{"share.auto.offset.reset         earliest          group", "share.record.lock.duration.ms   20000             group",
		"share.session.timeout.ms        45000             default"} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	must(t, "", "group", "config", b, "--group", "sg", "--delete", "share.auto.offset.reset")
	if out := must(t, "", "group", "config", b, "--group", "sg"); !strings.Contains(out, "share.auto.offset.reset         latest            default") {
		t.Errorf("after delete:\n%s", out)
	}
	if r := shale(t, "", "group", "config", b, "--group", "sg", "--set", "no.such.key=1"); r.code != exitFailed || !strings.Contains(r.stderr, "INVALID_CONFIG") {
		t.Errorf("unknown key: exit %d, %s", r.code, r.stderr)
	}
	if r := shale(t, "", "group", "config", b); r.code != exitUsage {
		t.Errorf("without --group: exit %d", r.code)
	}
}
