package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shalelog/shale/bench/nullbroker"
	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/internal/flagusage"
)

// valueFunc adapts a getter and a setter to flag.Value.
type valueFunc struct {
	get func() string
	set func(string) error
}

func (v *valueFunc) String() string {
	if v == nil || v.get == nil {
		return ""
	}
	return v.get()
}

func (v *valueFunc) Set(s string) error { return v.set(s) }

// parseByteSize parses a byte count: a number with an optional unit, B,
// KiB/k, MiB/m, GiB/g (powers of 1024) or KB, MB, GB (powers of 1000).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]int64{
		"": 1, "b": 1,
		"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || mult == 0 || n < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 1024, 1KiB, 1MiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return n * mult, nil
}

// formatSize writes a byte count the way parseByteSize reads it, in the
// largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func sizeFlag(p *int64) *valueFunc {
	return &valueFunc{
		get: func() string { return formatSize(*p) },
		set: func(s string) error {
			n, err := parseByteSize(s)
			if err == nil {
				*p = n
			}
			return err
		},
	}
}

func intSizeFlag(p *int, max int64) *valueFunc {
	return &valueFunc{
		get: func() string { return formatSize(int64(*p)) },
		set: func(s string) error {
			n, err := parseByteSize(s)
			if err != nil {
				return err
			}
			if n > max {
				return fmt.Errorf("%q exceeds %d", s, max)
			}
			*p = int(n)
			return nil
		},
	}
}

// commonFlags are the flags every run command has besides the workload.
type commonFlags struct {
	bootstrap string
	json      bool
	progress  bool
	preset    string
	// clientID, when set, replaces the bench's own client ids (shale-bench-producer,
	// shale-bench-consumer) on every client of the run, so that a client quota can
	// single out one run's clients among others on the same cluster.
	clientID string
	// security is --command-config's TLS and SASL settings.
	security client.Security
}

func bindWorkload(fs *flag.FlagSet, w *Workload, c *commonFlags) {
	fs.StringVar(&c.bootstrap, "bootstrap-server", "127.0.0.1:9092", "comma-separated `host:port` list of seed brokers")
	fs.BoolVar(&c.json, "json", false, "print the report as JSON on stdout instead of a table")
	fs.BoolVar(&c.progress, "progress", true, "print a progress line to stderr every second")
	fs.StringVar(&c.clientID, "client-id", "", "client `id` of every client of the run, for quotas and logs (default: shale-bench-producer, shale-bench-consumer, shale-bench-admin)")
	fs.StringVar(&c.preset, "preset", "", "start from the workload of this `name` (see shale bench presets); other flags override it")
	fs.Func("command-config", "Kafka client properties `file` for a secured listener (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location)",
		func(path string) error {
			s, err := client.LoadSecurity(path)
			c.security = s
			return err
		})

	fs.StringVar(&w.Topic, "topic", w.Topic, "`name` of the topic to use, created if missing")
	fs.Var(&valueFunc{
		get: func() string { return strconv.Itoa(int(w.Partitions)) },
		set: func(s string) error {
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return errors.New("not an integer")
			}
			w.Partitions = int32(n)
			return nil
		},
	}, "partitions", "`count` of partitions of a created topic")
	fs.Var(&valueFunc{
		get: func() string { return strconv.Itoa(int(w.ReplicationFactor)) },
		set: func(s string) error {
			n, err := strconv.ParseInt(s, 10, 16)
			if err != nil {
				return errors.New("not an integer")
			}
			w.ReplicationFactor = int16(n)
			return nil
		},
	}, "replication-factor", "replication factor of a created topic, a `count` (-1: broker default)")
	fs.Var(&valueFunc{
		get: func() string {
			var kv []string
			for _, k := range sortedKeys(w.TopicConfigs) {
				kv = append(kv, k+"="+w.TopicConfigs[k])
			}
			return strings.Join(kv, ",")
		},
		set: func(s string) error {
			k, v, ok := strings.Cut(s, "=")
			if !ok || k == "" {
				return errors.New("want name=value, e.g. min.insync.replicas=2")
			}
			// A fresh map: a preset's may be shared.
			m := maps.Clone(w.TopicConfigs)
			if m == nil {
				m = map[string]string{}
			}
			m[k] = v
			w.TopicConfigs = m
			return nil
		},
	}, "topic-config", "`name=value` config of a created topic, e.g. min.insync.replicas=2 (repeatable)")
	fs.Var(intSizeFlag(&w.RecordSize, 1<<30), "record-size", "record value `size` (bytes, or with a unit: 1KiB)")
	fs.Var(&valueFunc{get: func() string { return w.Keys.String() }, set: func(s string) error {
		k, err := ParseKeyDist(s)
		if err == nil {
			w.Keys = k
		}
		return err
	}}, "keys", "record keys, `none|random|fixed:N` (drawn from N keys); keys are 16 bytes")
	fs.Var(&valueFunc{get: func() string { return w.Acks.String() }, set: func(s string) error {
		a, err := ParseAcks(s)
		if err == nil {
			w.Acks = a
		}
		return err
	}}, "acks", "required acks, `all|1|0` (all is -1); 0 and 1 turn idempotence off")
	fs.Var(&valueFunc{get: func() string { return w.Compression }, set: func(s string) error {
		if err := validCompression(s); err != nil {
			return err
		}
		w.Compression = s
		return nil
	}}, "compression", "batch compression `codec`: none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&w.Linger, "linger", w.Linger, "how long a partition's batch waits to fill")
	fs.Var(&valueFunc{
		get: func() string { return strconv.Itoa(int(w.BatchMaxBytes)) },
		set: func(s string) error {
			n, err := parseByteSize(s)
			if err != nil {
				return err
			}
			if n > 1<<30 {
				return errors.New("at most 1GiB")
			}
			w.BatchMaxBytes = int32(n)
			return nil
		},
	}, "batch-max-bytes", "largest batch per partition (a `size`, e.g. 1MiB)")
	fs.Var(sizeFlag(&w.BufferBytes), "buffer-bytes", "records each producer keeps in flight, a `size` in bytes (at most 50000 records)")
	fs.IntVar(&w.Producers, "producers", w.Producers, "`count` of producer clients")
	fs.IntVar(&w.Consumers, "consumers", w.Consumers, "`count` of consumer clients")
	fs.StringVar(&w.Group, "group", w.Group, "consume as a consumer group with this name `prefix` (default: assign partitions directly)")
	fs.DurationVar(&w.Duration, "duration", w.Duration, "how long to measure producing (or consuming); 0 with --records")
	fs.DurationVar(&w.Warmup, "warmup", w.Warmup, "produce this long before measuring (not counted in any figure)")
	fs.Int64Var(&w.Records, "records", w.Records, "`count` of records to measure, produced (or consumed) after the warm-up, whose records come on top; the first of --duration and --records ends the run")
	fs.Float64Var(&w.Rate, "rate", w.Rate, "total `records/s` offered open loop (0: as fast as acknowledged); latency counts from each record's intended send time")
	fs.BoolVar(&w.Preload, "preload", w.Preload, "consume: produce the records to read first (with the producer flags and limits)")
}

// parseWorkloadArgs parses `shale bench produce|consume|e2e` flags. With
// --preset the preset is the base, and flags given explicitly override it.
// A -h prints the flags to helpOut.
func parseWorkloadArgs(mode Mode, args []string, helpOut io.Writer) (Workload, commonFlags, error) {
	parse := func(w *Workload, c *commonFlags, quiet bool) error {
		fs := flag.NewFlagSet("shale bench "+string(mode), flag.ContinueOnError)
		bindWorkload(fs, w, c)
		help := helpOut
		if quiet {
			help = io.Discard
		}
		if err := parseFlags(fs, args, help, "shale bench "+string(mode)+" [flags]", modeHelp[mode]); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		return nil
	}
	w, c := DefaultWorkload(mode), commonFlags{}
	if err := parse(&w, &c, false); err != nil {
		return Workload{}, c, err
	}
	if c.preset != "" {
		p, err := LookupPreset(c.preset)
		if err != nil {
			return Workload{}, c, err
		}
		if p.Workload.Mode != mode {
			return Workload{}, c, fmt.Errorf("preset %s is a %s workload; run `shale bench %s --preset %s`",
				c.preset, p.Workload.Mode, p.Workload.Mode, c.preset)
		}
		w, c = p.Workload, commonFlags{}
		if err := parse(&w, &c, true); err != nil {
			return Workload{}, c, err
		}
	}
	if w.Rate > 0 {
		w.RateOfPeak = 0
	}
	return w, c, w.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// compareFlags is `shale bench compare`'s command line.
type compareFlags struct {
	presets     string
	duration    time.Duration
	warmup      time.Duration
	targets     string
	cluster     bool
	shaleBinary string
	shaleArgs   listFlag
	// baselineBinary is another shale binary (say, main before a change) run as the
	// target baselineTargetName, for before-and-after ratios from one run.
	baselineBinary string
	external       listFlag
	kfakeMode      string
	nullRetain     int64
	rate           float64
	limits         bool
	probeDuration  time.Duration
	diskDir        string
	json           bool
	markdown       bool
	progress       bool
}

// parseCompareArgs parses `shale bench compare` flags; a -h prints them to
// helpOut.
func parseCompareArgs(args []string, helpOut io.Writer) (compareFlags, error) {
	f := compareFlags{}
	fs := flag.NewFlagSet("shale bench compare", flag.ContinueOnError)
	fs.StringVar(&f.presets, "preset", "default", "comma-separated `list` of presets or groups ("+strings.Join(sortedKeys(presetGroups), ", ")+")")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long each workload is measured on each target")
	f.warmup = -1
	fs.Var(&valueFunc{
		get: func() string {
			if f.warmup < 0 {
				return "" // each preset's own
			}
			return f.warmup.String()
		},
		set: func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return errors.New("want a duration such as 1s")
			}
			f.warmup = d
			return nil
		},
	}, "warmup", "warm-up `duration` before each measurement (default: each preset's own, 1s)")
	fs.StringVar(&f.targets, "targets", "shale,kfake,"+nullTargetName, "`list` of targets to run, in order: shale, kfake, "+nullTargetName+" (a broker that only acknowledges: the ceiling), "+clusterTargetName+" (a 3-node Shale cluster); plus every --external")
	fs.BoolVar(&f.cluster, "cluster", false, "also run the replicated presets (--preset cluster) on a 3-node Shale cluster (target "+clusterTargetName+")")
	fs.StringVar(&f.shaleBinary, "shale-binary", "", "`path` of the shale binary to start with serve (default: this binary, when it is shale)")
	fs.Var(&f.shaleArgs, "shale-arg", "extra `flag` for shale serve (repeatable)")
	fs.StringVar(&f.baselineBinary, "baseline-binary", "", "`path` of another shale binary (say, built before a change) to run as the target "+baselineTargetName+" right after shale, with the same --shale-arg flags")
	fs.Var(&f.external, "external", "also run against a running cluster: `name=host:port[,host:port]` (repeatable)")
	fs.StringVar(&f.kfakeMode, "kfake-mode", "auto", "`mode`: run kfake and "+nullTargetName+" in their own processes (process), in this one (inprocess), or in their own when this binary is shale (auto)")
	f.nullRetain = nullbroker.DefaultRetainBytes
	fs.Var(sizeFlag(&f.nullRetain), "null-retain-bytes", "record batches the "+nullTargetName+" target keeps in memory for consumers, over all partitions (`size`, e.g. 1GiB); the oldest go first")
	fs.Float64Var(&f.rate, "rate", 0, "offer this many `records/s` to every target in the open-loop presets (e2e-latency, cluster-e2e-rf3) instead of half of each target's own peak, to compare latency at equal load")
	fs.BoolVar(&f.limits, "limits", true, "measure loopback TCP and disk write limits first")
	fs.DurationVar(&f.probeDuration, "probe-duration", 2*time.Second, "how long each machine-limit probe runs")
	fs.StringVar(&f.diskDir, "disk-dir", os.TempDir(), "`dir`ectory for the disk probe (Shale's data goes under the temp dir too)")
	fs.BoolVar(&f.json, "json", false, "print the comparison as JSON on stdout instead of tables")
	fs.BoolVar(&f.markdown, "markdown", false, "print the comparison as Markdown tables (as in bench/RESULTS.md) instead")
	fs.BoolVar(&f.progress, "progress", true, "print a progress line to stderr every second")
	if err := parseFlags(fs, args, helpOut, "shale bench compare [flags]", compareHelp); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.duration <= 0 {
		return f, errors.New("--duration must be positive")
	}
	if f.json && f.markdown {
		return f, errors.New("--json and --markdown are alternatives")
	}
	if f.rate < 0 {
		return f, errors.New("--rate must be positive (0: half of each target's peak)")
	}
	if f.limits && f.probeDuration <= 0 {
		return f, errors.New("--probe-duration must be positive")
	}
	switch f.kfakeMode {
	case "auto", "process", "inprocess":
	default:
		return f, fmt.Errorf("--kfake-mode must be auto, process or inprocess, got %q", f.kfakeMode)
	}
	for _, t := range splitList(f.targets) {
		if t != "shale" && t != "kfake" && t != nullTargetName && t != clusterTargetName && t != baselineTargetName {
			return f, fmt.Errorf("unknown target %q in --targets (want shale, kfake, %s, %s; add others with --external)", t, nullTargetName, clusterTargetName)
		}
	}
	if f.baselineBinary != "" && !slices.Contains(splitList(f.targets), baselineTargetName) {
		ts := splitList(f.targets)
		at := len(ts)
		if i := slices.Index(ts, "shale"); i >= 0 {
			at = i + 1
		}
		f.targets = strings.Join(slices.Insert(ts, at, baselineTargetName), ",")
	}
	if f.baselineBinary == "" && slices.Contains(splitList(f.targets), baselineTargetName) {
		return f, fmt.Errorf("target %s needs --baseline-binary", baselineTargetName)
	}
	if f.cluster {
		if !slices.Contains(splitList(f.targets), clusterTargetName) {
			f.targets += "," + clusterTargetName
		}
		if !slices.Contains(splitList(f.presets), "cluster") && !slices.Contains(splitList(f.presets), "all") {
			f.presets += ",cluster"
		}
	}
	for _, e := range f.external {
		name, addrs, ok := strings.Cut(e, "=")
		if !ok || name == "" || len(splitList(addrs)) == 0 {
			return f, fmt.Errorf("--external %q: want name=host:port", e)
		}
		if name == "shale" || name == "kfake" || name == nullTargetName || name == clusterTargetName || name == baselineTargetName {
			return f, fmt.Errorf("--external %q: the names shale, kfake, %s and %s are taken", e, nullTargetName, clusterTargetName)
		}
	}
	return f, nil
}

// selfBinary is how compare finds programs to start: the running
// executable, and whether it is the shale binary (the test binary is not).
type selfBinary struct {
	path    string
	isShale bool
	// kfakePrefix precedes the hidden `kfake-serve` and `null-serve` on a
	// child's command line, and kfakeEnv is added to its environment.
	kfakePrefix []string
	kfakeEnv    []string
}

func defaultSelf() selfBinary {
	exe, err := os.Executable()
	if err != nil {
		return selfBinary{}
	}
	return selfBinary{path: exe, isShale: filepath.Base(exe) == "shale", kfakePrefix: []string{"bench"}}
}

// shaleBinary finds the binary to start with `serve`, or says why there is
// none.
func shaleBinary(f compareFlags, self selfBinary) (path, reason string) {
	bin := f.shaleBinary
	if bin == "" && self.isShale {
		bin = self.path
	}
	if bin == "" {
		return "", "no shale binary: not running as shale and no --shale-binary (Shale: pending)"
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		if err != nil {
			return "", err.Error()
		}
		return "", fmt.Sprintf("%s is not an executable file", bin)
	}
	return bin, ""
}

// buildTargets turns the flags into the ordered target list, plus the
// targets that cannot run and why.
func buildTargets(f compareFlags, self selfBinary) ([]target, []TargetStatus) {
	var ts []target
	var skipped []TargetStatus
	for _, name := range splitList(f.targets) {
		switch name {
		case "shale", clusterTargetName:
			about := "Shale single node"
			if name == clusterTargetName {
				about = fmt.Sprintf("Shale %d-node cluster", clusterNodes)
			}
			bin, reason := shaleBinary(f, self)
			if reason != "" {
				skipped = append(skipped, TargetStatus{Name: name, Description: about, Reason: reason})
				continue
			}
			if name == "shale" {
				ts = append(ts, shaleTarget(bin, f.shaleArgs))
			} else {
				ts = append(ts, shaleClusterTarget(bin, f.shaleArgs))
			}
		case baselineTargetName:
			bin, reason := shaleBinary(compareFlags{shaleBinary: f.baselineBinary}, selfBinary{})
			if reason != "" {
				skipped = append(skipped, TargetStatus{Name: name, Description: "Shale single node (baseline)", Reason: reason})
				continue
			}
			t := shaleTarget(bin, f.shaleArgs)
			t.label, t.about = baselineTargetName, fmt.Sprintf("Shale single node, baseline (%s serve)", bin)
			ts = append(ts, t)
		case "kfake", nullTargetName:
			useProcess := f.kfakeMode == "process" || (f.kfakeMode == "auto" && self.isShale)
			switch {
			case name == "kfake" && useProcess && self.path != "":
				ts = append(ts, kfakeProcessTarget(self.path, self.kfakePrefix, self.kfakeEnv))
			case name == "kfake":
				ts = append(ts, inprocKfake{})
			case useProcess && self.path != "":
				ts = append(ts, nullProcessTarget(self.path, self.kfakePrefix, self.kfakeEnv, f.nullRetain))
			default:
				ts = append(ts, inprocNull{retain: f.nullRetain})
			}
		}
	}
	for _, e := range f.external {
		name, addrs, _ := strings.Cut(e, "=")
		ts = append(ts, &externalTarget{label: name, bootstrap: splitList(addrs)})
	}
	return ts, skipped
}

// parseFlags parses args into fs. For -h it prints the usage to helpOut
// as the other shale commands do (flags spelt --name) and returns
// flag.ErrHelp; other errors come back for the caller to print.
func parseFlags(fs *flag.FlagSet, args []string, helpOut io.Writer, synopsis, about string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(helpOut, "Usage: %s\n\n%s\n\nFlags:\n", synopsis, about)
		flagusage.Print(helpOut, fs)
	}
	return err
}
