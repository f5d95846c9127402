package topicconfig

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"retention.ms", "1000", true},
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
		{"retention.ms", "soon", false},
		{"segment.bytes", "13", false},
		{"segment.bytes", "1048576", true},
		{"segment.bytes", "99999999999", false}, // int overflow
		{"cleanup.policy", "delete", true},
		{"cleanup.policy", "compact", true},
		{"cleanup.policy", "compact,delete", true},
		{"cleanup.policy", "compact, delete", true},
		{"cleanup.policy", "archive", false},
		{"min.cleanable.dirty.ratio", "0.1", true},
		{"min.cleanable.dirty.ratio", "1.5", false},
		{"delete.retention.ms", "-1", false},
		{"compression.type", "zstd", true},
		{"compression.type", "brotli", false},
		{"message.timestamp.type", "LogAppendTime", true},
		{"unclean.leader.election.enable", "yes", false},
		{"writeback.bytes", "0", true},
		{"writeback.bytes", "1048576", true},
		{"writeback.bytes", "-1", false},
		{"no.such.config", "1", false},
	} {
		err := ValidateOne(tc.name, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%s: err %v, want ok=%v", tc.name, tc.value, err, tc.ok)
		}
		if err != nil && !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s=%s: %v does not wrap INVALID_CONFIG", tc.name, tc.value, err)
		}
	}
}

func TestResolveSources(t *testing.T) {
	r := Resolve(map[string]string{"retention.ms": "5"}, BrokerDefaults{"segment.bytes": "1024"})
	if v, s := r.Get("retention.ms"); v != "5" || s != SourceDynamicTopic {
		t.Errorf("retention.ms = %s from %d", v, s)
	}
	if v, s := r.Get("segment.bytes"); v != "1024" || s != SourceStaticBroker {
		t.Errorf("segment.bytes = %s from %d", v, s)
	}
	if v, s := r.Get("max.message.bytes"); v != "1048588" || s != SourceDefault {
		t.Errorf("max.message.bytes = %s from %d", v, s)
	}
	if n := r.Int64("flush.messages"); n != 1<<63-1 {
		t.Errorf("flush.messages = %d", n)
	}
}

func TestTableSortedAndDefaultsValid(t *testing.T) {
	for i, d := range All() {
		if i > 0 && All()[i-1].Name >= d.Name {
			t.Fatalf("table not sorted at %s", d.Name)
		}
		if err := d.Validate(d.Default); err != nil {
			t.Errorf("default of %s invalid: %v", d.Name, err)
		}
		if got, ok := Lookup(d.Name); !ok || got != d {
			t.Errorf("Lookup(%s) failed", d.Name)
		}
	}
}

func TestValidateRemote(t *testing.T) {
	on := map[string]string{RemoteStorageEnable: "true"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{RemoteStorageEnable: "true"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name           string
		previous, cfg  map[string]string
		defaults       BrokerDefaults
		system, wantOK bool
	}{
		{"off stays off, system off", nil, map[string]string{}, nil, false, true},
		{"on, system off", nil, on, nil, false, false},
		{"on, system on", nil, on, nil, true, true},
		{"compacted", nil, with(CleanupPolicy, "compact"), nil, true, false},
		{"compact,delete", nil, with(CleanupPolicy, "compact,delete"), nil, true, false},
		{"compacted by broker default", nil, on, BrokerDefaults{CleanupPolicy: "compact"}, true, false},
		{"local ms below total", nil, with(LocalRetentionMs, "1000", RetentionMs, "2000"), nil, true, true},
		{"local ms equal total", nil, with(LocalRetentionMs, "2000", RetentionMs, "2000"), nil, true, true},
		{"local ms above total", nil, with(LocalRetentionMs, "3000", RetentionMs, "2000"), nil, true, false},
		{"local ms above broker default total", nil, with(LocalRetentionMs, "3000"), BrokerDefaults{RetentionMs: "2000"}, true, false},
		{"local ms -1 with bounded total", nil, with(LocalRetentionMs, "-1", RetentionMs, "2000"), nil, true, false},
		{"local ms -1 with unbounded total", nil, with(LocalRetentionMs, "-1", RetentionMs, "-1"), nil, true, true},
		{"local ms -2", nil, with(LocalRetentionMs, "-2", RetentionMs, "2000"), nil, true, true},
		{"local bytes above total", nil, with(LocalRetentionBytes, "300", RetentionBytes, "200"), nil, true, false},
		{"local bytes with unbounded total", nil, with(LocalRetentionBytes, "300"), nil, true, true},
		{"local above total without remote storage", nil, map[string]string{LocalRetentionBytes: "300", RetentionBytes: "200"}, nil, false, true},
		{"turned off", on, map[string]string{}, nil, true, false},
		{"turned off explicitly", on, map[string]string{RemoteStorageEnable: "false"}, nil, true, false},
	} {
		err := ValidateRemote(tc.previous, tc.cfg, tc.defaults, tc.system)
		if (err == nil) != tc.wantOK {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.wantOK)
		}
		if err != nil && !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s: %v does not wrap INVALID_CONFIG", tc.name, err)
		}
	}
}

func TestLocalRetentionResolves(t *testing.T) {
	r := Resolve(map[string]string{RetentionMs: "5000"}, BrokerDefaults{RetentionBytes: "900"})
	if got := r.LocalRetentionMs(); got != 5000 {
		t.Errorf("local.retention.ms -2 resolves to %d, want retention.ms 5000", got)
	}
	if got := r.LocalRetentionBytes(); got != 900 {
		t.Errorf("local.retention.bytes -2 resolves to %d, want retention.bytes 900", got)
	}
	r = Resolve(map[string]string{LocalRetentionMs: "10", LocalRetentionBytes: "20"}, nil)
	if r.LocalRetentionMs() != 10 || r.LocalRetentionBytes() != 20 {
		t.Errorf("explicit local retention = %d/%d", r.LocalRetentionMs(), r.LocalRetentionBytes())
	}
}
