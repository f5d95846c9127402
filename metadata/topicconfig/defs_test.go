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
