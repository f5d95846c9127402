package metadata

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func sp(s string) *string { return &s }

func TestApplyClientMetricsOps(t *testing.T) {
	got, err := ApplyClientMetricsOps("s", nil, []ConfigOp{
		{Name: "metrics", Value: sp("org.apache.kafka.producer."), Op: ConfigSet},
		{Name: "interval.ms", Value: sp("1000"), Op: ConfigSet},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err = ApplyClientMetricsOps("s", got, []ConfigOp{
		{Name: "metrics", Value: sp("org.apache.kafka.consumer."), Op: ConfigAppend},
		{Name: "match", Value: sp("client_id=app-.*"), Op: ConfigSet},
		{Name: "interval.ms", Op: ConfigDelete},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "match": "client_id=app-.*"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// AlterConfigs replaces the whole set.
	if got, _ = ApplyClientMetricsOps("s", got, []ConfigOp{{Name: "interval.ms", Value: sp("200")}}, false); !reflect.DeepEqual(got, map[string]string{"interval.ms": "200"}) {
		t.Fatalf("non-incremental: %v", got)
	}
	for _, tc := range []struct {
		name string
		ops  []ConfigOp
		want error
	}{
		{"s", []ConfigOp{{Name: "interval.ms", Value: sp("99")}}, kerr.InvalidRequest},
		{"s", []ConfigOp{{Name: "interval.ms", Value: sp("3600001")}}, kerr.InvalidRequest},
		{"s", []ConfigOp{{Name: "interval.ms", Value: sp("x")}}, kerr.InvalidConfig},
		{"s", []ConfigOp{{Name: "bogus", Value: sp("1")}}, kerr.InvalidRequest},
		{"s", []ConfigOp{{Name: "match", Value: sp("client_color=red")}}, kerr.InvalidConfig},
		{"s", []ConfigOp{{Name: "match", Value: sp("client_id")}}, kerr.InvalidConfig},
		{"s", []ConfigOp{{Name: "match", Value: sp("client_id=(")}}, kerr.InvalidConfig},
		{"s", []ConfigOp{{Name: "interval.ms", Value: sp("1000"), Op: ConfigAppend}}, kerr.InvalidConfig},
		{"", []ConfigOp{{Name: "metrics", Value: sp("*")}}, kerr.InvalidRequest},
	} {
		if _, err := ApplyClientMetricsOps(tc.name, nil, tc.ops, true); !errors.Is(err, tc.want) {
			t.Errorf("%q %v: err %v, want %v", tc.name, *tc.ops[0].Value, err, tc.want)
		}
	}
}

func TestClientMetricsSubscriptionMatches(t *testing.T) {
	sub, err := ParseClientMetrics("s", map[string]string{"metrics": "a.,*", "match": "client_id=app-.*,client_software_name=kgo"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sub.Metrics, []string{""}) || sub.IntervalMs != ClientMetricsDefaultInterval {
		t.Fatalf("parsed %+v", sub)
	}
	for attrs, want := range map[[2]string]bool{
		{"app-1", "kgo"}:     true,
		{"app-1", "kgo2"}:    false, // regexes match the whole value
		{"xapp-1", "kgo"}:    false,
		{"app-1", "librdka"}: false,
	} {
		if got := sub.Matches(map[string]string{MatchClientID: attrs[0], MatchClientSoftwareName: attrs[1]}); got != want {
			t.Errorf("%v: matches %v, want %v", attrs, got, want)
		}
	}
}
