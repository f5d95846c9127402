package main

import (
	"strings"
	"testing"
)

func TestClientMetricsCommands(t *testing.T) {
	b, _ := startServe(t)
	must(t, "", "client-metrics", "set", b, "--name", "producers", "--metrics", "org.apache.kafka.producer.", "--interval", "1000", "--match", "client_id=app-.*")
	must(t, "", "client-metrics", "set", b, "--name", "all", "--metrics", "*")
	out := must(t, "", "client-metrics", "list", b)
	for _, want := range []string{"producers  org.apache.kafka.producer.  1000", "client_id=app-.*", "all        *                           300000"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if r := shale(t, "", "client-metrics", "set", b, "--name", "producers", "--interval", "5"); r.code != exitFailed || !strings.Contains(r.stderr, "INVALID_REQUEST") {
		t.Errorf("interval 5: exit %d, %s", r.code, r.stderr)
	}
	must(t, "", "client-metrics", "delete", b, "--name", "all")
	if out := must(t, "", "client-metrics", "list", b); strings.Contains(out, "all ") {
		t.Errorf("deleted subscription listed:\n%s", out)
	}
	if r := shale(t, "", "client-metrics", "set", b, "--metrics", "x"); r.code != exitUsage {
		t.Errorf("set without --name: exit %d", r.code)
	}
}
