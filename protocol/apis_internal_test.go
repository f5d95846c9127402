package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAPITable: the api values are listed once each, by key, at versions kmsg can
// decode, and each error builder answers its own key at the request's version.
func TestAPITable(t *testing.T) {
	for i, a := range apis {
		name := kmsg.NameForKey(a.key.Int16())
		if i > 0 && apis[i-1].key >= a.key {
			t.Errorf("%s (%d) listed after key %d: apis must be sorted by key, each once", name, a.key, apis[i-1].key)
		}
		kreq := kmsg.RequestForKey(a.key.Int16())
		if kreq == nil {
			t.Errorf("key %d: kmsg knows no such request", a.key)
			continue
		}
		if a.min < 0 || a.min > a.max || a.max > kreq.MaxVersion() {
			t.Errorf("%s: versions %d-%d, kmsg decodes up to %d", name, a.min, a.max, kreq.MaxVersion())
		}
		if a.handle == nil {
			t.Errorf("%s: no handler", name)
		}
		if a.errors == nil {
			continue
		}
		for v := a.min; v <= a.max; v++ {
			req := filledRequest(a.key.Int16(), v)
			resp := a.errors(req, codeUnsupportedVersion)
			if resp == nil {
				t.Errorf("%s v%d: nil error response", name, v)
			} else if resp.Key() != a.key.Int16() || resp.GetVersion() != v {
				t.Errorf("%s v%d: error response %T at v%d", name, v, resp, resp.GetVersion())
			}
		}
	}
}
