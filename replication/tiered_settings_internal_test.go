package replication

import (
	"testing"

	"github.com/shalelog/shale/metadata/topicconfig"
)

// A tiered topic's local log keeps local.retention.* (-2: retention.*); other topics'
// keep retention.*.
func TestSettingsForTiered(t *testing.T) {
	for _, tc := range []struct {
		name              string
		configs           map[string]string
		defaults          topicconfig.BrokerDefaults
		tiered            bool
		wantMs, wantBytes int64
	}{
		{"not tiered", map[string]string{"retention.ms": "5000", "local.retention.ms": "10"}, nil, false, 5000, -1},
		{"tiered, local settings", map[string]string{"remote.storage.enable": "true", "retention.ms": "5000", "local.retention.ms": "10",
			"retention.bytes": "900", "local.retention.bytes": "100"}, nil, true, 10, 100},
		{"tiered, -2 takes retention.*", map[string]string{"remote.storage.enable": "true", "retention.ms": "5000"}, nil, true, 5000, -1},
		{"tiered, broker default local retention", map[string]string{"remote.storage.enable": "true"},
			topicconfig.BrokerDefaults{"local.retention.ms": "77"}, true, 77, -1},
		{"tiered, local retention 0 deletes at once", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "0"}, nil, true, 1, -1},
	} {
		s := SettingsFor(tc.configs, tc.defaults)
		if s.Tiered != tc.tiered || s.Log.RetentionMs != tc.wantMs || s.Log.RetentionBytes != tc.wantBytes {
			t.Errorf("%s: tiered %v, retention %d ms / %d bytes; want %v, %d / %d", tc.name, s.Tiered, s.Log.RetentionMs, s.Log.RetentionBytes,
				tc.tiered, tc.wantMs, tc.wantBytes)
		}
	}
}
