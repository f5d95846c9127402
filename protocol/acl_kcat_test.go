package protocol_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kcat (librdkafka) without an ACL gets Kafka's authorization errors and no data; with
// READ it consumes.
func TestACLsWithKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (tests/deps.sh installs it)")
	}
	b := startACLBroker(t, false)
	b.topic(t, "secret")
	if err := produceOne(t, b.as("admin"), "secret"); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", b.addr, "-m", "10"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("", "-C", "-t", "secret", "-o", "beginning", "-e", "-X", "client.id=bob")
	if err == nil || !strings.Contains(strings.ToLower(out), "authorization failed") || strings.Contains(out, "\nv\n") {
		t.Fatalf("kcat consume without READ: %v\n%s", err, out)
	}
	out, err = run("x\n", "-P", "-t", "secret", "-X", "client.id=bob")
	if err == nil || !strings.Contains(strings.ToLower(out), "authorization failed") {
		t.Fatalf("kcat produce without WRITE: %v\n%s", err, out)
	}
	b.grant(t, kadm.NewACLs().Topics("secret").Allow("User:carol").Operations(kadm.OpRead))
	out, err = run("", "-C", "-t", "secret", "-o", "beginning", "-e", "-q", "-X", "client.id=carol")
	if err != nil || strings.TrimSpace(out) != "v" {
		t.Fatalf("kcat consume with READ: %v\n%q", err, out)
	}
}
