package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeShale writes a script that runs the test binary as a stand-in Shale
// node (see childMain), for --shale-binary.
func fakeShale(t *testing.T, env ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shale")
	script := "#!/bin/sh\nexport " + childEnv + "=1 " + strings.Join(env, " ") + "\nexec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func quickPresets(t *testing.T, names string) []Preset {
	t.Helper()
	ps, err := ResolvePresets(names)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		// Keep the shapes, shrink what makes them slow under -race.
		w := &ps[i].Workload
		w.BufferBytes = 256 << 10
	}
	return ps
}

func TestCompareGoalsAndPeakReuse(t *testing.T) {
	shale := shaleTarget(fakeShale(t), nil)
	cfg := compareConfig{
		presets:       quickPresets(t, "produce-8p-1k-acks1,consume-1k,omb-1k,e2e-latency"),
		duration:      300 * time.Millisecond,
		warmup:        0,
		targets:       []target{shale, inprocKfake{}},
		limits:        true,
		probeDuration: 50 * time.Millisecond,
		diskDir:       t.TempDir(),
	}
	var out bytes.Buffer
	cfg.out = &out
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmp, err := runCompare(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(cmp.Workloads) != 4 {
		t.Fatalf("%d workloads", len(cmp.Workloads))
	}
	for _, wr := range cmp.Workloads {
		if len(wr.Results) != 2 {
			t.Fatalf("%s: %d results", wr.Preset, len(wr.Results))
		}
		for _, r := range wr.Results {
			if r.Error != "" || r.Report == nil {
				t.Errorf("%s on %s: %s", wr.Preset, r.Target, r.Error)
			}
		}
		if _, ok := findRatio(wr.Ratios, "consume", "rec/s", "shale", "kfake"); !ok && wr.Preset != "produce-8p-1k-acks1" {
			t.Errorf("%s: no shale/kfake consume ratio in %v", wr.Preset, wr.Ratios)
		}
		if _, ok := findRatio(wr.Ratios, "produce", "rec/s", "kfake", "shale"); !ok && wr.Preset != "consume-1k" {
			t.Errorf("%s: no kfake/shale produce ratio", wr.Preset)
		}
	}
	// The loopback limits the presets need, and both disk limits.
	for _, want := range []string{"loopback-tcp 1 KiB x1", "loopback-tcp 1 KiB x4", "disk-pagecache 1 MiB blocks", "disk-fsync 1 MiB blocks"} {
		found := false
		for _, l := range cmp.Limits {
			if l.Label() == want && l.MBPerSec > 0 && l.Error == "" {
				found = true
			}
		}
		if !found {
			t.Errorf("limit %s missing from %+v", want, cmp.Limits)
		}
	}
	byName := map[string]WorkloadResult{}
	for _, wr := range cmp.Workloads {
		byName[wr.Preset] = wr
	}
	prod := byName["produce-8p-1k-acks1"]
	if v, ok := findRatio(prod.Ratios, "produce", "MB/s", "shale", "loopback-tcp 1 KiB x1"); !ok || v <= 0 {
		t.Errorf("no shale/loopback ratio in %v", prod.Ratios)
	}

	// e2e-latency reuses each target's omb-1k peak instead of measuring.
	omb, lat := byName["omb-1k"], byName["e2e-latency"]
	for i := range lat.Results {
		r, o := lat.Results[i].Report, omb.Results[i].Report
		if r.Peak != nil || r.PeakRate != peakRate(o) || r.Rate != r.PeakRate/2 {
			t.Errorf("%s: peak %v rate %v, omb-1k produced %v rec/s", lat.Results[i].Target, r.PeakRate, r.Rate, o.Role("produce").RecordsPerSec)
		}
	}

	// Every goal is decided for the (stand-in) shale target.
	if len(cmp.Goals) != len(goals) {
		t.Fatalf("%d goals", len(cmp.Goals))
	}
	for _, g := range cmp.Goals {
		if g.Status != "pass" && g.Status != "fail" {
			t.Errorf("goal %q: %s (%s)", g.Goal, g.Status, g.Detail)
		}
	}
	text := out.String()
	for _, want := range []string{"== machine limits", "== omb-1k", "shale/kfake", "kfake/shale", "share of machine limits",
		"== summary", "== goals (shale)", "e2e latency at half of peak", "offered"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	var md bytes.Buffer
	cmp.WriteMarkdown(&md)
	for _, want := range []string{"| machine limit | MB/s | messages/s |", "| loopback-tcp 1 KiB x4 |",
		"| workload | role | shale rec/s | shale MB/s | shale p50 / p99 / p99.9 ms | kfake rec/s", "shale/kfake rec/s", "shale % of loopback",
		"| `omb-1k` | consume |", "offered", "| goal (shale) |", "| e2e latency at half of peak: p99 <= 10 ms | `e2e-latency` |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
		t.Log(md.String())
	}
}

func TestCompareMainJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	args := []string{"compare", "--preset", "produce-1p-100b-acksall", "--duration", "300ms", "--warmup", "0",
		"--probe-duration", "50ms", "--disk-dir", t.TempDir(), "--shale-binary", fakeShale(t), "--kfake-mode", "process", "--json"}
	code := mainWith(ctx, args, &out, &errb, testSelf(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	var cmp Comparison
	if err := json.Unmarshal(out.Bytes(), &cmp); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(cmp.Targets) != 2 || !cmp.Targets[0].Available || !cmp.Targets[1].Available ||
		!strings.Contains(cmp.Targets[1].Description, "own process") {
		t.Errorf("targets %+v", cmp.Targets)
	}
	if cmp.Machine.CPUs < 1 || len(cmp.Workloads) != 1 || cmp.DurationSeconds != 0.3 {
		t.Errorf("comparison %+v", cmp)
	}
	for _, wr := range cmp.Workloads {
		for _, r := range wr.Results {
			if r.Report == nil || r.Error != "" {
				t.Errorf("%s on %s: %s", wr.Preset, r.Target, r.Error)
			}
		}
		if _, ok := findRatio(wr.Ratios, "produce", "rec/s", "shale", "kfake"); !ok {
			t.Errorf("no shale/kfake ratio")
		}
	}
}

func TestCompareWithoutShale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	args := []string{"compare", "--preset", "produce-1p-100b-acks1", "--duration", "200ms", "--warmup", "0",
		"--limits=false", "--progress=false"}
	code := mainWith(ctx, args, &out, &errb, selfBinary{path: "/nonexistent/bench.test"})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	text := out.String()
	for _, want := range []string{"target shale: not run:", "Shale: pending", "PENDING"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(errb.String(), "skipping shale") {
		t.Errorf("stderr %q", errb.String())
	}
}

func TestCompareShaleFailsToStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	args := []string{"compare", "--preset", "produce-1p-100b-acks1,produce-1p-1k-acks1", "--duration", "200ms", "--warmup", "0",
		"--limits=false", "--progress=false", "--json", "--shale-binary", fakeShale(t, "FAKE_SHALE_FAIL=1")}
	code := mainWith(ctx, args, &out, &errb, selfBinary{})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	var cmp Comparison
	if err := json.Unmarshal(out.Bytes(), &cmp); err != nil {
		t.Fatal(err)
	}
	sh := cmp.Targets[0]
	if sh.Name != "shale" || sh.Available || !strings.Contains(sh.Reason, "exited before answering ApiVersions") ||
		!strings.Contains(sh.Reason, "failing on purpose") {
		t.Errorf("shale status %+v", sh)
	}
	// Started once; the second workload does not try again.
	if r := cmp.Workloads[1].Results[0]; !strings.HasPrefix(r.Error, "not run: ") {
		t.Errorf("second workload on shale: %+v", r)
	}
	if r := cmp.Workloads[1].Results[1]; r.Target != "kfake" || r.Report == nil || r.Report.Role("produce").Records == 0 {
		t.Errorf("kfake should still run: %+v", r)
	}
	if !strings.Contains(errb.String(), "shale did not run") {
		t.Errorf("stderr %q", errb.String())
	}
}

func TestProcessTargetLifecycle(t *testing.T) {
	self := testSelf(t)
	tg := kfakeProcessTarget(self.path, nil, self.kfakeEnv)
	ctx := context.Background()
	rt, err := tg.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := apiVersions(ctx, rt.bootstrap[0]); err != nil {
		t.Fatalf("started target does not answer: %v", err)
	}
	if err := rt.stop(); err != nil {
		t.Errorf("clean stop: %v", err)
	}
	if err := rt.stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if apiVersions(ctx, rt.bootstrap[0]) == nil {
		t.Error("still answering after stop")
	}

	// A target that dies is noticed, and stop says so.
	sh := shaleTarget(self.path, nil)
	sh.env = self.kfakeEnv
	rt, err = sh.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(rt.dataDir); err != nil || !st.IsDir() {
		t.Errorf("no data directory while running: %v", err)
	}
	if err := syscall.Kill(rt.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rt.died:
	case <-time.After(10 * time.Second):
		t.Fatal("death not noticed")
	}
	if err := rt.stop(); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("stop after death: %v", err)
	}
	if _, err := os.Stat(rt.dataDir); !os.IsNotExist(err) {
		t.Errorf("data directory left behind: %v", err)
	}
}
