package metadata

import (
	"errors"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The operations mean the same for every resource type; only the names, the lists and
// the validation differ.
func TestConfigOps(t *testing.T) {
	type apply func(current map[string]string, ops []ConfigOp, incremental bool) (map[string]string, error)
	topic := apply(ApplyConfigOps)
	metrics := func(current map[string]string, ops []ConfigOp, incremental bool) (map[string]string, error) {
		return ApplyClientMetricsOps("sub", current, ops, incremental)
	}
	for _, tc := range []struct {
		name    string
		apply   apply
		current map[string]string
		ops     []ConfigOp
		inc     bool
		want    map[string]string
		err     *kerr.Error
	}{
		// Incremental operations.
		{name: "topic set", apply: topic, current: map[string]string{"retention.ms": "1"},
			ops: []ConfigOp{{Name: "segment.bytes", Value: sp("2048"), Op: ConfigSet}}, inc: true,
			want: map[string]string{"retention.ms": "1", "segment.bytes": "2048"}},
		{name: "metrics set", apply: metrics, current: map[string]string{ClientMetricsMetrics: "a"},
			ops: []ConfigOp{{Name: ClientMetricsInterval, Value: sp("1000"), Op: ConfigSet}}, inc: true,
			want: map[string]string{ClientMetricsMetrics: "a", ClientMetricsInterval: "1000"}},
		{name: "topic delete, null value", apply: topic, current: map[string]string{"retention.ms": "1"},
			ops: []ConfigOp{{Name: "retention.ms", Op: ConfigDelete}}, inc: true, want: map[string]string{}},
		{name: "metrics delete, null value", apply: metrics, current: map[string]string{ClientMetricsMetrics: "a"},
			ops: []ConfigOp{{Name: ClientMetricsMetrics, Op: ConfigDelete}}, inc: true, want: map[string]string{}},
		{name: "topic delete unset is a no-op", apply: topic, current: map[string]string{"retention.ms": "1"},
			ops: []ConfigOp{{Name: "segment.bytes", Op: ConfigDelete}}, inc: true, want: map[string]string{"retention.ms": "1"}},
		{name: "metrics delete unset is a no-op", apply: metrics, current: map[string]string{ClientMetricsMetrics: "a"},
			ops: []ConfigOp{{Name: ClientMetricsMatch, Op: ConfigDelete}}, inc: true, want: map[string]string{ClientMetricsMetrics: "a"}},
		{name: "topic append starts from the default", apply: topic,
			ops: []ConfigOp{{Name: "cleanup.policy", Value: sp("compact"), Op: ConfigAppend}}, inc: true,
			want: map[string]string{"cleanup.policy": "delete,compact"}},
		{name: "metrics append starts empty", apply: metrics,
			ops: []ConfigOp{{Name: ClientMetricsMetrics, Value: sp("a, b"), Op: ConfigAppend}}, inc: true,
			want: map[string]string{ClientMetricsMetrics: "a,b"}},
		{name: "append skips present items", apply: metrics, current: map[string]string{ClientMetricsMetrics: "a,b"},
			ops: []ConfigOp{{Name: ClientMetricsMetrics, Value: sp("b,c"), Op: ConfigAppend}}, inc: true,
			want: map[string]string{ClientMetricsMetrics: "a,b,c"}},
		{name: "topic subtract", apply: topic, current: map[string]string{"cleanup.policy": "delete,compact"},
			ops: []ConfigOp{{Name: "cleanup.policy", Value: sp("delete,absent"), Op: ConfigSubtract}}, inc: true,
			want: map[string]string{"cleanup.policy": "compact"}},
		{name: "metrics subtract to empty", apply: metrics, current: map[string]string{ClientMetricsMetrics: "a"},
			ops: []ConfigOp{{Name: ClientMetricsMetrics, Value: sp("a"), Op: ConfigSubtract}}, inc: true,
			want: map[string]string{ClientMetricsMetrics: ""}},
		// AlterConfigs replaces the whole set.
		{name: "topic replace", apply: topic, current: map[string]string{"retention.ms": "1"},
			ops: []ConfigOp{{Name: "segment.bytes", Value: sp("2048")}}, want: map[string]string{"segment.bytes": "2048"}},
		{name: "metrics replace", apply: metrics, current: map[string]string{ClientMetricsMetrics: "a"},
			ops: []ConfigOp{{Name: ClientMetricsMatch, Value: sp("client_id=x")}}, want: map[string]string{ClientMetricsMatch: "client_id=x"}},
		{name: "topic replace with nothing", apply: topic, current: map[string]string{"retention.ms": "1"}, want: map[string]string{}},
		// Refused alike.
		{name: "topic name twice", apply: topic, ops: []ConfigOp{{Name: "retention.ms", Value: sp("1")}, {Name: "retention.ms", Value: sp("2")}}, inc: true, err: kerr.InvalidRequest},
		{name: "metrics name twice", apply: metrics, ops: []ConfigOp{{Name: ClientMetricsMetrics, Value: sp("a")}, {Name: ClientMetricsMetrics, Value: sp("b")}}, err: kerr.InvalidRequest},
		{name: "topic null set", apply: topic, ops: []ConfigOp{{Name: "retention.ms", Op: ConfigSet}}, inc: true, err: kerr.InvalidRequest},
		{name: "metrics null set", apply: metrics, ops: []ConfigOp{{Name: ClientMetricsMetrics, Op: ConfigSet}}, inc: true, err: kerr.InvalidRequest},
		{name: "topic null replace", apply: topic, ops: []ConfigOp{{Name: "retention.ms"}}, err: kerr.InvalidRequest},
		{name: "metrics null replace", apply: metrics, ops: []ConfigOp{{Name: ClientMetricsMetrics}}, err: kerr.InvalidRequest},
		{name: "topic null append", apply: topic, ops: []ConfigOp{{Name: "cleanup.policy", Op: ConfigAppend}}, inc: true, err: kerr.InvalidRequest},
		{name: "topic append to a scalar", apply: topic, ops: []ConfigOp{{Name: "retention.ms", Value: sp("1"), Op: ConfigAppend}}, inc: true, err: kerr.InvalidConfig},
		{name: "metrics append to a scalar", apply: metrics, ops: []ConfigOp{{Name: ClientMetricsInterval, Value: sp("1"), Op: ConfigAppend}}, inc: true, err: kerr.InvalidConfig},
		{name: "topic unknown operation", apply: topic, ops: []ConfigOp{{Name: "retention.ms", Value: sp("1"), Op: 9}}, inc: true, err: kerr.InvalidRequest},
		{name: "metrics unknown operation", apply: metrics, ops: []ConfigOp{{Name: ClientMetricsMetrics, Value: sp("a"), Op: 9}}, inc: true, err: kerr.InvalidRequest},
		// Per resource type: which names exist, and validation.
		{name: "topic delete of an unknown name", apply: topic, ops: []ConfigOp{{Name: "nope", Op: ConfigDelete}}, inc: true, err: kerr.InvalidConfig},
		{name: "topic set of an unknown name is the caller's to validate", apply: topic,
			ops: []ConfigOp{{Name: "nope", Value: sp("1")}}, inc: true, want: map[string]string{"nope": "1"}},
		{name: "metrics unknown name", apply: metrics, ops: []ConfigOp{{Name: "nope", Value: sp("1")}}, inc: true, err: kerr.InvalidRequest},
		{name: "metrics result validated", apply: metrics, ops: []ConfigOp{{Name: ClientMetricsInterval, Value: sp("1")}}, inc: true, err: kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.current)
			got, err := tc.apply(tc.current, tc.ops, tc.inc)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %s", err, tc.err.Message)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("got %v %v, want %v", got, err, tc.want)
			}
			if !maps.Equal(tc.current, before) {
				t.Fatalf("current modified: %v, was %v", tc.current, before)
			}
		})
	}
}
