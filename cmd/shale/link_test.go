package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
)

// TestLinkMirrorPromote: two single-node Shale processes (in-process serve). A link on
// the second names the first; a mirror topic copies a topic at the same offsets, refuses
// producers until promoted, and promote reports a lag of nothing once it has caught up.
func TestLinkMirrorPromote(t *testing.T) {
	src, _ := startServe(t)
	rest := testutil.FreePort(t)
	dst, _ := startServe(t, fmt.Sprintf("--rest.proxy.listener=127.0.0.1:%d", rest))
	restURL := fmt.Sprintf("--rest-url=http://127.0.0.1:%d", rest)
	srcAddr := strings.TrimPrefix(src, "--bootstrap-server=")

	must(t, "", "topic", "create", src, "--topic", "orders", "--partitions", "2")
	must(t, "a\nb\nc\n", "produce", src, "--topic", "orders", "--partition", "1")

	if r := shale(t, "", "link", "create", restURL, "--link", "east", "--config", "no.such=1"); r.code != exitFailed || !strings.Contains(r.stderr, "no.such") {
		t.Fatalf("a link with an unknown config: %+v", r)
	}
	must(t, "", "link", "create", restURL, "--link", "east", "--config", "bootstrap.servers="+srcAddr)
	if out := must(t, "", "link", "describe", restURL); !strings.Contains(out, "east") || !strings.Contains(out, srcAddr) {
		t.Fatalf("describe: %q", out)
	}
	must(t, "", "link", "mirror", restURL, "--link", "east", "--source-topic", "orders")

	// The same records at the same offsets.
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := shale(t, "", "consume", dst, "--topic", "orders", "--partition", "1", "--offset", "1", "--max-messages", "2", "--timeout", "1s")
		if got = r.stdout; got == "b\nc\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror partition 1 from offset 1: %q (%s)", got, r.stderr)
		}
	}
	if r := shale(t, "x\n", "produce", dst, "--topic", "orders", "--partition", "0"); r.code != exitFailed || !strings.Contains(r.stderr, "INVALID_REQUEST") {
		t.Fatalf("produce to a mirror topic: %+v", r)
	}
	if out := must(t, "", "link", "describe", restURL, "--link", "east"); !strings.Contains(out, "ACTIVE") {
		t.Fatalf("describe east: %q", out)
	}

	out := must(t, "", "link", "promote", restURL, "--link", "east")
	// Partition 1: offset 3, the source's end 3, no lag.
	if !strings.Contains(out, "orders") || !strings.Contains(strings.Join(strings.Fields(out), " "), "orders 1 3 3 0 0 0s") {
		t.Fatalf("promote printed %q", out)
	}
	if out := must(t, "", "link", "describe", restURL, "--link", "east"); !strings.Contains(out, "STOPPED") {
		t.Fatalf("describe after promote: %q", out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := shale(t, "d\n", "produce", dst, "--topic", "orders", "--partition", "1")
		if r.code == exitOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce after promotion: %+v", r)
		}
	}
	if got := must(t, "", "consume", dst, "--topic", "orders", "--partition", "1", "--from-beginning", "--max-messages", "4"); got != "a\nb\nc\nd\n" {
		t.Fatalf("promoted topic holds %q", got)
	}
	must(t, "", "link", "delete", restURL, "--link", "east")
}
