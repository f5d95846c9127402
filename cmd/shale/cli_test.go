package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
)

type result struct {
	code           int
	stdout, stderr string
}

// shale runs one command line in-process with stdin as input.
func shale(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// must runs a command line that must succeed and returns its stdout.
func must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := shale(t, stdin, args...)
	if r.code != exitOK {
		t.Fatalf("shale %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func startKfake(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return "--bootstrap-server=" + strings.Join(c.ListenAddrs(), ",")
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func TestTopicCommands(t *testing.T) {
	b := startKfake(t)
	if out := must(t, "", "topic", "create", b, "--topic", "orders", "--partitions", "3", "--replication-factor", "1",
		"--config", "retention.ms=60000", "--config", "cleanup.policy=delete"); out != "Created topic orders with 3 partitions, replication factor 1.\n" {
		t.Errorf("create printed %q", out)
	}
	r := shale(t, "", "topic", "create", b, "--topic", "orders")
	if r.code != exitFailed || !strings.Contains(r.stderr, "TOPIC_ALREADY_EXISTS") {
		t.Errorf("second create: %+v", r)
	}
	must(t, "", "topic", "create", b, "orders", "--if-not-exists") // positional name, flag after it
	must(t, "", "topic", "create", b, "--topic=logs")

	if got := must(t, "", "topic", "list", b); got != "logs\norders\n" {
		t.Errorf("list = %q", got)
	}

	desc := lines(must(t, "", "topic", "describe", b, "--topic", "orders"))
	if len(desc) != 4 {
		t.Fatalf("describe: %q", desc)
	}
	for _, want := range []string{"Topic: orders\t", "PartitionCount: 3\t", "ReplicationFactor: 1\t", "retention.ms=60000", "cleanup.policy=delete"} {
		if !strings.Contains(desc[0], want) {
			t.Errorf("describe header %q lacks %q", desc[0], want)
		}
	}
	if want := "\tTopic: orders\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0"; desc[3] != want {
		t.Errorf("partition line %q, want %q", desc[3], want)
	}
	if all := must(t, "", "topic", "describe", b); strings.Count(all, "PartitionCount") != 2 {
		t.Errorf("describe all: %q", all)
	}
	if r := shale(t, "", "topic", "describe", b, "--topic", "nope"); r.code != exitFailed || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("describe missing: %+v", r)
	}

	must(t, "", "topic", "alter", b, "--topic", "orders", "--add-config", "segment.bytes=1048576", "--delete-config", "retention.ms,cleanup.policy", "--partitions", "4")
	desc = lines(must(t, "", "topic", "describe", b, "orders"))
	if !strings.Contains(desc[0], "Configs: segment.bytes=1048576") || strings.Contains(desc[0], "retention.ms") || len(desc) != 5 {
		t.Errorf("after alter: %q", desc)
	}
	if r := shale(t, "", "topic", "alter", b, "--topic", "nope", "--add-config", "retention.ms=1"); r.code != exitFailed || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("alter a missing topic: %+v", r)
	}

	if got := must(t, "", "topic", "delete", b, "--topic", "orders,logs"); got != "Deleted topic orders.\nDeleted topic logs.\n" {
		t.Errorf("delete printed %q", got)
	}
	if r := shale(t, "", "topic", "delete", b, "--topic", "orders"); r.code != exitFailed || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("delete missing: %+v", r)
	}
	must(t, "", "topic", "delete", b, "--topic", "orders", "--if-exists")
	if got := must(t, "", "topic", "list", b); got != "" {
		t.Errorf("list after delete = %q", got)
	}
}

func TestProduceConsume(t *testing.T) {
	b := startKfake(t, kfake.SeedTopics(2, "t"))
	// CRLF, an empty value and a last line without a newline.
	must(t, "a:1\r\nb:2\nc:\nd:4", "produce", b, "--topic", "t", "--key-separator", ":", "--partition", "1",
		"--header", "h=x", "--acks", "1", "--compression", "zstd")
	must(t, "plain\n", "produce", b, "--topic", "t", "--partition", "0")

	r := shale(t, "", "consume", b, "--topic", "t", "--partition", "1", "--from-beginning", "--max-messages", "4",
		"--print-key", "--print-headers", "--key-separator", "|")
	if r.code != exitOK {
		t.Fatalf("consume: %+v", r)
	}
	if want := "h:x|a|1\nh:x|b|2\nh:x|c|\nh:x|d|4\n"; r.stdout != want {
		t.Errorf("consume printed %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "Processed a total of 4 messages") {
		t.Errorf("stderr %q", r.stderr)
	}
	if got := must(t, "", "consume", b, "--topic", "t", "--partition", "1", "--offset", "2", "--max-messages", "2"); got != "\n4\n" {
		t.Errorf("from offset 2: %q", got)
	}
	if got := must(t, "", "consume", b, "t", "--partition", "0", "--offset", "earliest", "--max-messages", "1", "--print-key"); got != "null\tplain\n" {
		t.Errorf("keyless record: %q", got)
	}
	// Every partition, stopping when idle.
	got := lines(must(t, "", "consume", b, "--topic", "t", "--from-beginning", "--timeout", "1s"))
	slices.Sort(got)
	if want := []string{"", "1", "2", "4", "plain"}; !slices.Equal(got, want) {
		t.Errorf("all partitions: %q, want %q", got, want)
	}
	// Only new records without --from-beginning: nothing arrives.
	if got := must(t, "", "consume", b, "--topic", "t", "--timeout", "300"); got != "" {
		t.Errorf("from the end: %q", got)
	}
	if r := shale(t, "", "consume", b, "--topic", "t", "--partition", "0", "--offset", "99", "--max-messages", "1"); r.code != exitFailed || !strings.Contains(r.stderr, "OFFSET_OUT_OF_RANGE") {
		t.Errorf("offset past the end: %+v", r)
	}
}

func TestProduceStopsAtBadLine(t *testing.T) {
	b := startKfake(t, kfake.SeedTopics(1, "t"))
	r := shale(t, "k:v\nno separator\nk:w\n", "produce", b, "--topic", "t", "--key-separator", ":")
	if r.code != exitFailed || !strings.Contains(r.stderr, `line 2 has no key separator ":"`) {
		t.Errorf("bad line: %+v", r)
	}
	// The line before it was delivered, the one after it was not.
	if got := must(t, "", "consume", b, "--topic", "t", "--from-beginning", "--timeout", "1s"); got != "v\n" {
		t.Errorf("records: %q", got)
	}
}

func TestProduceFailureReported(t *testing.T) {
	b := startKfake(t, kfake.SeedTopics(1, "t"))
	r := shale(t, "x\n", "produce", b, "--topic", "t", "--partition", "7", "--timeout", "2s")
	if r.code != exitFailed || !strings.Contains(r.stderr, "1 of 1 records failed") {
		t.Errorf("produce to a missing partition: %+v", r)
	}
}

func TestConsumeGroup(t *testing.T) {
	b := startKfake(t, kfake.SeedTopics(1, "t"))
	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, "m%d\n", i)
	}
	must(t, in.String(), "produce", b, "--topic", "t")
	if got := must(t, "", "consume", b, "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "3"); got != "m0\nm1\nm2\n" {
		t.Errorf("first run: %q", got)
	}
	// The group resumes after what it printed; --from-beginning applies only without commits.
	if got := must(t, "", "consume", b, "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "2"); got != "m3\nm4\n" {
		t.Errorf("second run: %q", got)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"topic"},
		{"topic", "frob"},
		{"topic", "create"},
		{"topic", "create", "--topic", "a", "--partitions", "0"},
		{"topic", "create", "--topic", "a", "--replication-factor", "-3"},
		{"topic", "create", "--topic", "a", "--config", "novalue"},
		{"topic", "alter", "--topic", "a"},
		{"topic", "delete"},
		{"topic", "list", "--nope"},
		{"produce"},
		{"produce", "--topic", "t", "extra"},
		{"produce", "--topic", "t", "--acks", "2"},
		{"produce", "--topic", "t", "--compression", "brotli"},
		{"produce", "--topic", "t", "--timeout", "soon"},
		{"consume"},
		{"consume", "--topic", "t", "--offset", "3"},
		{"consume", "--topic", "t", "--partition", "0", "--offset", "-3"},
		{"consume", "--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"},
		{"consume", "--topic", "t", "--group", "g", "--partition", "0"},
		{"consume", "--topic", "t", "--max-messages", "-1"},
		{"help", "nope"},
		{"serve", "--log.dirs=/a,/b"},
		{"serve", "--no.such.key=1"},
		{"bench"},
	} {
		r := shale(t, "", args...)
		if r.code != exitUsage || r.stderr == "" {
			t.Errorf("shale %q: exit %d, stderr %q; want %d with a message", args, r.code, r.stderr, exitUsage)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Commands:"},
		{[]string{"--help"}, "Commands:"},
		{[]string{"help", "consume"}, "--from-beginning"},
		{[]string{"produce", "-h"}, "--key-separator"},
		{[]string{"topic", "help"}, "describe"},
		{[]string{"topic", "alter", "--help"}, "--delete-config"},
		{[]string{"help", "serve"}, "--log.retention.hours"},
		{[]string{"serve", "--help"}, "SHALE_LOG_DIRS"},
		{[]string{"bench", "help"}, "compare"},
		{[]string{"version"}, "shale "},
	} {
		if out := must(t, "", tc.args...); !strings.Contains(out, tc.want) {
			t.Errorf("shale %q printed %q, lacking %q", tc.args, out, tc.want)
		}
	}
}

// shale serve runs a node until its context ends, and exits 0; the client commands work
// against it.
func TestServe(t *testing.T) {
	b, stop := startServe(t)
	must(t, "", "topic", "create", b, "--topic", "s", "--partitions", "1")
	if got := must(t, "", "topic", "elect-leaders", b, "--topic", "s", "--election-type", "preferred"); got !=
		"Valid replica already elected for partitions s-0\n" {
		t.Errorf("elect-leaders on one node: %q", got)
	}
	must(t, "one\ntwo\n", "produce", b, "--topic", "s")
	if got := must(t, "", "consume", b, "--topic", "s", "--from-beginning", "--max-messages", "2"); got != "one\ntwo\n" {
		t.Errorf("consumed %q", got)
	}
	if code, log := stop(); code != exitOK {
		t.Errorf("serve exited %d: %s", code, log)
	}
}

// startServe runs `shale serve` in-process on free loopback ports until the test ends
// or stop is called, and returns the --bootstrap-server flag for it. stop returns the
// exit code and what serve logged.
func startServe(t *testing.T, extra ...string) (bootstrap string, stop func() (int, string)) {
	t.Helper()
	kafka, controller := testutil.FreePort(t), testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	var serveErr testutil.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--log.dirs=" + filepath.Join(t.TempDir(), "data"),
			fmt.Sprintf("--listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", kafka, controller),
			"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=", "--log.level=warn"}, extra...), nil, io.Discard, &serveErr)
	}()
	stopped, code := false, 0
	stop = func() (int, string) {
		if stopped {
			return code, serveErr.String()
		}
		stopped = true
		cancel()
		select {
		case code = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop after its context ended")
		}
		return code, serveErr.String()
	}
	t.Cleanup(func() { stop() })
	b := fmt.Sprintf("--bootstrap-server=127.0.0.1:%d", kafka)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := shale(t, "", "topic", "list", b, "--timeout", "1s"); r.code == exitOK {
			return b, stop
		}
		select {
		case code := <-done:
			stopped = true
			t.Fatalf("serve exited early with %d: %s", code, serveErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up: %s", serveErr.String())
		}
	}
}
