package schemaregistry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shalelog/shale/controller/controllertest"
)

// The request counters move by endpoint pattern, method and status, the latency
// histogram counts every request, and the size gauges follow registrations and deletes.
func TestMetrics(t *testing.T) {
	n := controllertest.Start(t)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, n.Broker)
	srv := httptest.NewServer(New(Options{Images: n.Broker, Store: n.Broker, Metrics: m}).Handler())
	t.Cleanup(srv.Close)
	r := &registry{t: t, url: srv.URL}

	count := func(endpoint, method, code string) float64 {
		var out dto.Metric
		if err := m.requests.WithLabelValues(endpoint, method, code).Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetCounter().GetValue()
	}
	// value is a gathered gauge's value, or a histogram's sample count over its series.
	value := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			sum := 0.0
			for _, s := range mf.GetMetric() {
				if h := s.GetHistogram(); h != nil {
					sum += float64(h.GetSampleCount())
				} else {
					sum += s.GetGauge().GetValue()
				}
			}
			return sum
		}
		t.Fatalf("%s not gathered", name)
		return 0
	}
	gauges := func() string {
		return fmt.Sprintf("subjects=%v schemas=%v", value("shale_schema_registry_subjects"), value("shale_schema_registry_schemas"))
	}
	if got := gauges(); got != "subjects=0 schemas=0" {
		t.Fatalf("empty registry: %s", got)
	}

	r.do("POST", "/subjects/a-value/versions", map[string]any{"schema": userV1}, 200)
	r.do("POST", "/subjects/b-value/versions", map[string]any{"schema": userV1}, 200) // the same id
	r.do("POST", "/subjects/b-value/versions", map[string]any{"schema": userV2}, 200)
	r.do("GET", "/subjects/a-value/versions/latest", nil, 200)
	r.fail("GET", "/subjects/nope/versions/1", nil, 40401)
	r.fail("GET", "/subjects/other-subject/versions/1", nil, 40401)

	for _, c := range []struct {
		endpoint, method, code string
		want                   float64
	}{
		{"/subjects/{subject}/versions", "POST", "200", 3},
		{"/subjects/{subject}/versions/{version}", "GET", "200", 1},
		{"/subjects/{subject}/versions/{version}", "GET", "404", 2}, // two subjects, one series
	} {
		if got := count(c.endpoint, c.method, c.code); got != c.want {
			t.Errorf("requests_total{%s %s %s} = %v, want %v", c.endpoint, c.method, c.code, got, c.want)
		}
	}

	// No route, and a route without the method: "other", never the raw path.
	for _, req := range []struct{ method, path string }{{"GET", "/no/such/path"}, {"PATCH", "/subjects"}} {
		rq, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := count("other", "GET", "404"); got != 1 {
		t.Errorf("unrouted GET counted %v times under other/404", got)
	}
	if got := count("other", "PATCH", "405"); got != 1 {
		t.Errorf("PATCH /subjects counted %v times under other/405", got)
	}
	series := make(chan prometheus.Metric, 100)
	m.requests.Collect(series)
	if got := len(series); got != 5 {
		t.Errorf("%d request series, want 5", got)
	}
	if got := value("shale_schema_registry_request_duration_seconds"); got != 8 {
		t.Errorf("latency histogram counted %v requests, want 8", got)
	}

	if got := gauges(); got != "subjects=2 schemas=2" {
		t.Errorf("after two subjects with two schemas: %s", got)
	}
	r.do("DELETE", "/subjects/a-value", nil, 200)
	// a-value's schema is still served by id (b-value version 1 and the soft delete).
	if got := gauges(); got != "subjects=1 schemas=2" {
		t.Errorf("after a soft delete: %s", got)
	}
}
