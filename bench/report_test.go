package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestFormatters(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -1234: "-1,234"} {
		if got := formatCount(in); got != want {
			t.Errorf("formatCount(%v) = %q, want %q", in, got, want)
		}
	}
	if formatCount(math.NaN()) != "-" {
		t.Error("NaN count")
	}
	for in, want := range map[float64]string{1234.6: "1235", 56.78: "56.8", 1.234: "1.23", 0: "0.00"} {
		if got := formatFloat(in); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0.1234: "0.123", 1.5: "1.50", 250: "250"} {
		if got := formatMs(in); got != want {
			t.Errorf("formatMs(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{1.523: "1.52x", 12.34: "12.3x", 0: "-", math.Inf(1): "-"} {
		if got := formatRatio(in); got != want {
			t.Errorf("formatRatio(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int64]string{100: "100 B", 1024: "1 KiB", 8196: "8196 B", 1 << 20: "1 MiB", 1000012: "1000012 B"} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%v) = %q, want %q", in, got, want)
		}
	}
}

func sampleReport() *Report {
	w := DefaultWorkload(ModeE2E)
	w.Name = "sample"
	return &Report{
		Workload:  w,
		Target:    "kfake",
		Bootstrap: []string{"127.0.0.1:1"},
		Started:   time.Unix(0, 0).UTC(),
		Rate:      5000,
		PeakRate:  10000,
		Roles: []RoleStats{
			{Role: "produce", Records: 12345, Bytes: 12345 * 1024, Seconds: 2.5, RecordsPerSec: 4938, MBPerSec: 5.06,
				Latency: &LatencySummary{Count: 12345, P50Ms: 0.5, P95Ms: 1.25, P99Ms: 3.5, P999Ms: 7.75, MaxMs: 12}, LatencyKind: "send→ack"},
			{Role: "consume", Records: 12345, Bytes: 12345 * 1024, Seconds: 2.5, RecordsPerSec: 4938, MBPerSec: 5.06},
		},
		Notes: []string{"a note"},
	}
}

func TestReportTable(t *testing.T) {
	var b bytes.Buffer
	sampleReport().WriteTable(&b)
	out := b.String()
	for _, want := range []string{"sample: e2e, 1 KiB records", "12,345", "4,938", "5.06", "0.500", "1.25", "3.50", "7.75", "12.0",
		"send→ack", "offered rate: 5,000 rec/s", "note: a note", "p99.9 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The consume row has no latencies: dashes, not zeros.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "consume") && strings.Count(line, " - ") < 4 && !strings.Contains(line, "consumer") {
			t.Errorf("consume row without latencies: %q", line)
		}
	}
}

func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if back.Role("produce").Latency.P999Ms != 7.75 || back.Workload.Acks != -1 || back.Workload.Keys.Kind != KeysNone {
		t.Errorf("round trip: %+v", back)
	}
	for _, key := range []string{`"records_per_sec"`, `"mb_per_sec"`, `"p99_9_ms"`, `"acks": "all"`, `"keys": "none"`} {
		if !strings.Contains(b.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	if r := (*Report)(nil).Role("x"); r.Role != "x" || r.Records != 0 {
		t.Error("Role on nil report")
	}
}

func TestProgressLine(t *testing.T) {
	m := newMeter("produce", "send→ack")
	m.add(1500, 1500*1024, time.Second)
	m.newRecorder().record(2 * time.Millisecond)
	m.fail(errTest("x"))
	line := progressLine("w @ t", 3*time.Second, []*meter{m})
	for _, want := range []string{"[w @ t]", "3s", "produce 1,500 rec/s", "1.54 MB/s", "p99 2.00", "errors 1"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
}
