package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// target (To a target name) or by a machine limit (To a limit label).
type Ratio struct {
	Role   string  `json:"role"`
	Metric string  `json:"metric"`
	Of     string  `json:"of"`
	To     string  `json:"to"`
	Value  float64 `json:"value"`
}

// WorkloadResult is one preset run against every target.
type WorkloadResult struct {
	Preset      string         `json:"preset"`
	Description string         `json:"description"`
	Summary     string         `json:"summary"`
	Source      string         `json:"source"`
	Results     []TargetResult `json:"results"`
	Ratios      []Ratio        `json:"ratios,omitempty"`
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
	Machine         Machine          `json:"machine"`
	Started         time.Time        `json:"started"`
	Seconds         float64          `json:"seconds"`
	DurationSeconds float64          `json:"duration_per_workload_seconds"`
	Targets         []TargetStatus   `json:"targets"`
	Limits          []Limit          `json:"limits"`
	Workloads       []WorkloadResult `json:"workloads"`
	Goals           []GoalResult     `json:"goals"`
}

// compareConfig is a parsed `shale bench compare`.
type compareConfig struct {
	presets       []Preset
	duration      time.Duration
	warmup        time.Duration // negative: each preset's own
	targets       []target
	unavailable   []TargetStatus // targets that could not even be set up
	limits        bool
	probeDuration time.Duration
	diskDir       string
	progress      io.Writer
	out           io.Writer // tables as they complete; nil for JSON only
}

// goalSubject is the target the goals are about.
const goalSubject = "shale"

func runCompare(ctx context.Context, cfg compareConfig) (*Comparison, error) {
	began := time.Now()
	cmp := &Comparison{Machine: DescribeMachine(), Started: began.UTC(), DurationSeconds: cfg.duration.Seconds()}
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
	peaks := map[string]float64{} // target + shape -> closed-loop produce rec/s
	for _, p := range cfg.presets {
		if ctx.Err() != nil {
			break
		}
		w := p.Workload
		w.Duration, w.Records = cfg.duration, 0
		if cfg.warmup >= 0 {
			w.Warmup = cfg.warmup
		}
		wr := WorkloadResult{Preset: w.Name, Description: w.Description, Summary: w.Summary(), Source: p.Source}
		for _, t := range cfg.targets {
			st := status[t.name()]
			if !st.Available {
				wr.Results = append(wr.Results, TargetResult{Target: t.name(), Error: "not run: " + st.Reason})
				continue
			}
			rep, err := runOnTarget(ctx, t, w, cfg.progress, peaks[t.name()+"|"+shapeKey(w)])
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
			}
			wr.Results = append(wr.Results, res)
		}
		wr.Ratios = workloadRatios(&wr, &w, cmp.Limits)
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

// writeSummary prints the ratio table: one row per workload and role, each
// target's rate and p99, every pair's rate ratio and each target's share of
// the loopback limit. Then the goals.
func writeSummary(out io.Writer, cmp *Comparison) {
	names := cmp.availableTargets()
	fmt.Fprintf(out, "== summary (%v per workload and target; total %.0fs)\n", time.Duration(cmp.DurationSeconds*float64(time.Second)), cmp.Seconds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\trole\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s rec/s\t%s MB/s\t%s p99 ms\t", n, n, n)
	}
	for i, a := range names {
		for j, b := range names {
			if i < j {
				fmt.Fprintf(tw, "%s/%s\t", a, b)
			}
		}
	}
	for _, n := range names {
		fmt.Fprintf(tw, "%s/tcp\t", n)
	}
	fmt.Fprintln(tw)
	presets := Presets()
	for _, wr := range cmp.Workloads {
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
			for i, a := range names {
				for j, b := range names {
					if i < j {
						v, _ := findRatio(wr.Ratios, role, "rec/s", a, b)
						fmt.Fprintf(tw, "%s\t", formatRatio(v))
					}
				}
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
	fmt.Fprintln(out)
	fmt.Fprintf(out, "== goals (%s)\n", goalSubject)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, g := range cmp.Goals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(g.Status), g.Goal, g.Preset, g.Detail)
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
	goal      string
	preset    string
	role      string
	limit     string // a limit name
	other     string // a target name
	latency   func(*LatencySummary) float64
	threshold float64
}

var goals = []goalSpec{
	{goal: "produce 1 KiB, acks=1, 1 node: >= 50% of loopback TCP", preset: "produce-8p-1k-acks1", role: "produce", limit: limitLoopback, threshold: 0.5},
	{goal: "produce 1 KiB, acks=1, 1 node: >= 1.5x kfake", preset: "produce-8p-1k-acks1", role: "produce", other: "kfake", threshold: 1.5},
	{goal: "consume: >= 70% of loopback TCP", preset: "consume-1k", role: "consume", limit: limitLoopback, threshold: 0.7},
	{goal: "e2e latency at half of peak: p99 <= 10 ms", preset: "e2e-latency", role: "consume", latency: func(l *LatencySummary) float64 { return l.P99Ms }, threshold: 10},
	{goal: "e2e latency at half of peak: p99.9 <= 25 ms", preset: "e2e-latency", role: "consume", latency: func(l *LatencySummary) float64 { return l.P999Ms }, threshold: 25},
}

func evaluateGoals(cmp *Comparison) []GoalResult {
	var out []GoalResult
	presets := Presets()
	for _, g := range goals {
		res := GoalResult{Goal: g.goal, Target: goalSubject, Preset: g.preset, Threshold: g.threshold, Status: "pending"}
		var wr *WorkloadResult
		for i := range cmp.Workloads {
			if cmp.Workloads[i].Preset == g.preset {
				wr = &cmp.Workloads[i]
			}
		}
		if wr == nil {
			res.Detail = "preset not run"
			out = append(out, res)
			continue
		}
		s, ok := resultRole(wr, goalSubject, g.role)
		if !ok || s.Records == 0 {
			res.Detail = goalSubject + " did not run it"
			for _, r := range wr.Results {
				if r.Target == goalSubject && r.Error != "" {
					res.Detail = goalSubject + ": " + firstLines(r.Error, 1)
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
		case g.latency != nil:
			if s.Latency == nil {
				res.Detail = "no latencies recorded"
				break
			}
			res.Value = g.latency(s.Latency)
			res.Status = passFail(res.Value <= g.threshold)
			res.Detail = fmt.Sprintf("%s ms", formatMs(res.Value))
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
