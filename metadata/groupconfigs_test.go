package metadata

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestApplyGroupConfigOps(t *testing.T) {
	s := func(v string) *string { return &v }
	b := KafkaGroupConfigBounds()
	b.Defaults = map[string]string{GroupShareSessionTimeout: "45000", GroupShareHeartbeatInterval: "5000"}
	cur := map[string]string{GroupShareAutoOffsetReset: "latest", GroupConsumerSessionTimeout: "50000"}
	got, err := ApplyGroupConfigOps("g", cur, []ConfigOp{
		{Name: GroupShareAutoOffsetReset, Value: s("earliest"), Op: ConfigSet},
		{Name: GroupConsumerSessionTimeout, Op: ConfigDelete},
		{Name: GroupShareRecordLockDuration, Value: s("20000"), Op: ConfigSet},
	}, true, b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{GroupShareAutoOffsetReset: "earliest", GroupShareRecordLockDuration: "20000"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if cur[GroupShareAutoOffsetReset] != "latest" {
		t.Fatal("current configs modified")
	}
	// AlterConfigs replaces the whole set.
	got, err = ApplyGroupConfigOps("g", cur, []ConfigOp{{Name: GroupShareIsolationLevel, Value: s("read_committed")}}, false, b)
	if err != nil || !reflect.DeepEqual(got, map[string]string{GroupShareIsolationLevel: "read_committed"}) {
		t.Fatalf("AlterConfigs: %v, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		ops  []ConfigOp
		b    *GroupConfigBounds
		want error
	}{
		{"unknown key", []ConfigOp{{Name: "session.timeout.ms", Value: s("1")}}, b, kerr.InvalidConfig},
		{"unknown key delete", []ConfigOp{{Name: "nope", Op: ConfigDelete}}, b, kerr.InvalidConfig},
		{"not int", []ConfigOp{{Name: GroupShareSessionTimeout, Value: s("x")}}, nil, kerr.InvalidConfig},
		{"below AtLeast", []ConfigOp{{Name: GroupShareRecordLockDuration, Value: s("999")}}, nil, kerr.InvalidConfig},
		{"below broker min", []ConfigOp{{Name: GroupShareRecordLockDuration, Value: s("14999")}}, b, kerr.InvalidConfig},
		{"above broker max", []ConfigOp{{Name: GroupConsumerSessionTimeout, Value: s("60001")}}, b, kerr.InvalidConfig},
		{"heartbeat not below session", []ConfigOp{{Name: GroupShareSessionTimeout, Value: s("5000")}, {Name: GroupShareHeartbeatInterval, Value: s("5000")}}, &GroupConfigBounds{}, kerr.InvalidConfig},
		{"bad reset", []ConfigOp{{Name: GroupShareAutoOffsetReset, Value: s("none")}}, nil, kerr.InvalidConfig},
		{"bad duration", []ConfigOp{{Name: GroupShareAutoOffsetReset, Value: s("by_duration:1h")}}, nil, kerr.InvalidConfig},
		{"bad isolation", []ConfigOp{{Name: GroupShareIsolationLevel, Value: s("committed")}}, nil, kerr.InvalidConfig},
		{"append", []ConfigOp{{Name: GroupShareIsolationLevel, Value: s("read_committed"), Op: ConfigAppend}}, nil, kerr.InvalidConfig},
		{"null set", []ConfigOp{{Name: GroupShareIsolationLevel}}, nil, kerr.InvalidRequest},
	} {
		if _, err := ApplyGroupConfigOps("g", nil, tc.ops, true, tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	// Session above heartbeat is checked against the broker's default for the unset one.
	if _, err := ApplyGroupConfigOps("g", nil, []ConfigOp{{Name: GroupShareHeartbeatInterval, Value: s("15000")}}, true,
		&GroupConfigBounds{Defaults: map[string]string{GroupShareSessionTimeout: "15000"}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("heartbeat = default session: %v", err)
	}
	if _, err := ApplyGroupConfigOps("", nil, nil, true, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("empty group: %v", err)
	}
}

func TestParseShareAutoOffsetReset(t *testing.T) {
	for in, want := range map[string]time.Duration{"by_duration:PT1H": time.Hour, "by_duration:P1DT30M": 24*time.Hour + 30*time.Minute,
		"by_duration:PT1.5S": 1500 * time.Millisecond, "by_duration:P0D": 0} {
		s, d, err := ParseShareAutoOffsetReset(in)
		if err != nil || s != "by_duration" || d != want {
			t.Errorf("%s: %s %v %v, want %v", in, s, d, err, want)
		}
	}
	for _, in := range []string{"by_duration:", "by_duration:-PT1H", "by_duration:PT", "by_duration:P1H", "by_duration:PT1D", "latest2"} {
		if _, _, err := ParseShareAutoOffsetReset(in); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
	if s, _, err := ParseShareAutoOffsetReset("EARLIEST"); err != nil || s != "earliest" {
		t.Errorf("EARLIEST: %s %v", s, err)
	}
}

func TestGroupConfigsValue(t *testing.T) {
	g := GroupConfigs{}.With("a", map[string]string{GroupShareRecordLockDuration: "20000"})
	if g.Int("a", GroupShareRecordLockDuration, 30000) != 20000 || g.Int("b", GroupShareRecordLockDuration, 30000) != 30000 {
		t.Fatal("Int")
	}
	if g.Value("a", GroupShareAutoOffsetReset, "latest") != "latest" {
		t.Fatal("Value default")
	}
	if g = g.With("a", nil); len(g) != 0 {
		t.Fatal("With nil kept the group")
	}
}
