package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Registry bindings are stored and decided like Kafka's, but only a filter that names
// their type sees them: an ANY filter (kafka-acls.sh --list, a DeleteAcls of everything)
// neither lists nor deletes them.
func TestRegistryResourceTypes(t *testing.T) {
	subj := allow(ResourceTypeSubject, pre, "orders-", "User:alice", "*", kmsg.ACLOperationWrite)
	reg := allow(ResourceTypeRegistry, lit, RegistryName, "User:ops", "*", kmsg.ACLOperationAlterConfigs)
	top := allow(topic, lit, "orders", "User:alice", "*", kmsg.ACLOperationRead)
	for _, b := range []Binding{subj, reg} {
		if err := b.Validate(); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	for _, bad := range []Binding{
		allow(ResourceTypeRegistry, lit, "other", "User:ops", "*", kmsg.ACLOperationRead),
		allow(ResourceTypeRegistry, pre, "schema-", "User:ops", "*", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceType(99), lit, "x", "User:ops", "*", kmsg.ACLOperationRead),
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%s validated", bad)
		}
	}
	set := NewSet([]Binding{subj, reg, top})
	anyFilter := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if got := set.Matching(anyFilter); len(got) != 1 || got[0] != top {
		t.Errorf("ANY matched %v, want only the topic binding", got)
	}
	subjects := anyFilter
	subjects.ResourceType = ResourceTypeSubject
	if err := subjects.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := set.Matching(subjects); len(got) != 1 || got[0] != subj {
		t.Errorf("SUBJECT filter matched %v", got)
	}
	name := "orders-value"
	subjects.ResourceName, subjects.PatternType = &name, kmsg.ACLResourcePatternTypeMatch
	if got := set.Matching(subjects); len(got) != 1 {
		t.Errorf("MATCH orders-value matched %v", got)
	}

	a := NewAuthorizer(nil, false)
	if !a.Authorize(set, "User:alice", "1.2.3.4", kmsg.ACLOperationWrite, ResourceTypeSubject, "orders-value") {
		t.Error("alice may not write orders-value")
	}
	if !a.Authorize(set, "User:alice", "1.2.3.4", kmsg.ACLOperationDescribe, ResourceTypeSubject, "orders-value") {
		t.Error("WRITE does not imply DESCRIBE on a subject")
	}
	if a.Authorize(set, "User:alice", "1.2.3.4", kmsg.ACLOperationWrite, ResourceTypeSubject, "payments-value") {
		t.Error("alice may write payments-value")
	}
	if !a.Authorize(set, "User:ops", "1.2.3.4", kmsg.ACLOperationDescribeConfigs, ResourceTypeRegistry, RegistryName) {
		t.Error("ALTER_CONFIGS does not imply DESCRIBE_CONFIGS on the registry")
	}
	for s, want := range map[string]kmsg.ACLResourceType{"subject": ResourceTypeSubject, "REGISTRY": ResourceTypeRegistry, "topic": topic} {
		got, err := ParseResourceType(s)
		if err != nil || got != want {
			t.Errorf("ParseResourceType(%q) = %v, %v", s, got, err)
		}
		if back, _ := ParseResourceType(ResourceTypeName(got)); back != want {
			t.Errorf("%v does not round-trip through its name %q", want, ResourceTypeName(got))
		}
	}
}
