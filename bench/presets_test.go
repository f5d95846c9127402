package bench

import (
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
	all, err := ResolvePresets("default")
	if err != nil || len(all) != len(presetOrder) {
		t.Errorf("default: %d presets, %v", len(all), err)
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
