package bench

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/bench/nullbroker"
)

func TestParseWorkloadDefaults(t *testing.T) {
	w, c, err := parseWorkloadArgs(ModeProduce, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultWorkload(ModeProduce)
	if shapeKey(w) != shapeKey(want) || w.Topic != want.Topic || w.Duration != want.Duration {
		t.Errorf("defaults:\n got %+v\nwant %+v", w, want)
	}
	if c.bootstrap != "127.0.0.1:9092" || c.json || !c.progress {
		t.Errorf("common defaults: %+v", c)
	}
}

func TestParseWorkloadFlags(t *testing.T) {
	args := []string{
		"--bootstrap-server", "a:1,b:2", "--topic", "t1", "--partitions", "12", "--replication-factor", "3",
		"--record-size", "2KiB", "--keys", "fixed:7", "--acks", "1", "--compression", "zstd",
		"--linger", "5ms", "--batch-max-bytes", "256KiB", "--buffer-bytes", "4MiB",
		"--producers", "3", "--consumers", "2", "--group", "g", "--duration", "0", "--records", "1000",
		"--rate", "500", "--warmup", "0s", "--json", "--progress=false",
	}
	w, c, err := parseWorkloadArgs(ModeE2E, args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"topic", w.Topic, "t1"},
		{"partitions", w.Partitions, int32(12)},
		{"rf", w.ReplicationFactor, int16(3)},
		{"record size", w.RecordSize, 2048},
		{"keys", w.Keys, KeyDist{Kind: KeysFixed, Count: 7}},
		{"acks", w.Acks, Acks(1)},
		{"compression", w.Compression, "zstd"},
		{"linger", w.Linger, 5 * time.Millisecond},
		{"batch", w.BatchMaxBytes, int32(256 << 10)},
		{"buffer", w.BufferBytes, int64(4 << 20)},
		{"producers", w.Producers, 3},
		{"consumers", w.Consumers, 2},
		{"group", w.Group, "g"},
		{"duration", w.Duration, time.Duration(0)},
		{"records", w.Records, int64(1000)},
		{"rate", w.Rate, 500.0},
		{"warmup", w.Warmup, time.Duration(0)},
		{"bootstrap", splitList(c.bootstrap), []string{"a:1", "b:2"}},
		{"json", c.json, true},
		{"progress", c.progress, false},
	}
	for _, ch := range checks {
		if !equalAny(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func equalAny(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs := b.([]string)
		return strings.Join(as, ",") == strings.Join(bs, ",")
	}
	return a == b
}

func TestParseWorkloadPresetOverride(t *testing.T) {
	w, _, err := parseWorkloadArgs(ModeProduce, []string{"--preset", "kreps-produce", "--record-size", "200", "--duration=2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := LookupPreset("kreps-produce")
	if w.RecordSize != 200 || w.Duration != 2*time.Second {
		t.Errorf("explicit flags did not override the preset: size %d duration %v", w.RecordSize, w.Duration)
	}
	if w.Partitions != p.Workload.Partitions || w.BatchMaxBytes != p.Workload.BatchMaxBytes || w.Acks != p.Workload.Acks || w.Name != "kreps-produce" {
		t.Errorf("preset fields lost: %+v", w)
	}

	// An explicit --rate replaces the preset's fraction of peak.
	w, _, err = parseWorkloadArgs(ModeE2E, []string{"--preset=e2e-latency", "--rate=100"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w.Rate != 100 || w.RateOfPeak != 0 {
		t.Errorf("rate %v rate-of-peak %v", w.Rate, w.RateOfPeak)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	cases := []struct {
		mode Mode
		args []string
		want string
	}{
		{ModeProduce, []string{"--acks", "2"}, "unknown acks"},
		{ModeProduce, []string{"--keys", "fixed:0"}, "positive integer"},
		{ModeProduce, []string{"--keys", "sometimes"}, "unknown key distribution"},
		{ModeProduce, []string{"--compression", "brotli"}, "unknown compression"},
		{ModeProduce, []string{"--record-size", "0"}, "--record-size must be at least 1"},
		{ModeProduce, []string{"--record-size", "ten"}, "bad size"},
		{ModeE2E, []string{"--record-size", "8"}, "--record-size must be at least 16"},
		{ModeProduce, []string{"--partitions", "0"}, "--partitions must be at least 1"},
		{ModeProduce, []string{"--replication-factor", "0"}, "--replication-factor"},
		{ModeProduce, []string{"--duration", "0"}, "one of --duration or --records"},
		{ModeProduce, []string{"--producers", "0"}, "--producers must be at least 1"},
		{ModeConsume, []string{"--consumers", "0"}, "--consumers must be at least 1"},
		{ModeProduce, []string{"--rate", "-1"}, "--rate must not be negative"},
		{ModeProduce, []string{"--batch-max-bytes", "100", "--record-size", "1KiB"}, "--batch-max-bytes must be between"},
		{ModeProduce, []string{"--preset", "nope"}, "unknown preset"},
		{ModeProduce, []string{"--preset", "kreps-consume"}, "is a consume workload"},
		{ModeProduce, []string{"stray"}, "unexpected argument"},
		{ModeProduce, []string{"--no-such-flag"}, "not defined"},
	}
	for _, c := range cases {
		_, _, err := parseWorkloadArgs(c.mode, c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: error %v, want it to contain %q", c.mode, c.args, err, c.want)
		}
	}
	// Every problem is reported at once.
	_, _, err := parseWorkloadArgs(ModeProduce, []string{"--partitions=0", "--producers=0"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--partitions") || !strings.Contains(err.Error(), "--producers") {
		t.Errorf("joined errors: %v", err)
	}
	_, _, err = parseWorkloadArgs(ModeProduce, []string{"-h"}, io.Discard)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestParseByteSize(t *testing.T) {
	good := map[string]int64{"0": 0, "100": 100, "100B": 100, "1k": 1024, "1KiB": 1024, "1KB": 1000,
		"2MiB": 2 << 20, "1mb": 1e6, "1GiB": 1 << 30, " 3 KiB ": 3072}
	for in, want := range good {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-1", "1.5k", "1TB", "99999999999999999999", "9000000000GiB"} {
		if _, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) accepted", in)
		}
	}
}

func TestParseCompareArgs(t *testing.T) {
	f, err := parseCompareArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.presets != "default" || f.duration != 10*time.Second || f.targets != "shale,kfake,null" || f.nullRetain != nullbroker.DefaultRetainBytes || !f.limits || f.kfakeMode != "auto" {
		t.Errorf("defaults: %+v", f)
	}
	f, err = parseCompareArgs([]string{"--preset", "kreps,omb", "--duration", "3s", "--external", "kafka=h:9092,h2:9092",
		"--shale-arg=--num.partitions=3", "--shale-arg", "--x=y", "--json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.duration != 3*time.Second || len(f.external) != 1 || len(f.shaleArgs) != 2 || !f.json {
		t.Errorf("parsed: %+v", f)
	}
	for _, bad := range [][]string{
		{"--duration", "0"},
		{"--targets", "kafka"},
		{"--external", "nohost"},
		{"--external", "kfake=h:1"},
		{"--external", "null=h:1"},
		{"--kfake-mode", "remote"},
		{"--probe-duration", "0"},
		{"--json", "--markdown"},
		{"extra"},
	} {
		if _, err := parseCompareArgs(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestBuildTargets(t *testing.T) {
	f, _ := parseCompareArgs(nil, io.Discard)

	// Not the shale binary, no --shale-binary: shale is skipped and says why.
	ts, skipped := buildTargets(f, selfBinary{path: "/x/bench.test"})
	if len(ts) != 2 || ts[0].name() != "kfake" || ts[1].name() != "null" {
		t.Fatalf("targets %v", ts)
	}
	if _, ok := ts[0].(inprocKfake); !ok {
		t.Errorf("kfake should run in process when this is not the shale binary: %T", ts[0])
	}
	if _, ok := ts[1].(inprocNull); !ok {
		t.Errorf("null should run in process when this is not the shale binary: %T", ts[1])
	}
	if len(skipped) != 1 || skipped[0].Name != "shale" || !strings.Contains(skipped[0].Reason, "pending") {
		t.Errorf("skipped %+v", skipped)
	}

	// Running as shale: shale serves from this binary, kfake in a child.
	dir := t.TempDir()
	shale := filepath.Join(dir, "shale")
	if err := os.WriteFile(shale, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ts, skipped = buildTargets(f, selfBinary{path: shale, isShale: true, kfakePrefix: []string{"bench"}})
	if len(ts) != 3 || len(skipped) != 0 {
		t.Fatalf("targets %v skipped %v", ts, skipped)
	}
	st, ok := ts[0].(*processTarget)
	if !ok || st.name() != "shale" || st.path != shale {
		t.Fatalf("shale target %#v", ts[0])
	}
	args := strings.Join(st.args([]int{9092, 8080, 9093}, "/data"), " ")
	if args != "serve --log.dirs=/data --listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093 --http.listener=127.0.0.1:8080" {
		t.Errorf("shale args %q", args)
	}
	kt, ok := ts[1].(*processTarget)
	if !ok || strings.Join(kt.args([]int{1234}, ""), " ") != "bench kfake-serve --listen=127.0.0.1:1234" {
		t.Errorf("kfake target %#v", ts[1])
	}
	nt, ok := ts[2].(*processTarget)
	if !ok || strings.Join(nt.args([]int{1234}, ""), " ") != "bench null-serve --listen=127.0.0.1:1234 --retain-bytes=536870912" {
		t.Errorf("null target %#v", ts[2])
	}

	// A --shale-binary that is missing or not executable is skipped.
	f.shaleBinary = filepath.Join(dir, "missing")
	if _, skipped = buildTargets(f, selfBinary{}); len(skipped) != 1 {
		t.Errorf("missing binary not skipped")
	}
	notExec := filepath.Join(dir, "notexec")
	os.WriteFile(notExec, nil, 0o644)
	f.shaleBinary = notExec
	if _, skipped = buildTargets(f, selfBinary{}); len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "not an executable") {
		t.Errorf("non-executable binary: %+v", skipped)
	}

	// Externals follow, in order.
	f.shaleBinary, f.targets = "", "kfake"
	f.external = listFlag{"kafka=h:1,h:2"}
	ts, _ = buildTargets(f, selfBinary{})
	if len(ts) != 2 || ts[1].name() != "kafka" || strings.Join(ts[1].(*externalTarget).bootstrap, ",") != "h:1,h:2" {
		t.Errorf("externals: %v", ts)
	}
}

// compare's --warmup defaults to each preset's own, and takes any duration
// including none.
func TestCompareWarmupFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{{nil, -1}, {[]string{"--warmup", "0"}, 0}, {[]string{"--warmup=2s"}, 2 * time.Second}} {
		f, err := parseCompareArgs(c.args, io.Discard)
		if err != nil || f.warmup != c.want {
			t.Errorf("%v: warmup %v, err %v; want %v", c.args, f.warmup, err, c.want)
		}
	}
	if _, err := parseCompareArgs([]string{"--warmup", "-1s"}, io.Discard); err == nil {
		t.Error("a negative --warmup was accepted")
	}
}

// --baseline-binary adds a second Shale node from that binary, right after shale.
func TestBaselineTarget(t *testing.T) {
	dir := t.TempDir()
	shale, base := filepath.Join(dir, "shale"), filepath.Join(dir, "shale-main")
	for _, p := range []string{shale, base} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := parseCompareArgs([]string{"--targets", "shale,null", "--baseline-binary", base, "--shale-arg", "--num.io.threads=2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ts, skipped := buildTargets(f, selfBinary{path: shale, isShale: true, kfakePrefix: []string{"bench"}})
	if len(ts) != 3 || len(skipped) != 0 || ts[0].name() != "shale" || ts[1].name() != baselineTargetName || ts[2].name() != "null" {
		t.Fatalf("targets %v skipped %v", ts, skipped)
	}
	bt := ts[1].(*processTarget)
	if bt.path != base || !strings.HasSuffix(strings.Join(bt.args([]int{1, 2, 3}, "/d"), " "), "--num.io.threads=2") {
		t.Fatalf("baseline target %#v", bt)
	}
	if _, err := parseCompareArgs([]string{"--targets", "shale," + baselineTargetName}, io.Discard); err == nil {
		t.Fatal("target baseline without --baseline-binary accepted")
	}
}
