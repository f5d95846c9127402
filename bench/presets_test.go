package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPresetsValid(t *testing.T) {
	ps := Presets()
	if len(ps) != len(presetOrder) {
		t.Fatalf("%d presets, %d in presetOrder", len(ps), len(presetOrder))
	}
	topics := map[string]string{}
	for _, name := range presetOrder {
		p, ok := ps[name]
		if !ok {
			t.Fatalf("presetOrder names %q, which is not a preset", name)
		}
		w := p.Workload
		if w.Name != name || w.Description == "" || p.Source == "" {
			t.Errorf("%s: name %q description %q source %q", name, w.Name, w.Description, p.Source)
		}
		if err := w.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if other, dup := topics[w.Topic]; dup {
			t.Errorf("%s and %s share topic %q", name, other, w.Topic)
		}
		topics[w.Topic] = name
	}
	for g, names := range presetGroups {
		for _, n := range names {
			if _, ok := ps[n]; !ok {
				t.Errorf("group %s names unknown preset %s", g, n)
			}
		}
	}
}

func TestPresetShapes(t *testing.T) {
	ps := Presets()
	kreps := ps["kreps-produce"].Workload
	if kreps.Mode != ModeProduce || kreps.RecordSize != 100 || kreps.Partitions != 6 || kreps.Producers != 1 ||
		kreps.ReplicationFactor != 1 || kreps.Acks != 1 || kreps.BatchMaxBytes != 8196 || kreps.Linger != 0 {
		t.Errorf("kreps-produce: %+v", kreps)
	}
	kc := ps["kreps-consume"].Workload
	if kc.Mode != ModeConsume || kc.Consumers != 1 || !kc.Preload || kc.RecordSize != 100 || kc.Partitions != 6 {
		t.Errorf("kreps-consume: %+v", kc)
	}
	omb := ps["omb-1k"].Workload
	if omb.Mode != ModeE2E || omb.RecordSize != 1024 || omb.Partitions != 16 || omb.Producers != 4 || omb.Consumers != 4 ||
		omb.Acks != -1 || omb.Linger != time.Millisecond || omb.BatchMaxBytes != 131072 || omb.Group == "" || omb.Rate != 0 {
		t.Errorf("omb-1k: %+v", omb)
	}
	lat := ps["e2e-latency"].Workload
	if lat.RateOfPeak != 0.5 || lat.Rate != 0 {
		t.Errorf("e2e-latency rate: %+v", lat)
	}
	// The latency preset must reuse omb-1k's peak in compare.
	if shapeKey(lat) != shapeKey(omb) {
		t.Errorf("e2e-latency's shape differs from omb-1k's:\n%s\n%s", shapeKey(lat), shapeKey(omb))
	}
	if indexOf(presetOrder, "omb-1k") > indexOf(presetOrder, "e2e-latency") {
		t.Error("e2e-latency runs before omb-1k, whose peak it needs")
	}

	// The broker's matrix: {1,8} partitions x {100 B, 1 KiB} x {acks=1, all}.
	seen := map[[3]int]bool{}
	for _, name := range presetGroups["matrix"] {
		w := ps[name].Workload
		if w.Mode != ModeProduce || w.Producers != 1 {
			t.Errorf("%s: %+v", name, w)
		}
		seen[[3]int{int(w.Partitions), w.RecordSize, int(w.Acks)}] = true
	}
	for _, parts := range []int{1, 8} {
		for _, size := range []int{100, 1024} {
			for _, acks := range []int{1, -1} {
				if !seen[[3]int{parts, size, acks}] {
					t.Errorf("matrix lacks %d partitions, %d B, acks %d", parts, size, acks)
				}
			}
		}
	}
	for _, g := range goals {
		if _, ok := ps[g.preset]; !ok {
			t.Errorf("goal %q names unknown preset %s", g.goal, g.preset)
		}
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestResolvePresets(t *testing.T) {
	got, err := ResolvePresets("e2e-latency, kreps,kreps-produce")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Workload.Name)
	}
	// Compare order, no duplicates.
	if strings.Join(names, ",") != "kreps-produce,kreps-consume,e2e-latency" {
		t.Errorf("resolved %v", names)
	}
	def, err := ResolvePresets("default")
	if err != nil || len(def) != len(singleNodeOrder) {
		t.Errorf("default: %d presets, %v", len(def), err)
	}
	for _, p := range def {
		if p.Brokers > 1 {
			t.Errorf("default runs the replicated preset %s", p.Workload.Name)
		}
	}
	all, err := ResolvePresets("all")
	if err != nil || len(all) != len(presetOrder) {
		t.Errorf("all: %d presets, %v", len(all), err)
	}
	for _, bad := range []string{"", " , ", "kreps,nope"} {
		if _, err := ResolvePresets(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Presets returns fresh values each time.
	ps := Presets()
	w := ps["omb-1k"]
	w.Workload.Partitions = 1
	if Presets()["omb-1k"].Workload.Partitions != 16 {
		t.Error("Presets shares state between calls")
	}
}

func TestClusterPresets(t *testing.T) {
	ps := Presets()
	names := presetGroups["cluster"]
	if len(names) != 3 {
		t.Fatalf("cluster group %v", names)
	}
	for _, n := range names {
		if ps[n].Brokers != clusterNodes {
			t.Errorf("%s: brokers %d", n, ps[n].Brokers)
		}
		if !slices.Contains(presetOrder, n) || slices.Contains(singleNodeOrder, n) {
			t.Errorf("%s: not among the presets, or among the single-node ones", n)
		}
	}
	rf1, rf3, lat := ps["cluster-rf1-acks1"], ps["cluster-rf3-acksall"], ps["cluster-e2e-rf3"]
	if w := rf1.Workload; w.Mode != ModeProduce || w.ReplicationFactor != 1 || w.Acks != 1 || w.RecordSize != 1024 || len(w.TopicConfigs) != 0 {
		t.Errorf("rf1: %+v", w)
	}
	if w := rf3.Workload; w.Mode != ModeProduce || w.ReplicationFactor != 3 || w.Acks != -1 || w.TopicConfigs["min.insync.replicas"] != "2" {
		t.Errorf("rf3: %+v", w)
	}
	// The two throughput presets differ in replication and acks only.
	a, b := rf1.Workload, rf3.Workload
	a.Name, a.Description, a.Topic, a.ReplicationFactor, a.Acks, a.TopicConfigs = "", "", "", 0, 0, nil
	b.Name, b.Description, b.Topic, b.ReplicationFactor, b.Acks, b.TopicConfigs = "", "", "", 0, 0, nil
	if shapeKey(a) != shapeKey(b) {
		t.Errorf("rf1 and rf3 differ in more than replication:\n%s\n%s", shapeKey(a), shapeKey(b))
	}
	if a.Partitions != ps["omb-1k"].Workload.Partitions {
		t.Errorf("partitions %d, not the 1 KiB presets' %d", a.Partitions, ps["omb-1k"].Workload.Partitions)
	}
	if rf3.Versus != "cluster-rf1-acks1" || lat.PeakFrom != "cluster-rf3-acksall" {
		t.Errorf("versus %q, peak from %q", rf3.Versus, lat.PeakFrom)
	}
	if w := lat.Workload; w.Mode != ModeE2E || w.RateOfPeak != 0.5 || w.ReplicationFactor != 3 || w.Acks != -1 ||
		w.TopicConfigs["min.insync.replicas"] != "2" || w.Consumers < 1 || w.Group == "" {
		t.Errorf("e2e: %+v", w)
	}
	if indexOf(presetOrder, "cluster-rf1-acks1") > indexOf(presetOrder, "cluster-rf3-acksall") ||
		indexOf(presetOrder, "cluster-rf3-acksall") > indexOf(presetOrder, "cluster-e2e-rf3") {
		t.Error("a replicated preset runs before the one it needs")
	}
	if !strings.Contains(rf3.Workload.Summary(), "min.insync.replicas=2") {
		t.Errorf("summary %q", rf3.Workload.Summary())
	}
	// Each call hands out its own topic configs.
	ps["cluster-rf3-acksall"].Workload.TopicConfigs["min.insync.replicas"] = "1"
	if Presets()["cluster-rf3-acksall"].Workload.TopicConfigs["min.insync.replicas"] != "2" {
		t.Error("Presets shares topic configs between calls")
	}
}

func TestRunsOn(t *testing.T) {
	ps := Presets()
	single, repl := ps["omb-1k"], ps["cluster-rf3-acksall"]
	cluster := shaleClusterTarget("/x", nil)
	ext := &externalTarget{label: "k", bootstrap: []string{"h:1"}}
	for _, c := range []struct {
		p    Preset
		t    target
		want bool
	}{
		{single, inprocKfake{}, true},
		{single, shaleTarget("/x", nil), true},
		{single, cluster, false},
		{single, ext, true},
		{repl, inprocKfake{}, false},
		{repl, shaleTarget("/x", nil), false},
		{repl, cluster, true},
		{repl, ext, true},
	} {
		if got := runsOn(c.p, c.t); got != c.want {
			t.Errorf("%s on %s: %v", c.p.Workload.Name, c.t.name(), got)
		}
	}
}
