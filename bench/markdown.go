package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteMarkdown prints a comparison as Markdown tables, the form
// bench/RESULTS.md keeps them in.
func (cmp *Comparison) WriteMarkdown(out io.Writer) {
	fmt.Fprintf(out, "Measured %s, %v per workload and target, %.0f s in all.\n\n",
		cmp.Started.Format(time.DateTime+" MST"), time.Duration(cmp.DurationSeconds*float64(time.Second)), cmp.Seconds)
	fmt.Fprintf(out, "Machine: %s.\n\n", cmp.Machine)
	for _, t := range cmp.Targets {
		if t.Available {
			fmt.Fprintf(out, "- **%s**: %s\n", t.Name, t.Description)
		} else {
			fmt.Fprintf(out, "- **%s**: not run (%s)\n", t.Name, firstLines(t.Reason, 1))
		}
	}
	fmt.Fprintln(out)

	if len(cmp.Limits) > 0 {
		fmt.Fprintln(out, "| machine limit | MB/s | messages/s |")
		fmt.Fprintln(out, "|---|---:|---:|")
		for _, l := range cmp.Limits {
			msgs := "-"
			if l.RecordsPerSec > 0 {
				msgs = formatCount(l.RecordsPerSec)
			}
			mb := formatFloat(l.MBPerSec)
			if l.Error != "" {
				mb = "error: " + l.Error
			}
			fmt.Fprintf(out, "| %s | %s | %s |\n", l.Label(), mb, msgs)
		}
		fmt.Fprintln(out)
	}

	for _, sec := range cmp.sections() {
		if sec.title != "" {
			fmt.Fprintf(out, "%s%s:\n\n", strings.ToUpper(sec.title[:1]), sec.title[1:])
		}
		writeMarkdownTable(out, cmp, sec)
	}

	var notes []string
	for _, wr := range cmp.Workloads {
		for _, r := range wr.Results {
			if r.Report != nil && r.Report.Rate > 0 && r.Report.PeakRate > 0 {
				notes = append(notes, fmt.Sprintf("`%s` on %s: offered %s rec/s, half of its %s rec/s peak",
					wr.Preset, r.Target, formatCount(r.Report.Rate), formatCount(r.Report.PeakRate)))
			}
			if r.Report != nil && r.Report.GroupFallback {
				notes = append(notes, fmt.Sprintf("`%s` on %s: no consumer groups, partitions assigned directly", wr.Preset, r.Target))
			}
			if r.Error != "" && !strings.HasPrefix(r.Error, "not run: ") {
				notes = append(notes, fmt.Sprintf("`%s` on %s: error: %s", wr.Preset, r.Target, firstLines(r.Error, 1)))
			}
		}
	}
	for _, n := range notes {
		fmt.Fprintf(out, "- %s\n", n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(out)
	}

	fmt.Fprintf(out, "| goal (%s) | preset | measured | status |\n|---|---|---|---|\n", goalSubjects())
	for _, g := range cmp.Goals {
		fmt.Fprintf(out, "| %s | `%s` | %s | %s |\n", g.Goal, g.Preset, g.Detail, strings.ToUpper(g.Status))
	}
}

// writeMarkdownTable is one section's table: each target's figures, the
// ratio columns, and each target's share of the loopback limit.
func writeMarkdownTable(out io.Writer, cmp *Comparison, sec section) {
	names := sec.names
	var head, align []string
	head = append(head, "workload", "role")
	align = append(align, "---", "---")
	for _, n := range names {
		head = append(head, n+" rec/s", n+" MB/s", n+" p50 / p99 / p99.9 ms")
		align = append(align, "---:", "---:", "---:")
	}
	heads, ratio := sec.ratioColumns()
	for _, h := range heads {
		if !sec.versus {
			h += " rec/s"
		}
		head = append(head, h)
		align = append(align, "---:")
	}
	for _, n := range names {
		head = append(head, n+" % of loopback")
		align = append(align, "---:")
	}
	fmt.Fprintf(out, "| %s |\n|%s|\n", strings.Join(head, " | "), strings.Join(align, "|"))
	presets := Presets()
	for _, wr := range sec.workloads {
		w := presets[wr.Preset].Workload
		for _, role := range workloadRoles(&wr) {
			cells := []string{"`" + wr.Preset + "`", role}
			for _, n := range names {
				s, ok := resultRole(&wr, n, role)
				if !ok {
					cells = append(cells, "-", "-", "-")
					continue
				}
				lat := "-"
				if l := s.Latency; l != nil {
					lat = formatMs(l.P50Ms) + " / " + formatMs(l.P99Ms) + " / " + formatMs(l.P999Ms)
				}
				cells = append(cells, formatCount(s.RecordsPerSec), formatFloat(s.MBPerSec), lat)
			}
			for i := range heads {
				cells = append(cells, ratio(&wr, role, i))
			}
			for _, n := range names {
				s, ok := resultRole(&wr, n, role)
				lb := findLimit(cmp.Limits, limitLoopback, int(w.recordBytes()), roleStreams(&w, role))
				if !ok {
					cells = append(cells, "-")
					continue
				}
				cells = append(cells, percentOf(s.MBPerSec, lb))
			}
			fmt.Fprintf(out, "| %s |\n", strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(out)
}

func (cmp *Comparison) availableTargets() []string {
	var names []string
	for _, t := range cmp.Targets {
		if t.Available {
			names = append(names, t.Name)
		}
	}
	return names
}

// workloadRoles lists the roles any target reported, in first-seen order.
func workloadRoles(wr *WorkloadResult) []string {
	seen := map[string]bool{}
	var order []string
	for _, r := range wr.Results {
		if r.Report == nil {
			continue
		}
		for _, s := range r.Report.Roles {
			if !seen[s.Role] {
				seen[s.Role] = true
				order = append(order, s.Role)
			}
		}
	}
	return order
}
