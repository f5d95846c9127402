package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// TargetStatus says whether a target took part in a comparison.
type TargetStatus struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Available   bool   `json:"available"`
	Reason      string `json:"reason,omitempty"`
}

// TargetResult is one workload on one target.
type TargetResult struct {
	Target string  `json:"target"`
	Report *Report `json:"report,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Ratio is one figure of one target divided by the same figure of another
// target (To a target name), by a machine limit (To a limit label), or by
// the same target's figure in the preset's Versus preset (To that preset's
// name).
type Ratio struct {
	Role   string  `json:"role"`
	Metric string  `json:"metric"`
	Of     string  `json:"of"`
	To     string  `json:"to"`
	Value  float64 `json:"value"`
}

// WorkloadResult is one preset run against every target.
type WorkloadResult struct {
	Preset      string `json:"preset"`
	Description string `json:"description"`
	Summary     string `json:"summary"`
	Source      string `json:"source"`
	// Brokers and Versus are the preset's (see Preset).
	Brokers int            `json:"brokers,omitempty"`
	Versus  string         `json:"versus,omitempty"`
	Results []TargetResult `json:"results"`
	Ratios  []Ratio        `json:"ratios,omitempty"`
}

// GoalResult is one of the goals checked against this run.
type GoalResult struct {
	Goal      string  `json:"goal"`
	Target    string  `json:"target"`
	Preset    string  `json:"preset"`
	Value     float64 `json:"value,omitempty"`
	Threshold float64 `json:"threshold"`
	// Status is pass, fail or pending (the figures are missing).
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Comparison is everything one `shale bench compare` measured.
type Comparison struct {
	Machine         Machine   `json:"machine"`
	Started         time.Time `json:"started"`
	Seconds         float64   `json:"seconds"`
	DurationSeconds float64   `json:"duration_per_workload_seconds"`
	// FixedRate is --rate: the records/s every target was offered in the open-loop
	// presets, instead of half of its own peak (0).
	FixedRate float64          `json:"fixed_rate,omitempty"`
	Targets   []TargetStatus   `json:"targets"`
	Limits    []Limit          `json:"limits"`
	Workloads []WorkloadResult `json:"workloads"`
	Goals     []GoalResult     `json:"goals"`
}

// compareConfig is a parsed `shale bench compare`.
type compareConfig struct {
	presets  []Preset
	duration time.Duration
	warmup   time.Duration // negative: each preset's own
	// rate, when positive, replaces the fraction of each target's peak that the
	// open-loop presets offer, so that every target sees the same load.
	rate          float64
	targets       []target
	unavailable   []TargetStatus // targets that could not even be set up
	limits        bool
	probeDuration time.Duration
	diskDir       string
	progress      io.Writer
	out           io.Writer // tables as they complete; nil for JSON only
}

// goalSubject is the target most of the goals are about; the
// replication goals are about clusterTargetName.
const goalSubject = "shale"

func runCompare(ctx context.Context, cfg compareConfig) (*Comparison, error) {
	began := time.Now()
	cmp := &Comparison{Machine: DescribeMachine(), Started: began.UTC(), DurationSeconds: cfg.duration.Seconds(), FixedRate: cfg.rate}
	out := cfg.out
	if out == nil {
		out = io.Discard
	}
	for _, t := range cfg.targets {
		cmp.Targets = append(cmp.Targets, TargetStatus{Name: t.name(), Description: t.describe(), Available: true})
	}
	cmp.Targets = append(cmp.Targets, cfg.unavailable...)
	fmt.Fprintf(out, "machine: %s\n", cmp.Machine)
	for _, ts := range cmp.Targets {
		if ts.Available {
			fmt.Fprintf(out, "target %s: %s\n", ts.Name, ts.Description)
		} else {
			fmt.Fprintf(out, "target %s: not run: %s\n", ts.Name, ts.Reason)
		}
	}
	fmt.Fprintln(out)

	var errs []error
	if cfg.limits {
		cmp.Limits = probeLimits(ctx, cfg)
		writeLimits(out, cmp.Limits)
	}

	status := map[string]*TargetStatus{}
	for i := range cmp.Targets {
		status[cmp.Targets[i].Name] = &cmp.Targets[i]
	}
	// Closed-loop peaks (rec/s) by target and shape, and by target and
	// preset, for the RateOfPeak presets that follow.
	peaks := map[string]float64{}
	for _, p := range cfg.presets {
		if ctx.Err() != nil {
			break
		}
		w := p.Workload
		w.Duration, w.Records = cfg.duration, 0
		if cfg.warmup >= 0 {
			w.Warmup = cfg.warmup
		}
		if cfg.rate > 0 && w.RateOfPeak > 0 {
			w.Rate, w.RateOfPeak = cfg.rate, 0
		}
		wr := WorkloadResult{Preset: w.Name, Description: w.Description, Summary: w.Summary(), Source: p.Source,
			Brokers: p.Brokers, Versus: p.Versus}
		var on []target
		for _, t := range cfg.targets {
			if runsOn(p, t) {
				on = append(on, t)
			}
		}
		if len(on) == 0 {
			fmt.Fprintf(out, "== %s: not run: %s\n\n", w.Name, noTargetReason(p))
			continue
		}
		for _, t := range on {
			st := status[t.name()]
			if !st.Available {
				wr.Results = append(wr.Results, TargetResult{Target: t.name(), Error: "not run: " + st.Reason})
				continue
			}
			peak := peaks[t.name()+"|"+shapeKey(w)]
			if p.PeakFrom != "" && w.RateOfPeak > 0 {
				peak = peaks[t.name()+"|preset:"+p.PeakFrom]
				if peak == 0 && ran(cmp, p.PeakFrom, t.name()) {
					// Measuring a peak of its own would fail the way
					// PeakFrom's did, and take as long.
					wr.Results = append(wr.Results, TargetResult{Target: t.name(),
						Error: fmt.Sprintf("not run: %s, whose peak it runs at a fraction of, measured none on %s", p.PeakFrom, t.name())})
					continue
				}
			}
			rep, err := runOnTarget(ctx, t, w, cfg.progress, peak)
			res := TargetResult{Target: t.name(), Report: rep}
			if err != nil {
				res.Error = err.Error()
				var se *startError
				if errors.As(err, &se) {
					// A target that does not start will not start for
					// the next workload either.
					st.Available, st.Reason = false, se.Error()
				} else {
					errs = append(errs, fmt.Errorf("%s on %s: %w", w.Name, t.name(), err))
				}
			}
			if rep != nil && rep.Error == "" && w.Rate == 0 && w.RateOfPeak == 0 {
				peaks[t.name()+"|"+shapeKey(w)] = peakRate(rep)
				peaks[t.name()+"|preset:"+w.Name] = peakRate(rep)
			}
			wr.Results = append(wr.Results, res)
		}
		wr.Ratios = workloadRatios(&wr, &w, cmp.Limits)
		if p.Versus != "" {
			for i := range cmp.Workloads {
				if cmp.Workloads[i].Preset == p.Versus {
					wr.Ratios = append(wr.Ratios, versusRatios(&wr, &cmp.Workloads[i])...)
				}
			}
		}
		cmp.Workloads = append(cmp.Workloads, wr)
		writeWorkload(out, &wr, &w, cmp.Limits)
	}
	cmp.Goals = evaluateGoals(cmp)
	cmp.Seconds = time.Since(began).Seconds()
	writeSummary(out, cmp)
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return cmp, errors.Join(errs...)
}

// ran says whether preset ran (or failed) on target earlier in cmp.
func ran(cmp *Comparison, preset, target string) bool {
	for _, wr := range cmp.Workloads {
		if wr.Preset != preset {
			continue
		}
		for _, r := range wr.Results {
			if r.Target == target && !strings.HasPrefix(r.Error, "not run: ") {
				return true
			}
		}
	}
	return false
}

// runsOn says whether compare runs preset p on target t: single-broker
// presets on single-broker targets, replicated presets on targets with
// enough brokers, and everything on external clusters, whose size compare
// does not know (a preset that needs more brokers than they have fails
// there and says why).
func runsOn(p Preset, t target) bool {
	b := t.brokers()
	switch {
	case b == 0:
		return true
	case p.Brokers > 1:
		return b >= p.Brokers
	default:
		return b == 1
	}
}

func noTargetReason(p Preset) string {
	if p.Brokers > 1 {
		return fmt.Sprintf("it needs %d brokers and no target has them (add --cluster, or %s to --targets)", p.Brokers, clusterTargetName)
	}
	return "it is for one broker and every target is a cluster (add shale or kfake to --targets)"
}

// versusRatios divides each target's rec/s and MB/s in wr by the same
// target's in base, role by role.
func versusRatios(wr, base *WorkloadResult) []Ratio {
	var rs []Ratio
	for _, a := range okReports(wr) {
		for _, as := range a.Report.Roles {
			bs, ok := resultRole(base, a.Target, as.Role)
			if !ok {
				continue
			}
			for _, m := range ratioMetrics {
				if m.name != "rec/s" && m.name != "MB/s" {
					continue // latencies differ by design between the two
				}
				if va, vb := m.get(as), m.get(bs); va > 0 && vb > 0 {
					rs = append(rs, Ratio{Role: as.Role, Metric: m.name, Of: a.Target, To: base.Preset, Value: va / vb})
				}
			}
		}
	}
	return rs
}

// startError marks a target that failed to start.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// runOnTarget starts a fresh target, runs w on it and stops it. A target
// that dies mid-run cancels the run.
func runOnTarget(ctx context.Context, t target, w Workload, progress io.Writer, peak float64) (*Report, error) {
	rt, err := t.start(ctx)
	if err != nil {
		return nil, &startError{err}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if rt.died != nil {
		go func() {
			select {
			case <-rt.died:
				cancel()
			case <-rctx.Done():
			}
		}()
	}
	rep, err := Run(rctx, w, RunOptions{Bootstrap: rt.bootstrap, Target: t.name(), Progress: progress, Peak: peak})
	if stopErr := rt.stop(); stopErr != nil {
		err = errors.Join(err, fmt.Errorf("stopping %s: %w", t.name(), stopErr))
	}
	return rep, err
}

// shapeKey identifies a workload's shape apart from its name, topic, limits
// and rate, so a RateOfPeak preset can reuse the peak of the preset it is
// the open-loop version of.
func shapeKey(w Workload) string {
	w.Name, w.Description, w.Topic = "", "", ""
	w.Rate, w.RateOfPeak, w.Duration, w.Records = 0, 0, 0, 0
	if w.Group != "" {
		w.Group = "group"
	}
	return fmt.Sprintf("%+v", w)
}

// probeLimits measures the loopback limit for every message size and
// stream count the presets use, and the disk limits.
func probeLimits(ctx context.Context, cfg compareConfig) []Limit {
	type key struct{ size, streams int }
	var keys []key
	seen := map[key]bool{}
	for _, p := range cfg.presets {
		w := p.Workload
		for _, n := range []int{w.Producers, w.Consumers} {
			k := key{int(w.recordBytes()), n}
			if n > 0 && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	var ls []Limit
	for _, k := range keys {
		l, err := ProbeLoopback(ctx, k.size, k.streams, cfg.probeDuration)
		if err != nil {
			l.Error = err.Error()
		}
		ls = append(ls, l)
	}
	for _, fsync := range []bool{false, true} {
		l, err := ProbeDisk(ctx, cfg.diskDir, 1<<20, fsync, cfg.probeDuration)
		if err != nil {
			l.Error = err.Error()
		}
		ls = append(ls, l)
	}
	return ls
}

func findLimit(ls []Limit, name string, size, streams int) *Limit {
	for i := range ls {
		l := &ls[i]
		if l.Name != name || l.Error != "" || l.MBPerSec <= 0 {
			continue
		}
		if name == limitLoopback && (l.MessageSize != size || l.Streams != streams) {
			continue
		}
		return l
	}
	return nil
}

// roleStreams is how many clients play a role, for the loopback probe with
// as many streams.
func roleStreams(w *Workload, role string) int {
	if role == "consume" {
		return w.Consumers
	}
	return w.Producers
}

// roleLimits returns the limits a role's MB/s is set against.
func roleLimits(ls []Limit, w *Workload, role string) []*Limit {
	var out []*Limit
	if l := findLimit(ls, limitLoopback, int(w.recordBytes()), roleStreams(w, role)); l != nil {
		out = append(out, l)
	}
	for _, n := range []string{limitPageCache, limitFsync} {
		if l := findLimit(ls, n, 0, 0); l != nil {
			out = append(out, l)
		}
	}
	return out
}

type metricFn struct {
	name string
	get  func(RoleStats) float64
}

var ratioMetrics = []metricFn{
	{"rec/s", func(s RoleStats) float64 { return s.RecordsPerSec }},
	{"MB/s", func(s RoleStats) float64 { return s.MBPerSec }},
	{"p50", latencyMetric(func(l *LatencySummary) float64 { return l.P50Ms })},
	{"p95", latencyMetric(func(l *LatencySummary) float64 { return l.P95Ms })},
	{"p99", latencyMetric(func(l *LatencySummary) float64 { return l.P99Ms })},
	{"p99.9", latencyMetric(func(l *LatencySummary) float64 { return l.P999Ms })},
	{"max", latencyMetric(func(l *LatencySummary) float64 { return l.MaxMs })},
}

func latencyMetric(f func(*LatencySummary) float64) func(RoleStats) float64 {
	return func(s RoleStats) float64 {
		if s.Latency == nil {
			return 0
		}
		return f(s.Latency)
	}
}

// okReports returns the results that measured something, in target order.
func okReports(wr *WorkloadResult) []TargetResult {
	var out []TargetResult
	for _, r := range wr.Results {
		if r.Report != nil && len(r.Report.Roles) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// workloadRatios sets every target's figures against every other target's
// and its MB/s against the machine's limits.
func workloadRatios(wr *WorkloadResult, w *Workload, ls []Limit) []Ratio {
	var rs []Ratio
	ok := okReports(wr)
	for i, a := range ok {
		for _, as := range a.Report.Roles {
			for j, b := range ok {
				if i == j {
					continue
				}
				bs := b.Report.Role(as.Role)
				for _, m := range ratioMetrics {
					if va, vb := m.get(as), m.get(bs); va > 0 && vb > 0 {
						rs = append(rs, Ratio{Role: as.Role, Metric: m.name, Of: a.Target, To: b.Target, Value: va / vb})
					}
				}
			}
			for _, l := range roleLimits(ls, w, as.Role) {
				if as.MBPerSec > 0 {
					rs = append(rs, Ratio{Role: as.Role, Metric: "MB/s", Of: a.Target, To: l.Label(), Value: as.MBPerSec / l.MBPerSec})
				}
			}
		}
	}
	return rs
}

func findRatio(rs []Ratio, role, metric, of, to string) (float64, bool) {
	for _, r := range rs {
		if r.Role == role && r.Metric == metric && r.Of == of && r.To == to {
			return r.Value, true
		}
	}
	return 0, false
}

func writeLimits(out io.Writer, ls []Limit) {
	fmt.Fprintln(out, "== machine limits")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "limit\tMB/s\tmsgs/s\tseconds\tnote")
	for _, l := range ls {
		note := l.Dir
		if l.Error != "" {
			note = "error: " + l.Error
		}
		msgs := "-"
		if l.RecordsPerSec > 0 {
			msgs = formatCount(l.RecordsPerSec)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\n", l.Label(), formatFloat(l.MBPerSec), msgs, l.Seconds, note)
	}
	tw.Flush()
	fmt.Fprintln(out)
}

func writeWorkload(out io.Writer, wr *WorkloadResult, w *Workload, ls []Limit) {
	per := fmt.Sprintf("%v per target", w.Duration)
	if w.Warmup > 0 && w.Mode != ModeConsume {
		per = fmt.Sprintf("%v warm-up + %s", w.Warmup, per)
	}
	fmt.Fprintf(out, "== %s: %s\n   %s; %s\n", wr.Preset, wr.Description, wr.Summary, per)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\trole\t%s\t\n", roleTableHeader)
	for _, r := range wr.Results {
		if r.Report == nil || len(r.Report.Roles) == 0 {
			continue
		}
		if r.Report.Peak != nil {
			for _, s := range r.Report.Peak.Roles {
				fmt.Fprintf(tw, "%s\tpeak %s\t%s\t\n", r.Target, s.Role, roleRow(s))
			}
		}
		for _, s := range r.Report.Roles {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r.Target, s.Role, roleRow(s))
		}
	}
	tw.Flush()
	for _, r := range wr.Results {
		if r.Report != nil && r.Report.Rate > 0 {
			fmt.Fprintf(out, "%s: offered %s rec/s open loop", r.Target, formatCount(r.Report.Rate))
			if r.Report.PeakRate > 0 {
				fmt.Fprintf(out, " (%.0f%% of its %s rec/s peak)", w.RateOfPeak*100, formatCount(r.Report.PeakRate))
			}
			fmt.Fprintln(out)
		}
		if r.Report != nil {
			for _, n := range r.Report.Notes {
				fmt.Fprintf(out, "%s: note: %s\n", r.Target, n)
			}
		}
		if wr.Versus != "" && r.Report != nil {
			for _, role := range workloadRoles(wr) {
				if v, ok := findRatio(wr.Ratios, role, "rec/s", r.Target, wr.Versus); ok {
					fmt.Fprintf(out, "%s: %s rec/s %s of %s's\n", r.Target, role, formatRatio(v), wr.Versus)
				}
			}
		}
		if r.Error != "" {
			fmt.Fprintf(out, "%s: %s\n", r.Target, firstLines(r.Error, 12))
		}
	}
	ok := okReports(wr)
	if len(ok) > 1 {
		fmt.Fprintln(out, "ratios (latency ratios below 1 mean faster):")
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		var pairs [][2]string
		fmt.Fprint(tw, "role\tmetric\t")
		for i, a := range ok {
			for j, b := range ok {
				if i != j {
					pairs = append(pairs, [2]string{a.Target, b.Target})
					fmt.Fprintf(tw, "%s/%s\t", a.Target, b.Target)
				}
			}
		}
		fmt.Fprintln(tw)
		for _, s := range ok[0].Report.Roles {
			for _, m := range ratioMetrics {
				var cells []string
				have := false
				for _, p := range pairs {
					v, found := findRatio(wr.Ratios, s.Role, m.name, p[0], p[1])
					have = have || found
					cells = append(cells, formatRatio(v))
				}
				if have {
					fmt.Fprintf(tw, "%s\t%s\t%s\t\n", s.Role, m.name, strings.Join(cells, "\t"))
				}
			}
		}
		tw.Flush()
	}
	if len(ls) > 0 && len(ok) > 0 {
		fmt.Fprintln(out, "share of machine limits (MB/s):")
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "target\trole\tMB/s\tloopback probe\t% loopback\t% pagecache\t% fsync\t\n")
		for _, r := range ok {
			for _, s := range r.Report.Roles {
				lb := findLimit(ls, limitLoopback, int(w.recordBytes()), roleStreams(w, s.Role))
				pc := findLimit(ls, limitPageCache, 0, 0)
				fs := findLimit(ls, limitFsync, 0, 0)
				label := "-"
				if lb != nil {
					label = fmt.Sprintf("%s x%d: %s MB/s", formatBytes(int64(lb.MessageSize)), lb.Streams, formatFloat(lb.MBPerSec))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, s.Role, formatFloat(s.MBPerSec), label,
					percentOf(s.MBPerSec, lb), percentOf(s.MBPerSec, pc), percentOf(s.MBPerSec, fs))
			}
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
}

func percentOf(v float64, l *Limit) string {
	if l == nil || l.MBPerSec <= 0 || v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v/l.MBPerSec)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// writeSummary prints the ratio tables, one per section (see sections):
// one row per workload and role, each target's rate and p99, every pair's
// rate ratio (or, for replicated presets, the rate over the baseline
// preset's) and each target's share of the loopback limit. Then the goals.
func writeSummary(out io.Writer, cmp *Comparison) {
	fmt.Fprintf(out, "== summary (%v per workload and target; total %.0fs)\n", time.Duration(cmp.DurationSeconds*float64(time.Second)), cmp.Seconds)
	for i, sec := range cmp.sections() {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if sec.title != "" {
			fmt.Fprintf(out, "%s:\n", sec.title)
		}
		writeSummaryTable(out, cmp, sec)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "== goals (%s)\n", goalSubjects())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, g := range cmp.Goals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(g.Status), g.Goal, g.Preset, g.Detail)
	}
	tw.Flush()
}

// section is a set of workloads summarized in one table, with the targets
// that ran them.
type section struct {
	title     string
	workloads []WorkloadResult
	names     []string
	// versus: the table shows rates over the Versus preset's instead of
	// ratios between targets.
	versus bool
}

// sections splits the workloads into the single-broker presets and the
// replicated ones, which run on other targets and are set against a
// baseline preset rather than against each other.
func (cmp *Comparison) sections() []section {
	single := section{}
	repl := section{title: fmt.Sprintf("replicated presets (%d brokers)", clusterNodes), versus: true}
	for _, wr := range cmp.Workloads {
		if wr.Brokers > 1 {
			repl.workloads = append(repl.workloads, wr)
		} else {
			single.workloads = append(single.workloads, wr)
		}
	}
	var out []section
	for _, sec := range []section{single, repl} {
		if len(sec.workloads) == 0 {
			continue
		}
		for _, n := range cmp.availableTargets() {
			ran := false
			for _, wr := range sec.workloads {
				for _, r := range wr.Results {
					ran = ran || r.Target == n
				}
			}
			if ran {
				sec.names = append(sec.names, n)
			}
		}
		out = append(out, sec)
	}
	return out
}

// pairs are the ratio columns of a section: every pair of targets, or
// every target over its baseline.
func (sec *section) ratioColumns() (heads []string, value func(wr *WorkloadResult, role string, col int) string) {
	type pair struct{ a, b string }
	var ps []pair
	for i, a := range sec.names {
		if sec.versus {
			heads = append(heads, a+" vs baseline")
			ps = append(ps, pair{a, ""})
			continue
		}
		for j, b := range sec.names {
			if i < j {
				heads = append(heads, a+"/"+b)
				ps = append(ps, pair{a, b})
			}
		}
	}
	return heads, func(wr *WorkloadResult, role string, col int) string {
		p := ps[col]
		if p.b == "" {
			if wr.Versus == "" {
				return "-"
			}
			v, _ := findRatio(wr.Ratios, role, "rec/s", p.a, wr.Versus)
			return formatRatio(v)
		}
		v, _ := findRatio(wr.Ratios, role, "rec/s", p.a, p.b)
		return formatRatio(v)
	}
}

func writeSummaryTable(out io.Writer, cmp *Comparison, sec section) {
	names := sec.names
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\trole\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s rec/s\t%s MB/s\t%s p99 ms\t", n, n, n)
	}
	heads, ratio := sec.ratioColumns()
	for _, h := range heads {
		fmt.Fprintf(tw, "%s\t", h)
	}
	for _, n := range names {
		fmt.Fprintf(tw, "%s/tcp\t", n)
	}
	fmt.Fprintln(tw)
	presets := Presets()
	for _, wr := range sec.workloads {
		w := presets[wr.Preset].Workload
		for _, role := range workloadRoles(&wr) {
			fmt.Fprintf(tw, "%s\t%s\t", wr.Preset, role)
			for _, n := range names {
				s, ok := resultRole(&wr, n, role)
				if !ok {
					fmt.Fprint(tw, "-\t-\t-\t")
					continue
				}
				p99 := "-"
				if s.Latency != nil {
					p99 = formatMs(s.Latency.P99Ms)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t", formatCount(s.RecordsPerSec), formatFloat(s.MBPerSec), p99)
			}
			for i := range heads {
				fmt.Fprintf(tw, "%s\t", ratio(&wr, role, i))
			}
			for _, n := range names {
				s, ok := resultRole(&wr, n, role)
				lb := findLimit(cmp.Limits, limitLoopback, int(w.recordBytes()), roleStreams(&w, role))
				if !ok {
					fmt.Fprint(tw, "-\t")
					continue
				}
				fmt.Fprintf(tw, "%s\t", percentOf(s.MBPerSec, lb))
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
}

func resultRole(wr *WorkloadResult, target, role string) (RoleStats, bool) {
	for _, r := range wr.Results {
		if r.Target == target && r.Report != nil {
			for _, s := range r.Report.Roles {
				if s.Role == role {
					return s, true
				}
			}
		}
	}
	return RoleStats{}, false
}

// goalSpec is one of the goals: a ratio to a machine limit or to
// another target (at least threshold), or a latency (at most threshold ms).
type goalSpec struct {
	goal    string
	target  string // the target the goal is about; goalSubject when empty
	preset  string
	role    string
	limit   string // a limit name
	other   string // a target name
	versus  bool   // against the same target's figure in the preset's Versus
	latency func(*LatencySummary) float64
	// threshold is a ratio (at least) or a latency in ms (at most).
	threshold float64
}

func (g *goalSpec) subject() string {
	if g.target != "" {
		return g.target
	}
	return goalSubject
}

// goalSubjects names the targets the goals are about, for headings.
func goalSubjects() string {
	var names []string
	for _, g := range goals {
		if !slices.Contains(names, g.subject()) {
			names = append(names, g.subject())
		}
	}
	return strings.Join(names, ", ")
}

var goals = []goalSpec{
	{goal: "produce 1 KiB, acks=1, 1 node: >= 50% of loopback TCP", preset: "produce-8p-1k-acks1", role: "produce", limit: limitLoopback, threshold: 0.5},
	{goal: "produce 1 KiB, acks=1, 1 node: >= 1.5x kfake", preset: "produce-8p-1k-acks1", role: "produce", other: "kfake", threshold: 1.5},
	{goal: "produce 1 KiB, acks=1, 1 node: >= 0.85x the null broker", preset: "produce-8p-1k-acks1", role: "produce", other: nullTargetName, threshold: 0.85},
	{goal: "consume: >= 70% of loopback TCP", preset: "consume-1k", role: "consume", limit: limitLoopback, threshold: 0.7},
	{goal: "e2e latency at half of peak: p99 <= 10 ms", preset: "e2e-latency", role: "consume", latency: func(l *LatencySummary) float64 { return l.P99Ms }, threshold: 10},
	{goal: "e2e latency at half of peak: p99.9 <= 25 ms", preset: "e2e-latency", role: "consume", latency: func(l *LatencySummary) float64 { return l.P999Ms }, threshold: 25},
	{goal: "3 brokers, 1 KiB: RF=3 acks=all produce >= 70% of RF=1 acks=1", target: clusterTargetName, preset: "cluster-rf3-acksall", role: "produce", versus: true, threshold: 0.7},
	{goal: "3 brokers: e2e latency, RF=3 acks=all at half of peak: p99 <= 15 ms", target: clusterTargetName, preset: "cluster-e2e-rf3", role: "consume", latency: func(l *LatencySummary) float64 { return l.P99Ms }, threshold: 15},
}

func evaluateGoals(cmp *Comparison) []GoalResult {
	var out []GoalResult
	presets := Presets()
	find := func(name string) *WorkloadResult {
		for i := range cmp.Workloads {
			if cmp.Workloads[i].Preset == name {
				return &cmp.Workloads[i]
			}
		}
		return nil
	}
	for _, g := range goals {
		subject := g.subject()
		res := GoalResult{Goal: g.goal, Target: subject, Preset: g.preset, Threshold: g.threshold, Status: "pending"}
		wr := find(g.preset)
		if wr == nil {
			res.Detail = "preset not run"
			out = append(out, res)
			continue
		}
		s, ok := resultRole(wr, subject, g.role)
		if !ok || s.Records == 0 {
			res.Detail = subject + " did not run it"
			for _, r := range wr.Results {
				if r.Target == subject && r.Error != "" {
					// One line: the detail sits in a table cell.
					first, _, more := strings.Cut(r.Error, "\n")
					res.Detail = subject + ": " + first
					if more {
						res.Detail += " (...)"
					}
				}
			}
			out = append(out, res)
			continue
		}
		w := presets[g.preset].Workload
		switch {
		case g.limit != "":
			l := findLimit(cmp.Limits, g.limit, int(w.recordBytes()), roleStreams(&w, g.role))
			if l == nil {
				res.Detail = "limit not measured"
				break
			}
			res.Value = s.MBPerSec / l.MBPerSec
			res.Status = passFail(res.Value >= g.threshold)
			res.Detail = fmt.Sprintf("%.1f%% (%s of %s MB/s)", 100*res.Value, formatFloat(s.MBPerSec), formatFloat(l.MBPerSec))
		case g.other != "":
			o, ok := resultRole(wr, g.other, g.role)
			if !ok || o.RecordsPerSec <= 0 {
				res.Detail = g.other + " did not run it"
				break
			}
			res.Value = s.RecordsPerSec / o.RecordsPerSec
			res.Status = passFail(res.Value >= g.threshold)
			res.Detail = fmt.Sprintf("%s (%s vs %s rec/s)", formatRatio(res.Value), formatCount(s.RecordsPerSec), formatCount(o.RecordsPerSec))
		case g.versus:
			base := find(wr.Versus)
			var o RoleStats
			if base != nil {
				o, _ = resultRole(base, subject, g.role)
			}
			if o.RecordsPerSec <= 0 {
				res.Detail = fmt.Sprintf("no %s figure from %s on %s", g.role, wr.Versus, subject)
				break
			}
			res.Value = s.RecordsPerSec / o.RecordsPerSec
			res.Status = passFail(res.Value >= g.threshold)
			res.Detail = fmt.Sprintf("%s (%s vs %s rec/s)", formatRatio(res.Value), formatCount(s.RecordsPerSec), formatCount(o.RecordsPerSec))
		case g.latency != nil:
			if s.Latency == nil {
				res.Detail = "no latencies recorded"
				break
			}
			res.Value = g.latency(s.Latency)
			if cmp.FixedRate > 0 && w.RateOfPeak > 0 {
				// The goal is about half of the peak; a --rate run answers another question.
				res.Detail = fmt.Sprintf("%s ms at the fixed --rate %s rec/s, not at half of peak", formatMs(res.Value), formatCount(cmp.FixedRate))
				break
			}
			res.Status = passFail(res.Value <= g.threshold)
			res.Detail = fmt.Sprintf("%s ms (p50 / p99 / p99.9: %s / %s / %s)", formatMs(res.Value),
				formatMs(s.Latency.P50Ms), formatMs(s.Latency.P99Ms), formatMs(s.Latency.P999Ms))
		}
		out = append(out, res)
	}
	return out
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}
