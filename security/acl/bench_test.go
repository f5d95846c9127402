package acl

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkAuthorize decides one produce-like check against 10,000 literal bindings
// (one user per topic) plus 100 prefixed ones: the literal index keeps it independent of
// the literal count, the prefixed bindings are scanned.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := range 10000 {
		bs = append(bs, allow(topic, lit, fmt.Sprintf("topic-%d", i), fmt.Sprintf("User:u%d", i), "*", kmsg.ACLOperationWrite))
	}
	for i := range 100 {
		bs = append(bs, allow(topic, pre, fmt.Sprintf("team-%d-", i), "User:team", "*", kmsg.ACLOperationRead))
	}
	set := NewSet(bs)
	a := NewAuthorizer([]string{"User:admin"}, false)
	b.ReportAllocs()
	for b.Loop() {
		if !a.Authorize(set, "User:u5000", "10.0.0.1", kmsg.ACLOperationWrite, topic, "topic-5000") {
			b.Fatal("denied")
		}
	}
}
