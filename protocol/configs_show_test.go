package protocol

import (
	"testing"

	"github.com/shalelog/shale/metadata"
)

// configsShow waits for a write's own effect, not for the exact configs the broker
// expected: a concurrent write to another config must not keep it waiting.
func TestConfigsShow(t *testing.T) {
	v := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		configs map[string]string
		ops     []metadata.ConfigOp
		inc     bool
		want    bool
	}{
		{"set shown", map[string]string{"retention.ms": "5", "segment.bytes": "9"},
			[]metadata.ConfigOp{{Name: "retention.ms", Value: v("5"), Op: metadata.ConfigSet}}, true, true},
		{"set not yet", map[string]string{"retention.ms": "4"},
			[]metadata.ConfigOp{{Name: "retention.ms", Value: v("5"), Op: metadata.ConfigSet}}, true, false},
		{"delete shown", map[string]string{"segment.bytes": "9"},
			[]metadata.ConfigOp{{Name: "retention.ms", Op: metadata.ConfigDelete}}, true, true},
		{"delete not yet", map[string]string{"retention.ms": "4"},
			[]metadata.ConfigOp{{Name: "retention.ms", Op: metadata.ConfigDelete}}, true, false},
		{"append shown", map[string]string{"cleanup.policy": "delete,compact"},
			[]metadata.ConfigOp{{Name: "cleanup.policy", Value: v("compact"), Op: metadata.ConfigAppend}}, true, true},
		{"append not yet", map[string]string{},
			[]metadata.ConfigOp{{Name: "cleanup.policy", Value: v("compact"), Op: metadata.ConfigAppend}}, true, false},
		{"subtract shown", map[string]string{"cleanup.policy": "compact"},
			[]metadata.ConfigOp{{Name: "cleanup.policy", Value: v("delete"), Op: metadata.ConfigSubtract}}, true, true},
		{"subtract not yet", map[string]string{"cleanup.policy": "delete,compact"},
			[]metadata.ConfigOp{{Name: "cleanup.policy", Value: v("delete"), Op: metadata.ConfigSubtract}}, true, false},
		{"whole set shown", map[string]string{"retention.ms": "5"},
			[]metadata.ConfigOp{{Name: "retention.ms", Value: v("5")}}, false, true},
		{"whole set not yet", map[string]string{"retention.ms": "5", "segment.bytes": "9"},
			[]metadata.ConfigOp{{Name: "retention.ms", Value: v("5")}}, false, false},
		{"refused ops: nothing to wait for", map[string]string{},
			[]metadata.ConfigOp{{Name: "retention.ms", Op: metadata.ConfigSet}}, true, true},
	} {
		if got := configsShow(tc.configs, tc.ops, tc.inc, metadata.ApplyConfigOps); got != tc.want {
			t.Errorf("%s: configsShow(%v) = %v, want %v", tc.name, tc.configs, got, tc.want)
		}
	}
}
