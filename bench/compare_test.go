package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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
		targets:       []target{shale, inprocKfake{}, inprocNull{retain: 32 << 20}},
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
		if len(wr.Results) != 3 {
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
		// The null broker runs every workload, groups included.
		role := "produce"
		if wr.Preset == "consume-1k" {
			role = "consume"
		}
		if _, ok := findRatio(wr.Ratios, role, "rec/s", "shale", nullTargetName); !ok {
			t.Errorf("%s: no shale/null %s ratio", wr.Preset, role)
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

	// Every goal about the (stand-in) shale target is decided; those
	// about the cluster, which did not run, are pending.
	if len(cmp.Goals) != len(goals) {
		t.Fatalf("%d goals", len(cmp.Goals))
	}
	for _, g := range cmp.Goals {
		decided := g.Status == "pass" || g.Status == "fail"
		if decided != (g.Target == "shale") {
			t.Errorf("goal %q on %s: %s (%s)", g.Goal, g.Target, g.Status, g.Detail)
		}
	}
	text := out.String()
	for _, want := range []string{"== machine limits", "== omb-1k", "shale/kfake", "kfake/shale", "share of machine limits",
		"== summary", "== goals (shale, shale-cluster)", "e2e latency at half of peak", "offered"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	var md bytes.Buffer
	cmp.WriteMarkdown(&md)
	for _, want := range []string{"| machine limit | MB/s | messages/s |", "| loopback-tcp 1 KiB x4 |",
		"| workload | role | shale rec/s | shale MB/s | shale p50 / p99 / p99.9 ms | kfake rec/s", "shale/kfake rec/s", "shale % of loopback",
		"| `omb-1k` | consume |", "offered", "| goal (shale, shale-cluster) |", "| e2e latency at half of peak: p99 <= 10 ms | `e2e-latency` |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
		t.Log(md.String())
	}
}

// TestCompareFixedRate: with --rate every target is offered the same load in the
// open-loop presets, without measuring a peak first, and the goals about half of the
// peak stay undecided.
func TestCompareFixedRate(t *testing.T) {
	cfg := compareConfig{
		presets:  quickPresets(t, "e2e-latency"),
		duration: 300 * time.Millisecond,
		warmup:   0,
		rate:     2000,
		targets:  []target{shaleTarget(fakeShale(t), nil), inprocNull{retain: 32 << 20}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmp, err := runCompare(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Workloads) != 1 || len(cmp.Workloads[0].Results) != 2 {
		t.Fatalf("workloads %+v", cmp.Workloads)
	}
	for _, r := range cmp.Workloads[0].Results {
		if r.Error != "" || r.Report == nil {
			t.Fatalf("%s: %s", r.Target, r.Error)
		}
		if r.Report.Rate != 2000 || r.Report.PeakRate != 0 {
			t.Errorf("%s: offered %v rec/s with peak %v, want 2000 and no peak", r.Target, r.Report.Rate, r.Report.PeakRate)
		}
	}
	if cmp.FixedRate != 2000 {
		t.Errorf("fixed rate %v", cmp.FixedRate)
	}
	for _, g := range cmp.Goals {
		if g.Preset == "e2e-latency" && (g.Status != "pending" || !strings.Contains(g.Detail, "fixed --rate")) {
			t.Errorf("goal %q: %s (%s), want pending at the fixed rate", g.Goal, g.Status, g.Detail)
		}
	}
}

func TestCompareMainJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	args := []string{"compare", "--preset", "produce-1p-100b-acksall", "--duration", "300ms", "--warmup", "0",
		"--probe-duration", "50ms", "--disk-dir", t.TempDir(), "--shale-binary", fakeShale(t), "--kfake-mode", "process", "--null-retain-bytes", "32MiB", "--json"}
	code := mainWith(ctx, args, &out, &errb, testSelf(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	var cmp Comparison
	if err := json.Unmarshal(out.Bytes(), &cmp); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(cmp.Targets) != 3 || !cmp.Targets[0].Available || !cmp.Targets[1].Available || !cmp.Targets[2].Available ||
		!strings.Contains(cmp.Targets[1].Description, "own process") || !strings.Contains(cmp.Targets[2].Description, "own process") {
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

// fakeClusterTarget is the cluster target with the test binary standing in
// for shale (see fakeClusterNode).
func fakeClusterTarget(t *testing.T) *clusterTarget {
	t.Helper()
	self := testSelf(t)
	ct := shaleClusterTarget(self.path, nil)
	ct.env = self.kfakeEnv
	return ct
}

func TestClusterTargetLifecycle(t *testing.T) {
	ct := fakeClusterTarget(t)
	ctx := context.Background()
	rt, err := ct.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.bootstrap) != clusterNodes {
		t.Fatalf("bootstrap %v", rt.bootstrap)
	}
	for i, a := range rt.bootstrap {
		if n, err := metadataBrokers(ctx, a); err != nil || n != clusterNodes {
			t.Errorf("node %d at %s: %d brokers, %v", i+1, a, n, err)
		}
		if st, err := os.Stat(filepath.Join(rt.dataDir, "n"+strconv.Itoa(i+1))); err != nil || !st.IsDir() {
			t.Errorf("node %d has no data directory: %v", i+1, err)
		}
	}
	// Every node gets the same voters and its own id, directory and ports.
	ports := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	a2 := strings.Join(ct.nodeArgs(1, ports, "/r"), " ")
	for _, want := range []string{"serve", "--node.id=2", "--log.dirs=/r/n2", "--controller.quorum.voters=1@127.0.0.1:2,2@127.0.0.1:5,3@127.0.0.1:8",
		"--listeners=PLAINTEXT://127.0.0.1:4,CONTROLLER://127.0.0.1:5", "--http.listener=127.0.0.1:6"} {
		if !strings.Contains(a2, want) {
			t.Errorf("node 2's args %q lack %q", a2, want)
		}
	}

	// One node dying is the cluster dying; stop says so and cleans up.
	if err := syscall.Kill(rt.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rt.died:
	case <-time.After(10 * time.Second):
		t.Fatal("death not noticed")
	}
	if err := rt.stop(); err == nil || !strings.Contains(err.Error(), "node 1 had already exited") {
		t.Errorf("stop after a death: %v", err)
	}
	if err := rt.stop(); err == nil {
		t.Error("second stop forgot the death")
	}
	if _, err := os.Stat(rt.dataDir); !os.IsNotExist(err) {
		t.Errorf("data directory left behind: %v", err)
	}
	for _, a := range rt.bootstrap {
		if apiVersions(ctx, a) == nil {
			t.Errorf("%s still answers after stop", a)
		}
	}
}

func TestClusterTargetNodeFails(t *testing.T) {
	// Nodes that exit at once: start gives up without waiting out
	// readyWait, and its error carries every node's command and output.
	ct := shaleClusterTarget(fakeShale(t, "FAKE_SHALE_FAIL=1"), nil)
	_, err := ct.start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "failing on purpose") || !strings.Contains(err.Error(), "node 3 (") ||
		!strings.Contains(err.Error(), "--controller.quorum.voters=") {
		t.Errorf("start: %v", err)
	}
}

func TestCompareCluster(t *testing.T) {
	presets := quickPresets(t, "produce-1p-100b-acks1,cluster")
	cfg := compareConfig{
		presets:  presets,
		duration: 300 * time.Millisecond,
		warmup:   0,
		targets:  []target{inprocKfake{}, fakeClusterTarget(t)},
	}
	var out bytes.Buffer
	cfg.out = &out
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmp, err := runCompare(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	byName := map[string]WorkloadResult{}
	for _, wr := range cmp.Workloads {
		byName[wr.Preset] = wr
		want := clusterTargetName
		if wr.Brokers <= 1 {
			want = "kfake"
		}
		if len(wr.Results) != 1 || wr.Results[0].Target != want {
			t.Errorf("%s ran on %+v, want %s alone", wr.Preset, wr.Results, want)
			continue
		}
		if r := wr.Results[0]; r.Error != "" || r.Report == nil {
			t.Errorf("%s: %s", wr.Preset, r.Error)
		}
	}
	if len(byName) != 4 {
		t.Fatalf("workloads %v", cmp.Workloads)
	}
	rf1, rf3, lat := byName["cluster-rf1-acks1"], byName["cluster-rf3-acksall"], byName["cluster-e2e-rf3"]
	if rf3.Results[0].Report.Workload.TopicConfigs["min.insync.replicas"] != "2" {
		t.Errorf("rf3 topic configs %v", rf3.Results[0].Report.Workload.TopicConfigs)
	}
	v, ok := findRatio(rf3.Ratios, "produce", "rec/s", clusterTargetName, "cluster-rf1-acks1")
	if want := rf3.Results[0].Report.Role("produce").RecordsPerSec / rf1.Results[0].Report.Role("produce").RecordsPerSec; !ok || v != want {
		t.Errorf("rf3/rf1 ratio %v (%v), want %v", v, ok, want)
	}
	// The latency run takes half of the RF=3 produce peak, measuring none.
	if r := lat.Results[0].Report; r.Peak != nil || r.PeakRate != peakRate(rf3.Results[0].Report) || r.Rate != r.PeakRate/2 {
		t.Errorf("e2e: peak %v rate %v; rf3 produced %v rec/s", r.PeakRate, r.Rate, rf3.Results[0].Report.Role("produce").RecordsPerSec)
	}
	for _, g := range cmp.Goals {
		decided := g.Status == "pass" || g.Status == "fail"
		if decided != (g.Target == clusterTargetName) {
			t.Errorf("goal %q on %s: %s (%s)", g.Goal, g.Target, g.Status, g.Detail)
		}
		if g.Target == clusterTargetName && g.Preset == "cluster-rf3-acksall" && g.Value != v {
			t.Errorf("ratio goal value %v, ratio %v", g.Value, v)
		}
	}
	text := out.String()
	for _, want := range []string{"== cluster-rf3-acksall", "min.insync.replicas=2", "shale-cluster: produce rec/s", "of cluster-rf1-acks1's",
		"replicated presets (3 brokers):", "shale-cluster vs baseline", "3 brokers: e2e latency"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	var md bytes.Buffer
	cmp.WriteMarkdown(&md)
	for _, want := range []string{"Replicated presets (3 brokers):", "| workload | role | shale-cluster rec/s |", "shale-cluster vs baseline |",
		"| `cluster-e2e-rf3` | consume |", "| `produce-1p-100b-acks1` | produce |", "`cluster-e2e-rf3` on shale-cluster: offered"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// The single-node table has no cluster columns, and the other way round.
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(line, "| workload |") && strings.Contains(line, "kfake") == strings.Contains(line, clusterTargetName) {
			t.Errorf("table mixes or lacks targets: %s", line)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(text)
		t.Log(md.String())
	}
}

// inprocCluster is a 3-broker kfake in this process, as a cluster target.
type inprocCluster struct{}

func (inprocCluster) name() string     { return clusterTargetName }
func (inprocCluster) describe() string { return "kfake, 3 brokers" }
func (inprocCluster) brokers() int     { return 3 }
func (inprocCluster) start(ctx context.Context) (*runningTarget, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		return nil, err
	}
	return &runningTarget{bootstrap: c.ListenAddrs(), stop: func() error { c.Close(); return nil }}, nil
}

func TestCompareClusterRF3Fails(t *testing.T) {
	presets := quickPresets(t, "cluster")
	for i := range presets {
		if presets[i].Workload.ReplicationFactor == 3 {
			// As many replicas as brokers plus one: creating the topic
			// fails at once, standing in for a replicated run that fails.
			presets[i].Workload.ReplicationFactor = 4
		}
	}
	cfg := compareConfig{presets: presets, duration: 300 * time.Millisecond, warmup: 0, targets: []target{inprocCluster{}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cfg.out = &out
	cmp, err := runCompare(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "cluster-rf3-acksall on shale-cluster") {
		t.Errorf("err = %v", err)
	}
	if len(cmp.Workloads) != 3 {
		t.Fatalf("%d workloads", len(cmp.Workloads))
	}
	if r := cmp.Workloads[0].Results[0]; r.Error != "" {
		t.Errorf("rf1: %s", r.Error)
	}
	if r := cmp.Workloads[2].Results[0]; !strings.HasPrefix(r.Error, "not run: cluster-rf3-acksall") || r.Report != nil {
		t.Errorf("e2e after a failed rf3: %+v", r)
	}
	for _, g := range cmp.Goals {
		if g.Target == clusterTargetName && g.Status != "pending" {
			t.Errorf("goal %q: %s (%s)", g.Goal, g.Status, g.Detail)
		}
	}
	if !strings.Contains(out.String(), "PENDING") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestCompareClusterPresetsWithoutCluster(t *testing.T) {
	cfg := compareConfig{presets: quickPresets(t, "cluster-rf1-acks1"), duration: 100 * time.Millisecond, targets: []target{inprocKfake{}}}
	var out bytes.Buffer
	cfg.out = &out
	cmp, err := runCompare(context.Background(), cfg)
	if err != nil || len(cmp.Workloads) != 0 {
		t.Fatalf("%v, %+v", err, cmp.Workloads)
	}
	if !strings.Contains(out.String(), "cluster-rf1-acks1: not run: it needs 3 brokers") {
		t.Errorf("output:\n%s", out.String())
	}
}

// envClusterBinary names a real shale binary for TestRealClusterMechanics.
const envClusterBinary = "SHALE_BENCH_CLUSTER_BINARY"

// TestRealClusterMechanics runs the replicated shapes on a real 3-node
// Shale cluster in variants that work whether or not the binary replicates
// yet: acks=1 to RF=3, acks=all to RF=1, and e2e (acks=all) on RF=1. Opt in: SHALE_BENCH_CLUSTER_BINARY=bin/shale.
func TestRealClusterMechanics(t *testing.T) {
	bin := os.Getenv(envClusterBinary)
	if bin == "" {
		t.Skip("set " + envClusterBinary + " to a shale binary to run")
	}
	ps := Presets()
	rf3 := ps["cluster-rf3-acksall"].Workload
	rf3.Acks = 1
	// e2e on RF=1: before replication the RF=3 high watermark never
	// moves, so consumers of an RF=3 topic receive nothing.
	lat := ps["cluster-e2e-rf3"].Workload
	lat.ReplicationFactor, lat.TopicConfigs, lat.RateOfPeak, lat.Rate = 1, nil, 0, 2000
	rf1all := ps["cluster-rf1-acks1"].Workload
	rf1all.Acks = -1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, w := range []Workload{rf3, lat, rf1all} {
		w.Duration, w.Warmup, w.BufferBytes = time.Second, 0, 1<<20
		rep, err := runOnTarget(ctx, shaleClusterTarget(bin, nil), w, nil, 0)
		if err != nil {
			t.Errorf("%s (acks=%s, rf %d): %v", w.Name, w.Acks, w.ReplicationFactor, err)
			continue
		}
		for _, s := range rep.Roles {
			t.Logf("%s acks=%s rf %d: %s %s rec/s, %d errors", w.Name, w.Acks, w.ReplicationFactor, s.Role, formatCount(s.RecordsPerSec), s.Errors)
			if s.Records == 0 {
				t.Errorf("%s: %s: no records", w.Name, s.Role)
			}
		}
		if rep.Lost != 0 {
			t.Errorf("%s: %d records lost", w.Name, rep.Lost)
		}
	}
}
