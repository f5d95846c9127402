package protocol_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/protocol/telemetry"
)

func withTelemetry(m *telemetry.Manager) brokerOpt {
	return func(c *protocol.Config) { c.Telemetry = m }
}

// alterClientMetrics sends one IncrementalAlterConfigs on a CLIENT_METRICS resource.
func alterClientMetrics(t *testing.T, cl *kgo.Client, name string, incremental bool, kv ...string) error {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	if !incremental {
		req := kmsg.NewPtrAlterConfigsRequest()
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
		for i := 0; i < len(kv); i += 2 {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			v := kv[i+1]
			c.Name, c.Value = kv[i], &v
			res.Configs = append(res.Configs, c)
		}
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = kv[i]
		if kv[i+1] == "<delete>" {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		} else {
			v := kv[i+1]
			c.Value = &v
		}
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
}

func describeClientMetrics(t *testing.T, cl *kgo.Client, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

func listClientMetrics(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	resp, err := kmsg.NewPtrListConfigResourcesRequest().RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range resp.ConfigResources {
		names = append(names, r.Name)
	}
	return names
}

// CLIENT_METRICS resources are altered (incrementally and whole), described with
// Kafka's defaults, listed, validated with Kafka's errors, and removed when their last
// config is deleted.
func TestClientMetricsConfigs(t *testing.T) {
	tb := startBroker(t)
	cl := tb.client(kgo.DisableClientMetrics())
	if err := alterClientMetrics(t, cl, "producers", true, "metrics", "org.apache.kafka.producer.", "interval.ms", "1000", "match", "client_id=app-.*"); err != nil {
		t.Fatal(err)
	}
	if err := alterClientMetrics(t, cl, "everything", false, "metrics", "*"); err != nil {
		t.Fatal(err)
	}
	d := describeClientMetrics(t, cl, "producers")
	if *d["metrics"].Value != "org.apache.kafka.producer." || *d["interval.ms"].Value != "1000" || *d["match"].Value != "client_id=app-.*" ||
		d["interval.ms"].Source != kmsg.ConfigSourceClientMetricsConfig {
		t.Fatalf("described %+v", d)
	}
	d = describeClientMetrics(t, cl, "everything")
	if *d["interval.ms"].Value != "300000" || d["interval.ms"].Source != kmsg.ConfigSourceDefaultConfig || *d["metrics"].Value != "*" {
		t.Fatalf("defaults: %+v", d)
	}
	if got := listClientMetrics(t, cl); !slices.Equal(got, []string{"everything", "producers"}) {
		t.Fatalf("listed %v", got)
	}
	for _, tc := range []struct {
		kv   []string
		want error
	}{
		{[]string{"interval.ms", "50"}, kerr.InvalidRequest},
		{[]string{"interval.ms", "3600001"}, kerr.InvalidRequest},
		{[]string{"color", "red"}, kerr.InvalidRequest},
		{[]string{"match", "client_color=red"}, kerr.InvalidConfig},
		{[]string{"match", "client_id=("}, kerr.InvalidConfig},
	} {
		if err := alterClientMetrics(t, cl, "producers", true, tc.kv...); !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.kv, err, tc.want)
		}
	}
	if err := alterClientMetrics(t, cl, "everything", true, "metrics", "<delete>"); err != nil {
		t.Fatal(err)
	}
	if got := listClientMetrics(t, cl); !slices.Equal(got, []string{"producers"}) {
		t.Fatalf("after deleting everything's only config: %v", got)
	}
	// Stored through the controller: a restarted broker still has it.
	tb = tb.restart()
	cl = tb.client(kgo.DisableClientMetrics())
	if d := describeClientMetrics(t, cl, "producers"); *d["interval.ms"].Value != "1000" {
		t.Fatalf("after restart: %+v", d)
	}
}

func getSubscription(t *testing.T, cl *kgo.Client, id [16]byte) (*kmsg.GetTelemetrySubscriptionsResponse, error) {
	t.Helper()
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp, kerr.ErrorForCode(resp.ErrorCode)
}

func push(t *testing.T, cl *kgo.Client, id [16]byte, sub int32, terminating bool, codec int8, payload []byte) error {
	t.Helper()
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.Terminating, req.CompressionType, req.Metrics = id, sub, terminating, codec, payload
	resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// GetTelemetrySubscriptions and PushTelemetry on the wire: subscriptions matched on the
// client id and the software name the client gave in ApiVersions, Kafka's errors, and
// a terminating push.
func TestTelemetryAPIs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := telemetry.New(telemetry.Config{MaxBytes: 1000, Logger: quietLogger()}, reg)
	tb := startBroker(t, withTelemetry(m))
	admin := tb.client(kgo.DisableClientMetrics())
	if err := alterClientMetrics(t, admin, "kgo-apps", true, "metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
		"interval.ms", "60000", "match", "client_id=app-.*,client_software_name=shale-test"); err != nil {
		t.Fatal(err)
	}
	tb.waitApplied("subscription", func(im *metadata.Image) bool { return len(im.ClientMetrics) == 1 })

	other := tb.client(kgo.DisableClientMetrics(), kgo.ClientID("app-1"))
	resp, err := getSubscription(t, other, [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.RequestedMetrics) != 0 || resp.PushIntervalMillis != 300000 || resp.ClientInstanceID == ([16]byte{}) {
		t.Fatalf("software name kgo matched a shale-test subscription: %+v", resp)
	}

	cl := tb.client(kgo.DisableClientMetrics(), kgo.ClientID("app-1"), kgo.SoftwareNameAndVersion("shale-test", "1.0"))
	resp, err = getSubscription(t, cl, [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.RequestedMetrics, []string{"org.apache.kafka.consumer.", "org.apache.kafka.producer."}) || resp.PushIntervalMillis != 60000 ||
		resp.TelemetryMaxBytes != 1000 || !resp.DeltaTemporality || !slices.Equal(resp.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) {
		t.Fatalf("subscription %+v", resp)
	}
	id, sub := resp.ClientInstanceID, resp.SubscriptionID
	if _, err := getSubscription(t, cl, id); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("second Get at once: %v", err)
	}
	if err := push(t, cl, id, sub+1, false, 0, nil); !errors.Is(err, kerr.UnknownSubscriptionID) {
		t.Fatalf("wrong subscription: %v", err)
	}
	// The first push after a Get is accepted whenever it comes.
	if err := push(t, cl, id, sub, false, 0, []byte{1, 2, 3}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("garbage: %v", err)
	}
	if err := push(t, cl, id, sub, false, 0, nil); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("second push at once: %v", err)
	}
	// A terminating push is not throttled, but is checked.
	if err := push(t, cl, id, sub, true, 9, nil); !errors.Is(err, kerr.UnsupportedCompressionType) {
		t.Fatalf("codec 9: %v", err)
	}
	if err := push(t, cl, id, sub, true, 0, make([]byte, 1001)); !errors.Is(err, kerr.TelemetryTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if err := push(t, cl, id, sub, true, 0, nil); err != nil {
		t.Fatalf("terminating: %v", err)
	}
	if err := push(t, cl, id, sub, false, 0, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("after terminating: %v", err)
	}

	// A zstd-compressed OTLP push is exported with the client's labels.
	resp, err = getSubscription(t, cl, [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	md := &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
		Name: "org.apache.kafka.producer.record.queue.time.max",
		Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: 42}}}}},
	}}}}}}}
	raw, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := records.Default().Compress(4, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := push(t, cl, resp.ClientInstanceID, resp.SubscriptionID, false, 4, comp); err != nil {
		t.Fatalf("zstd push: %v", err)
	}
	want := `
# HELP client_org_apache_kafka_producer_record_queue_time_max Pushed by a client (KIP-714 client telemetry).
# TYPE client_org_apache_kafka_producer_record_queue_time_max gauge
client_org_apache_kafka_producer_record_queue_time_max{client_id="app-1",client_instance_id="` + telemetry.InstanceIDString(resp.ClientInstanceID) +
		`",client_software_name="shale-test",client_software_version="1.0"} 42
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "client_org_apache_kafka_producer_record_queue_time_max"); err != nil {
		t.Fatal(err)
	}

	// A subscription change reaches new requests at once.
	if err := alterClientMetrics(t, admin, "kgo-apps", true, "interval.ms", "30000"); err != nil {
		t.Fatal(err)
	}
	if err := push(t, cl, resp.ClientInstanceID, resp.SubscriptionID, false, 0, nil); !errors.Is(err, kerr.UnknownSubscriptionID) {
		t.Fatalf("push under the old subscription: %v", err)
	}
	resp2, err := getSubscription(t, cl, resp.ClientInstanceID)
	if err != nil {
		t.Fatalf("Get right after UNKNOWN_SUBSCRIPTION_ID: %v", err)
	}
	if resp2.PushIntervalMillis != 30000 || resp2.SubscriptionID == resp.SubscriptionID || resp2.ClientInstanceID != resp.ClientInstanceID {
		t.Fatalf("after the change: %+v", resp2)
	}
}

// CLIENT_METRICS resources need the cluster's ALTER_CONFIGS and DESCRIBE_CONFIGS, as in
// Kafka.
func TestClientMetricsACLs(t *testing.T) {
	b := startACLBroker(t, false)
	alice := b.as("alice")
	if err := alterClientMetrics(t, alice, "s", true, "metrics", "*"); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter without ALTER_CONFIGS: %v", err)
	}
	resp, err := kmsg.NewPtrListConfigResourcesRequest().RequestWith(ctxTimeout(t, 10*time.Second), alice)
	if err != nil || !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.ClusterAuthorizationFailed) {
		t.Fatalf("list without DESCRIBE_CONFIGS: %v %v", err, resp)
	}
	if err := alterClientMetrics(t, b.as("admin"), "s", true, "metrics", "*"); err != nil {
		t.Fatalf("admin: %v", err)
	}
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:alice").Operations(kadm.OpDescribeConfigs))
	if got := listClientMetrics(t, alice); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("listed %v", got)
	}
}
