package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// RoleStats is one role's figures in a run: "produce" (latency from
// intended send to acknowledgement), "consume" (in e2e runs, latency from
// intended send to receipt) or "preload" (the producing before a consume
// run). MB are 10^6 bytes of record keys and values.
type RoleStats struct {
	Role          string          `json:"role"`
	Records       int64           `json:"records"`
	Bytes         int64           `json:"bytes"`
	Seconds       float64         `json:"seconds"`
	RecordsPerSec float64         `json:"records_per_sec"`
	MBPerSec      float64         `json:"mb_per_sec"`
	Latency       *LatencySummary `json:"latency,omitempty"`
	LatencyKind   string          `json:"latency_kind,omitempty"`
	Errors        int64           `json:"errors,omitempty"`
	FirstError    string          `json:"first_error,omitempty"`
	// WarmupRecords completed before the measurement window opened: in no
	// figure, and on top of a --records count.
	WarmupRecords int64 `json:"warmup_records,omitempty"`
	// Abandoned counts closed-loop records not yet acknowledged when the
	// measurement ended (buffered, or in a request): failed instead of
	// waited for, and in no figure.
	Abandoned int64 `json:"abandoned,omitempty"`
}

// Report is the outcome of one workload run against one cluster.
type Report struct {
	Workload  Workload    `json:"workload"`
	Target    string      `json:"target,omitempty"`
	Bootstrap []string    `json:"bootstrap"`
	Started   time.Time   `json:"started"`
	Roles     []RoleStats `json:"roles"`
	// Rate is the offered open-loop rate (records/s); zero for closed loop.
	Rate float64 `json:"rate,omitempty"`
	// PeakRate is the closed-loop peak a RateOfPeak workload's rate was
	// taken from, and Peak that run when it was measured here.
	PeakRate float64 `json:"peak_rate,omitempty"`
	Peak     *Report `json:"peak,omitempty"`
	// Lost counts acknowledged records an e2e run never received.
	Lost int64 `json:"lost,omitempty"`
	// GroupFallback is set when the workload asked for a consumer group
	// and the cluster has none.
	GroupFallback bool     `json:"group_fallback,omitempty"`
	Notes         []string `json:"notes,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// Role returns the named role's figures, or zero figures if it did not run.
func (r *Report) Role(role string) RoleStats {
	if r != nil {
		for _, s := range r.Roles {
			if s.Role == role {
				return s
			}
		}
	}
	return RoleStats{Role: role}
}

// WriteJSON writes v indented.
func WriteJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// roleTableHeader and roleRow are shared by run and compare tables.
const roleTableHeader = "records\tseconds\trec/s\tMB/s\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\terrors"

func roleRow(s RoleStats) string {
	lat := "-\t-\t-\t-\t-"
	if l := s.Latency; l != nil {
		lat = strings.Join([]string{formatMs(l.P50Ms), formatMs(l.P95Ms), formatMs(l.P99Ms), formatMs(l.P999Ms), formatMs(l.MaxMs)}, "\t")
	}
	return strings.Join([]string{
		formatCount(float64(s.Records)),
		strconv.FormatFloat(s.Seconds, 'f', 2, 64),
		formatCount(s.RecordsPerSec),
		formatFloat(s.MBPerSec),
		lat,
		strconv.FormatInt(s.Errors, 10),
	}, "\t")
}

// WriteTable prints a run's figures as a table.
func (r *Report) WriteTable(out io.Writer) {
	fmt.Fprintf(out, "%s: %s\n", r.Workload.Name, r.Workload.Summary())
	switch boot := strings.Join(r.Bootstrap, ","); {
	case r.Target == "" || r.Target == boot:
		fmt.Fprintf(out, "target: %s\n", boot)
	default:
		fmt.Fprintf(out, "target: %s (%s)\n", r.Target, boot)
	}
	if r.Peak != nil {
		fmt.Fprintln(out, "peak run (closed loop):")
		writeRoles(out, r.Peak.Roles)
	}
	if r.Rate > 0 {
		fmt.Fprintf(out, "offered rate: %s rec/s open loop", formatCount(r.Rate))
		if r.PeakRate > 0 {
			fmt.Fprintf(out, " (%.0f%% of a %s rec/s peak)", r.Workload.RateOfPeak*100, formatCount(r.PeakRate))
		}
		fmt.Fprintln(out)
	}
	writeRoles(out, r.Roles)
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	if r.Error != "" {
		fmt.Fprintf(out, "error: %s\n", r.Error)
	}
}

func writeRoles(out io.Writer, roles []RoleStats) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "role\t%s\tlatency\t\n", roleTableHeader)
	for _, s := range roles {
		kind := s.LatencyKind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", s.Role, roleRow(s), kind)
	}
	tw.Flush()
}

// formatCount prints a count or rate with thousands separators.
func formatCount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatFloat prints with three significant digits, at most two decimals.
func formatFloat(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// formatMs prints milliseconds, with microsecond resolution below 1 ms.
func formatMs(ms float64) string {
	if ms < 1 {
		return strconv.FormatFloat(ms, 'f', 3, 64)
	}
	return formatFloat(ms)
}

// formatBytes prints a size as B, KiB or MiB when it divides evenly.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// formatRatio prints a ratio as "1.52x".
func formatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
		return "-"
	}
	if r >= 10 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "x"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "x"
}
