package main

import (
	"strings"
	"testing"
)

func TestQuotaCommands(t *testing.T) {
	b := startKfake(t)
	must(t, "", "quota", "set", b, "--client", "billing", "producer_byte_rate=1048576", "consumer_byte_rate=2097152")
	must(t, "", "quota", "set", b, "--user", "<default>", "request_percentage=12.5")
	out := must(t, "", "quota", "list", b)
	for _, want := range []string{"client-id=billing  producer_byte_rate  1048576", "user=<default>", "12.5"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if out := must(t, "", "quota", "list", b, "--client", "billing"); strings.Contains(out, "user=") {
		t.Errorf("filtered list shows other entities:\n%s", out)
	}
	must(t, "", "quota", "remove", b, "--client", "billing", "producer_byte_rate")
	if out := must(t, "", "quota", "list", b); strings.Contains(out, "producer_byte_rate") {
		t.Errorf("removed quota still listed:\n%s", out)
	}
	if r := shale(t, "", "quota", "set", b, "producer_byte_rate=1"); r.code != exitUsage {
		t.Errorf("set without an entity: exit %d", r.code)
	}
	if r := shale(t, "", "quota", "set", b, "--user", "u", "producer_byte_rate"); r.code != exitUsage {
		t.Errorf("set without a value: exit %d", r.code)
	}
}
