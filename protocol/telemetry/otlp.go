package telemetry

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// kind is how a point is exported.
type kind uint8

const (
	kindGauge kind = iota + 1
	kindCounter
)

// point is one data point of a pushed metric, ready to export.
type point struct {
	name   string // Prometheus name
	kind   kind
	value  float64
	delta  bool // a counter increment (delta temporality) rather than its total
	labels []label
}

// namePrefix keeps pushed names apart from the broker's own series (shale_, go_,
// process_): a client naming a metric like one of them would otherwise break the scrape.
const namePrefix = "client_"

// decodeOTLP decodes an OTLP MetricsData payload (what KIP-714 clients push) into
// points. Gauges become gauges; monotonic sums counters (delta sums add up); other sums
// gauges. Histograms, exponential histograms and summaries, which neither franz-go nor
// the Java client's standard metrics use, are skipped.
func decodeOTLP(b []byte) ([]point, error) {
	var md metricspb.MetricsData
	if err := proto.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("decoding MetricsData: %w", err)
	}
	var out []point
	for _, rm := range md.ResourceMetrics {
		res := attrLabels(rm.GetResource().GetAttributes(), nil)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				name := namePrefix + sanitizeName(m.Name)
				add := func(k kind, delta bool, dps []*metricspb.NumberDataPoint) {
					for _, dp := range dps {
						var v float64
						switch x := dp.Value.(type) {
						case *metricspb.NumberDataPoint_AsDouble:
							v = x.AsDouble
						case *metricspb.NumberDataPoint_AsInt:
							v = float64(x.AsInt)
						default:
							continue
						}
						out = append(out, point{name: name, kind: k, value: v, delta: delta, labels: attrLabels(dp.Attributes, res)})
					}
				}
				switch d := m.Data.(type) {
				case *metricspb.Metric_Gauge:
					add(kindGauge, false, d.Gauge.DataPoints)
				case *metricspb.Metric_Sum:
					if d.Sum.IsMonotonic {
						add(kindCounter, d.Sum.AggregationTemporality == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA, d.Sum.DataPoints)
					} else {
						add(kindGauge, false, d.Sum.DataPoints)
					}
				}
			}
		}
	}
	return out, nil
}

// attrLabels turns OTLP attributes into labels, after base (resource attributes); a data
// point's attribute overrides a resource attribute of the same name.
func attrLabels(attrs []*commonpb.KeyValue, base []label) []label {
	out := append([]label(nil), base...)
	for _, kv := range attrs {
		v, ok := anyString(kv.GetValue())
		if !ok {
			continue
		}
		n := sanitizeLabel(kv.Key)
		replaced := false
		for i := range out {
			if out[i].name == n {
				out[i].value, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, label{n, v})
		}
	}
	return out
}

func anyString(v *commonpb.AnyValue) (string, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return strings.ToValidUTF8(x.StringValue, "\uFFFD"), true
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue), true
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10), true
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64), true
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue), true
	}
	return "", false
}

// sanitizeName maps an OTLP metric name onto Prometheus' classic charset: dots and
// anything else outside [a-zA-Z0-9_:] become underscores.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == ':') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// sanitizeLabel does the same for a label name, which may not have colons, start with a
// digit, or start with the reserved "__".
func sanitizeLabel(s string) string {
	n := strings.ReplaceAll(sanitizeName(s), ":", "_")
	if n == "" || n[0] >= '0' && n[0] <= '9' || strings.HasPrefix(n, "__") {
		n = "attr_" + n
	}
	return n
}
