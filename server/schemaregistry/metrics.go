package schemaregistry

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shalelog/shale/metadata"
)

// Metrics are the registry's Prometheus series: its HTTP requests by endpoint, method
// and status, their latency, and the size of the registry as this broker's image has
// it. Endpoints are the API's route patterns (/subjects/{subject}/versions), never the
// raw paths, so a series per subject name cannot grow without bound.
type Metrics struct {
	images   Images
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	subjects *prometheus.Desc
	schemas  *prometheus.Desc
}

// NewMetrics creates the series and registers them with reg (nil: not registered).
// images is read at scrape time for the size gauges; nil leaves them out.
func NewMetrics(reg prometheus.Registerer, images Images) *Metrics {
	m := &Metrics{
		images: images,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Subsystem: "schema_registry", Name: "requests_total",
			Help: "Schema registry HTTP requests answered, by endpoint (route pattern; \"other\" for paths no route matches), method and status code."},
			[]string{"endpoint", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "shale", Subsystem: "schema_registry", Name: "request_duration_seconds",
			Help: "Time from a schema registry request's headers to its response's end, by endpoint and method (writes include the controller round trip).",
			// 100µs (a read from the image) to ~15s (a write that waits out the write timeout).
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)}, []string{"endpoint", "method"}),
		subjects: prometheus.NewDesc("shale_schema_registry_subjects", "Subjects with at least one version that is not deleted, as this broker's metadata image has them.", nil, nil),
		schemas:  prometheus.NewDesc("shale_schema_registry_schemas", "Schema ids the registry serves (used by a live or soft-deleted subject version), as this broker's metadata image has them.", nil, nil),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, sizeCollector{m})
	}
	return m
}

// instrument counts and times the requests next serves. The endpoint is the pattern mux
// routes the request to, looked up before next runs so that an answer given before the
// route is reached (an authentication refusal) is still counted under its endpoint.
// A nil m returns next unchanged.
func (m *Metrics) instrument(mux *http.ServeMux, next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := mux.Handler(r)
		endpoint := endpointOf(pattern)
		method := methodLabel(r.Method)
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			// A panic that escapes next is still an answered request (net/http
			// closes the connection); count it as a 500 before it goes on up.
			code := rec.code
			if code == 0 {
				code = http.StatusOK
				if p := recover(); p != nil {
					code = http.StatusInternalServerError
					defer panic(p)
				}
			}
			m.requests.WithLabelValues(endpoint, method, strconv.Itoa(code)).Inc()
			m.latency.WithLabelValues(endpoint, method).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
	})
}

// endpointOf turns a ServeMux pattern ("GET /subjects/{subject}") into its path
// ("/subjects/{subject}"); no pattern (no route matched, or the method is not allowed)
// is "other".
func endpointOf(pattern string) string {
	if pattern == "" {
		return "other"
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		pattern = path
	}
	if p := strings.TrimSuffix(pattern, "{$}"); p != "" {
		return p
	}
	return pattern
}

// methodLabel bounds the method label to HTTP's methods: any string can be sent as one.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

// statusRecorder remembers the status code a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// sizeCollector reports the registry's size at scrape time, so that writes pay nothing
// for it.
type sizeCollector struct{ m *Metrics }

func (c sizeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.subjects
	ch <- c.m.schemas
}

func (c sizeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.m.images == nil {
		return
	}
	var reg *metadata.SchemaRegistry
	if im := c.m.images.Current(); im != nil {
		reg = im.SchemaRegistry
	}
	subjects, ids := 0, map[int32]struct{}{}
	if reg != nil {
		for _, versions := range reg.Subjects {
			live := false
			for _, v := range versions {
				ids[v.SchemaID] = struct{}{}
				live = live || !v.Deleted
			}
			if live {
				subjects++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.m.subjects, prometheus.GaugeValue, float64(subjects))
	ch <- prometheus.MustNewConstMetric(c.m.schemas, prometheus.GaugeValue, float64(len(ids)))
}
