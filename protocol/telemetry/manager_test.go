package telemetry

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestManager(t *testing.T, maxSeries int) (*Manager, *fakeClock, *prometheus.Registry) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	reg := prometheus.NewRegistry()
	m := New(Config{MaxBytes: 4096, MaxSeries: maxSeries, Now: clk.now}, reg)
	return m, clk, reg
}

// payload builds an OTLP MetricsData with one gauge and one delta sum per node.
func payload(t *testing.T, nodes ...int64) []byte {
	t.Helper()
	var ms []*metricspb.Metric
	for _, n := range nodes {
		attrs := []*commonpb.KeyValue{{Key: "node_id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}}}
		ms = append(ms,
			&metricspb.Metric{Name: "org.apache.kafka.producer.node.request.latency.avg", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
				DataPoints: []*metricspb.NumberDataPoint{{Attributes: attrs, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: 1.5}}}}}},
			&metricspb.Metric{Name: "org.apache.kafka.producer.connection.creation.total", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{
				IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA,
				DataPoints: []*metricspb.NumberDataPoint{{Attributes: attrs, Value: &metricspb.NumberDataPoint_AsInt{AsInt: 2}}}}}},
		)
	}
	md := &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource:     &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "group_id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "g1"}}}}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: ms}},
	}}}
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var app = Client{ClientID: "app-1", SoftwareName: "kgo", SoftwareVersion: "1.22.3", SourceAddress: "127.0.0.1", SourcePort: "5000"}

func TestSubscriptionMatchingAndInterval(t *testing.T) {
	m, _, _ := newTestManager(t, 100)
	// No subscription: nothing requested, Kafka's default interval.
	sub, err := m.GetSubscription(nil, [16]byte{}, app)
	if err != nil {
		t.Fatal(err)
	}
	if sub.InstanceID == ([16]byte{}) || len(sub.Metrics) != 0 || sub.IntervalMs != 300000 || !sub.DeltaTemporality || sub.MaxBytes != 4096 {
		t.Fatalf("no subscription: %+v", sub)
	}
	if strings.HasPrefix(InstanceIDString(sub.InstanceID), "-") {
		t.Fatal("instance id string starts with '-'")
	}
	subs := metadata.ClientMetrics{
		"producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000", "match": "client_software_name=kgo"},
		"apps":      {"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000", "match": "client_id=app-.*"},
		"others":    {"metrics": "*", "interval.ms": "100", "match": "client_id=other"},
	}
	sub2, err := m.GetSubscription(subs, [16]byte{}, app)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sub2.Metrics, ","); got != "org.apache.kafka.consumer.,org.apache.kafka.producer." || sub2.IntervalMs != 1000 {
		t.Fatalf("matched: %+v", sub2)
	}
	if sub2.InstanceID == sub.InstanceID {
		t.Fatal("same instance id for two new clients")
	}
	other := app
	other.ClientID = "other"
	sub3, _ := m.GetSubscription(subs, [16]byte{}, other)
	if len(sub3.Metrics) != 1 || sub3.Metrics[0] != "" || sub3.IntervalMs != 100 {
		t.Fatalf("all metrics: %+v", sub3)
	}
	// match on the instance id itself.
	subs["mine"] = map[string]string{"metrics": "x.", "match": "client_instance_id=" + InstanceIDString(sub.InstanceID)}
	delete(subs, "apps")
	delete(subs, "producers")
	m.instances[sub.InstanceID].lastGet = time.Time{} // not throttled
	sub4, _ := m.GetSubscription(subs, sub.InstanceID, app)
	if len(sub4.Metrics) != 1 || sub4.Metrics[0] != "x." || sub4.InstanceID != sub.InstanceID || sub4.ID == sub.ID {
		t.Fatalf("by instance id: %+v (was %+v)", sub4, sub)
	}
}

func TestPushRules(t *testing.T) {
	m, clk, _ := newTestManager(t, 100)
	subs := metadata.ClientMetrics{"all": {"metrics": "*", "interval.ms": "1000"}}
	sub, err := m.GetSubscription(subs, [16]byte{}, app)
	if err != nil {
		t.Fatal(err)
	}
	id := sub.InstanceID
	// Asking again at once is throttled.
	if _, err := m.GetSubscription(subs, id, app); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("early get: %v", err)
	}
	// The first push after a Get is accepted at once.
	if err := m.Push(subs, id, app, sub.ID, false, 0, payload(t, 1)); err != nil {
		t.Fatal(err)
	}
	if err := m.Push(subs, id, app, sub.ID, false, 0, payload(t, 1)); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("early push: %v", err)
	}
	clk.add(time.Second)
	if err := m.Push(subs, id, app, sub.ID+1, false, 0, payload(t, 1)); !errors.Is(err, kerr.UnknownSubscriptionID) {
		t.Fatalf("wrong subscription id: %v", err)
	}
	if err := m.Push(subs, id, app, sub.ID, false, 7, payload(t, 1)); !errors.Is(err, kerr.UnsupportedCompressionType) {
		t.Fatalf("codec 7: %v", err)
	}
	clk.add(time.Second)
	if err := m.Push(subs, id, app, sub.ID, false, 0, make([]byte, 4097)); !errors.Is(err, kerr.TelemetryTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	clk.add(time.Second)
	if err := m.Push(subs, id, app, sub.ID, false, 0, []byte{0xff, 0xff, 0xff}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("garbage: %v", err)
	}
	clk.add(time.Second)
	if err := m.Push(subs, id, app, sub.ID, false, 1 /* gzip */, []byte("not gzip")); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("bad gzip: %v", err)
	}
	for _, codec := range []int8{1, 2, 3, 4} {
		clk.add(time.Second)
		comp, err := records.Default().Compress(int(codec), payload(t, 1), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Push(subs, id, app, sub.ID, false, codec, comp); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
	}
	// A subscription change makes the old id unknown; the Get right after is allowed.
	subs2 := metadata.ClientMetrics{"all": {"metrics": "*", "interval.ms": "500"}}
	if err := m.Push(subs2, id, app, sub.ID, false, 0, nil); !errors.Is(err, kerr.UnknownSubscriptionID) {
		t.Fatalf("after change: %v", err)
	}
	clk.add(time.Millisecond)
	sub2, err := m.GetSubscription(subs2, id, app)
	if err != nil || sub2.ID == sub.ID || sub2.IntervalMs != 500 {
		t.Fatalf("re-get: %+v %v", sub2, err)
	}
	if m.series.len() != 2 {
		t.Fatalf("series %d, want 2", m.series.len())
	}
	// A terminating push is accepted even inside the interval, removes the series, and
	// ends the instance: a later push is an invalid request.
	if err := m.Push(subs2, id, app, sub2.ID, false, 0, payload(t, 1)); err != nil {
		t.Fatal(err)
	}
	if err := m.Push(subs2, id, app, sub2.ID, true, 0, payload(t, 1)); err != nil {
		t.Fatalf("terminating: %v", err)
	}
	if m.series.len() != 0 {
		t.Fatalf("series after terminating: %d", m.series.len())
	}
	clk.add(time.Second)
	if err := m.Push(subs2, id, app, sub2.ID, false, 0, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("after terminating: %v", err)
	}
	if err := m.Push(subs2, [16]byte{}, app, sub2.ID, false, 0, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("zero id: %v", err)
	}
}

func TestExportCapAndExpiry(t *testing.T) {
	m, clk, reg := newTestManager(t, 3)
	subs := metadata.ClientMetrics{"all": {"metrics": "*", "interval.ms": "1000"}}
	sub, _ := m.GetSubscription(subs, [16]byte{}, app)
	if err := m.Push(subs, sub.InstanceID, app, sub.ID, false, 0, payload(t, 1)); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	if err := m.Push(subs, sub.InstanceID, app, sub.ID, false, 0, payload(t, 1)); err != nil {
		t.Fatal(err)
	}
	idStr := InstanceIDString(sub.InstanceID)
	want := `
# HELP client_org_apache_kafka_producer_connection_creation_total Pushed by a client (KIP-714 client telemetry).
# TYPE client_org_apache_kafka_producer_connection_creation_total counter
client_org_apache_kafka_producer_connection_creation_total{client_id="app-1",client_instance_id="` + idStr + `",client_software_name="kgo",client_software_version="1.22.3",group_id="g1",node_id="1"} 4
# HELP client_org_apache_kafka_producer_node_request_latency_avg Pushed by a client (KIP-714 client telemetry).
# TYPE client_org_apache_kafka_producer_node_request_latency_avg gauge
client_org_apache_kafka_producer_node_request_latency_avg{client_id="app-1",client_instance_id="` + idStr + `",client_software_name="kgo",client_software_version="1.22.3",group_id="g1",node_id="1"} 1.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"client_org_apache_kafka_producer_connection_creation_total", "client_org_apache_kafka_producer_node_request_latency_avg"); err != nil {
		t.Fatal(err)
	}
	// Two more nodes would make 6 series: the cap keeps 3 and counts the rest.
	clk.add(time.Second)
	if err := m.Push(subs, sub.InstanceID, app, sub.ID, false, 0, payload(t, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if n := m.series.len(); n != 3 {
		t.Fatalf("series %d, want the cap 3", n)
	}
	if got := testutil.ToFloat64(m.dropped); got != 3 {
		t.Fatalf("dropped %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.seriesGauge); got != 3 {
		t.Fatalf("series gauge %v", got)
	}
	// Three intervals without a push: the series expire.
	clk.add(3*time.Second + time.Millisecond)
	if n, err := testutil.GatherAndCount(reg, "client_org_apache_kafka_producer_node_request_latency_avg"); err != nil || n != 0 {
		t.Fatalf("after expiry: %d series, %v", n, err)
	}
	if len(m.instances) != 0 {
		t.Fatalf("instances after expiry: %d", len(m.instances))
	}
}

func TestTypeConflictDropped(t *testing.T) {
	s := newSeriesSet()
	var id [16]byte
	if d := s.add(id, nil, []point{{name: "client_x", kind: kindGauge, value: 1}}, 10); d != 0 {
		t.Fatal(d)
	}
	if d := s.add(id, nil, []point{{name: "client_x", kind: kindCounter, value: 1, labels: []label{{"a", "b"}}}}, 10); d != 1 {
		t.Fatalf("conflicting type kept: dropped %d", d)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"org.apache.kafka.x-y": "org_apache_kafka_x_y", "a:b": "a:b", "é": "_"} {
		if got := sanitizeName(in); got != want {
			t.Errorf("sanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"node.id": "node_id", "1x": "attr_1x", "__x": "attr___x", "a:b": "a_b"} {
		if got := sanitizeLabel(in); got != want {
			t.Errorf("sanitizeLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// The instances remembered are bounded as Kafka's cache is: the least recently heard
// from goes first.
func TestInstancesBounded(t *testing.T) {
	m, clk, _ := newTestManager(t, 100)
	first, err := m.GetSubscription(nil, [16]byte{}, app)
	if err != nil {
		t.Fatal(err)
	}
	for range maxInstances {
		clk.add(time.Microsecond)
		if _, err := m.GetSubscription(nil, [16]byte{}, app); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.instances) != maxInstances {
		t.Fatalf("%d instances, want %d", len(m.instances), maxInstances)
	}
	if m.instances[first.InstanceID] != nil {
		t.Fatal("the oldest instance was kept")
	}
}
