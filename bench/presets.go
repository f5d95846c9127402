package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Preset is a named workload that mirrors a published benchmark, or one
// cell of the broker's produce matrix.
type Preset struct {
	Workload Workload
	// Source says where the shape comes from.
	Source string
	// Brokers, above 1, makes this a replicated preset: it runs on targets
	// with at least that many brokers (and on external clusters), while the
	// others run on single-broker targets (see runsOn).
	Brokers int `json:"brokers,omitempty"`
	// PeakFrom names the preset whose closed-loop peak on the same target
	// a RateOfPeak workload takes its rate from, when the shapes differ
	// (a produce peak for an e2e run).
	PeakFrom string `json:"peak_from,omitempty"`
	// Versus names a preset whose figures on the same target this one's
	// are divided by (rec/s and MB/s of every role both have).
	Versus string `json:"versus,omitempty"`
}

// presetOrder is the order compare runs presets in: the e2e latency preset
// comes after omb-1k, whose peak it reuses.
var presetOrder = []string{
	"kreps-produce",
	"kreps-consume",
	"consume-1k",
	"omb-1k",
	"e2e-latency",
	"produce-1p-100b-acks1",
	"produce-1p-100b-acksall",
	"produce-1p-1k-acks1",
	"produce-1p-1k-acksall",
	"produce-8p-100b-acks1",
	"produce-8p-100b-acksall",
	"produce-8p-1k-acks1",
	"produce-8p-1k-acksall",
	"cluster-rf1-acks1",
	"cluster-rf3-acksall",
	"cluster-e2e-rf3",
	"fsync-rf3-1p-off",
	"fsync-rf3-1p-on",
	"fsync-rf3-4p-off",
	"fsync-rf3-4p-on",
	"fsync-rf3-16p-off",
	"fsync-rf3-16p-on",
}

// singleNodeOrder is the presets for one broker, what compare runs unless
// told otherwise.
var singleNodeOrder = presetOrder[:13]

// presetGroups are names for sets of presets in `compare --preset`.
var presetGroups = map[string][]string{
	"default": singleNodeOrder,
	"all":     presetOrder,
	// The replicated section: a 3-broker cluster (target shale-cluster).
	"cluster": {"cluster-rf1-acks1", "cluster-rf3-acksall", "cluster-e2e-rf3"},
	"kreps":   {"kreps-produce", "kreps-consume"},
	"omb":     {"omb-1k", "e2e-latency"},
	"matrix": {
		"produce-1p-100b-acks1", "produce-1p-100b-acksall", "produce-1p-1k-acks1", "produce-1p-1k-acksall",
		"produce-8p-100b-acks1", "produce-8p-100b-acksall", "produce-8p-1k-acks1", "produce-8p-1k-acksall",
	},
	// Durable acknowledgements (acks.all.fsync, issue 25) against Kafka's, at RF=3, with
	// 1, 4 and 16 producers: the group commit should keep the ratio near 1 as producers
	// are added. A 3-node Shale cluster.
	"fsync": {"fsync-rf3-1p-off", "fsync-rf3-1p-on", "fsync-rf3-4p-off", "fsync-rf3-4p-on", "fsync-rf3-16p-off", "fsync-rf3-16p-on"},
}

// Presets returns every preset by name. Each call builds fresh values, so
// callers may change what they get.
func Presets() map[string]Preset {
	ps := map[string]Preset{}
	add := func(name, desc, source string, w Workload) {
		w.Name, w.Description = name, desc
		ps[name] = Preset{Workload: w, Source: source}
	}

	// Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second
	// (On Three Cheap Machines)", 2014: ProducerPerformance with 100-byte
	// records, 6 partitions, one producer thread, no replication, acks=1,
	// batch.size=8196, buffer.memory=64MB, no linger.
	kreps := DefaultWorkload(ModeProduce)
	kreps.Topic = "bench-kreps"
	kreps.Partitions, kreps.ReplicationFactor = 6, 1
	kreps.RecordSize = 100
	kreps.Acks = 1
	kreps.Linger = 0
	kreps.BatchMaxBytes = 8196
	kreps.BufferBytes = 64 << 20
	kreps.Producers, kreps.Consumers = 1, 1
	add("kreps-produce", "Kreps 2014: 100 B records, 6 partitions, 1 producer, no replication",
		"Kreps 2014, single producer thread, no replication", kreps)

	// The same post's "single consumer throughput": one consumer reading the
	// 6-partition topic of 100-byte records written above.
	krepsConsume := kreps
	krepsConsume.Mode = ModeConsume
	krepsConsume.Topic = "bench-kreps-consume"
	krepsConsume.Preload = true
	add("kreps-consume", "Kreps 2014: the same topic read back by 1 consumer",
		"Kreps 2014, single consumer", krepsConsume)

	// Not from a publication: the consume goal (>= 70% of loopback TCP) is
	// stated for 1 KiB records, so this reads a 1 KiB topic with one consumer.
	consume1k := DefaultWorkload(ModeConsume)
	consume1k.Topic = "bench-consume-1k"
	consume1k.Partitions, consume1k.ReplicationFactor = 8, 1
	consume1k.RecordSize = 1024
	consume1k.Acks = 1
	consume1k.Producers, consume1k.Consumers = 1, 1
	consume1k.Preload = true
	add("consume-1k", "1 KiB records, 8 partitions, preloaded, read by 1 consumer",
		"Shale consume goal", consume1k)

	// OpenMessaging Benchmark, workloads/1-topic-16-partitions-1kb.yaml with
	// driver-kafka/kafka.yaml (acks=all, linger.ms=1, batch.size=131072, one
	// subscription), scaled to 2 cores as 4 producers and 4 consumers in one
	// group, at the maximum rate rather than OMB's fixed 50000/s.
	omb := DefaultWorkload(ModeE2E)
	omb.Topic = "bench-omb-1k"
	omb.Partitions, omb.ReplicationFactor = 16, 1
	omb.RecordSize = 1024
	omb.Acks = -1
	omb.Linger = time.Millisecond
	omb.BatchMaxBytes = 131072
	omb.Producers, omb.Consumers = 4, 4
	// Kafka's 32 MiB buffer.memory shared out over the four producers:
	// more in flight only adds queueing latency on two cores.
	omb.BufferBytes = 8 << 20
	omb.Group = "bench-omb-1k"
	add("omb-1k", "OMB 1 KiB: 16 partitions, 4 producers, 4 consumers (1 group), acks=all, max rate",
		"OpenMessaging Benchmark 1-topic-16-partitions-1kb, kafka.yaml driver", omb)

	// End-to-end latency at half of the peak measured by omb-1k: with the
	// load well below saturation the percentiles show the broker's own
	// latency rather than queueing in front of it.
	lat := omb
	lat.Topic = "bench-e2e-latency"
	lat.Group = "bench-e2e-latency"
	lat.RateOfPeak = 0.5
	add("e2e-latency", "OMB 1 KiB shape at a fixed rate of half its peak; send-to-receive latency",
		"Shale latency goal", lat)

	// The broker's produce matrix: one franz-go producer with its default
	// linger and batch size; 1 and 8 partitions, 100 B and 1 KiB records,
	// acks=1 and acks=all.
	for _, parts := range []int32{1, 8} {
		for _, size := range []int{100, 1024} {
			for _, acks := range []Acks{1, -1} {
				w := DefaultWorkload(ModeProduce)
				w.Partitions, w.ReplicationFactor = parts, 1
				w.RecordSize = size
				w.Acks = acks
				w.Producers = 1
				sizeName := "100b"
				if size == 1024 {
					sizeName = "1k"
				}
				ackName := "acks1"
				if acks == -1 {
					ackName = "acksall"
				}
				name := fmt.Sprintf("produce-%dp-%s-%s", parts, sizeName, ackName)
				w.Topic = "bench-" + name
				add(name, fmt.Sprintf("produce matrix: %s records, %d partition%s, 1 producer, acks=%s",
					formatBytes(int64(size)), parts, plural(int(parts)), acks), "Shale broker produce matrix", w)
			}
		}
	}

	// Replication on 3 brokers, in the OMB 1 KiB shape above (16 partitions
	// spread over the brokers, 4 producers, linger 1 ms, 128 KiB batches):
	// no replication and leader-only acks, against RF=3 with
	// min.insync.replicas=2 and acks=all, so the ratio of the two is what
	// replication costs; then send-to-receive latency on the replicated
	// topic at half of its peak.
	replicated := func(name, peakFrom, versus string) {
		p := ps[name]
		p.Brokers, p.PeakFrom, p.Versus = clusterNodes, peakFrom, versus
		ps[name] = p
	}
	rf1 := omb
	rf1.Mode = ModeProduce
	rf1.Consumers, rf1.Group = 0, ""
	rf1.Topic = "bench-cluster-rf1-acks1"
	rf1.ReplicationFactor, rf1.Acks = 1, 1
	add("cluster-rf1-acks1", "3 brokers: 1 KiB records, 16 partitions, RF=1, acks=1, 4 producers, max rate",
		"Shale replication goal (baseline)", rf1)
	replicated("cluster-rf1-acks1", "", "")

	rf3 := rf1
	rf3.Topic = "bench-cluster-rf3-acksall"
	rf3.ReplicationFactor, rf3.Acks = 3, -1
	rf3.TopicConfigs = map[string]string{"min.insync.replicas": "2"}
	add("cluster-rf3-acksall", "3 brokers: 1 KiB records, 16 partitions, RF=3, min.insync.replicas=2, acks=all, 4 producers, max rate",
		"Shale replication goal", rf3)
	replicated("cluster-rf3-acksall", "", "cluster-rf1-acks1")

	rf3lat := rf3
	rf3lat.Mode = ModeE2E
	rf3lat.Topic = "bench-cluster-e2e-rf3"
	rf3lat.Consumers, rf3lat.Group = 4, "bench-cluster-e2e-rf3"
	// Its own map: callers may change what they get.
	rf3lat.TopicConfigs = map[string]string{"min.insync.replicas": "2"}
	rf3lat.RateOfPeak = 0.5
	add("cluster-e2e-rf3", "3 brokers: the RF=3 acks=all shape at half of its produce peak, 4 consumers (1 group); send-to-receive latency",
		"Shale replication latency goal", rf3lat)
	replicated("cluster-e2e-rf3", "cluster-rf3-acksall", "")

	// acks.all.fsync=true against false in the RF=3 acks=all shape above, with 1, 4 and
	// 16 producers; each "on" preset runs right after its "off" one and is divided by it.
	for _, n := range []int{1, 4, 16} {
		for _, on := range []bool{false, true} {
			w := rf3
			w.Producers = n
			w.TopicConfigs = map[string]string{"min.insync.replicas": "2"}
			state := "off"
			if on {
				state = "on"
				w.TopicConfigs["acks.all.fsync"] = "true"
			}
			name := fmt.Sprintf("fsync-rf3-%dp-%s", n, state)
			w.Topic = "bench-" + name
			add(name, fmt.Sprintf("3 brokers: the RF=3 acks=all shape with %d producer%s, acks.all.fsync=%v", n, plural(n), on),
				"Shale durable acks goal (issue 25)", w)
			versus := ""
			if on {
				versus = fmt.Sprintf("fsync-rf3-%dp-off", n)
			}
			replicated(name, "", versus)
		}
	}
	return ps
}

// PresetNames lists every preset in compare order.
func PresetNames() []string { return append([]string(nil), presetOrder...) }

// LookupPreset returns the named preset.
func LookupPreset(name string) (Preset, error) {
	p, ok := Presets()[name]
	if !ok {
		return Preset{}, fmt.Errorf("unknown preset %q (see `shale bench presets`)", name)
	}
	return p, nil
}

// ResolvePresets expands a comma-separated list of preset and group names
// into presets, in compare order, without duplicates.
func ResolvePresets(spec string) ([]Preset, error) {
	all := Presets()
	want := map[string]bool{}
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if group, ok := presetGroups[name]; ok {
			for _, n := range group {
				want[n] = true
			}
			continue
		}
		if _, ok := all[name]; !ok {
			return nil, fmt.Errorf("unknown preset %q (groups: %s; presets: %s)", name,
				strings.Join(sortedKeys(presetGroups), ", "), strings.Join(presetOrder, ", "))
		}
		want[name] = true
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no presets selected")
	}
	var out []Preset
	for _, n := range presetOrder {
		if want[n] {
			out = append(out, all[n])
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
