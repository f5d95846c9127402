package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func allow(typ kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) Binding {
	return Binding{ResourceType: typ, ResourceName: name, PatternType: pattern, Principal: principal, Host: host, Operation: op,
		Permission: kmsg.ACLPermissionTypeAllow}
}

func deny(b Binding) Binding { b.Permission = kmsg.ACLPermissionTypeDeny; return b }

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	lit     = kmsg.ACLResourcePatternTypeLiteral
	pre     = kmsg.ACLResourcePatternTypePrefixed
)

func TestAuthorize(t *testing.T) {
	set := NewSet([]Binding{
		allow(topic, lit, "orders", "User:alice", "*", kmsg.ACLOperationRead),
		allow(topic, lit, "orders", "User:alice", "*", kmsg.ACLOperationAlterConfigs),
		allow(topic, pre, "logs-", "User:bob", "*", kmsg.ACLOperationWrite),
		deny(allow(topic, lit, "logs-secret", "User:bob", "*", kmsg.ACLOperationAll)),
		allow(topic, lit, "*", "User:*", "10.0.0.7", kmsg.ACLOperationDescribe),
		allow(group, lit, "g", "User:alice", "*", kmsg.ACLOperationAll),
		deny(allow(group, lit, "g", "User:alice", "192.168.1.1", kmsg.ACLOperationRead)),
		allow(cluster, lit, ClusterName, "User:broker", "*", kmsg.ACLOperationClusterAction),
	})
	a := NewAuthorizer([]string{"User:admin"}, false)
	cases := []struct {
		principal, host string
		op              kmsg.ACLOperation
		typ             kmsg.ACLResourceType
		name            string
		want            bool
	}{
		{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, topic, "orders", true},
		{"User:alice", "1.2.3.4", kmsg.ACLOperationDescribe, topic, "orders", true},        // READ implies DESCRIBE
		{"User:alice", "1.2.3.4", kmsg.ACLOperationDescribeConfigs, topic, "orders", true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{"User:alice", "1.2.3.4", kmsg.ACLOperationWrite, topic, "orders", false},
		{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, topic, "orders2", false},
		{"User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "logs-app", true},
		{"User:bob", "1.2.3.4", kmsg.ACLOperationDescribe, topic, "logs-app", true},
		{"User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "logs-secret", false}, // DENY ALL wins
		{"User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "log", false},
		{"User:carol", "10.0.0.7", kmsg.ACLOperationDescribe, topic, "anything", true}, // wildcard name, principal; host
		{"User:carol", "10.0.0.8", kmsg.ACLOperationDescribe, topic, "anything", false},
		{"User:carol", "10.0.0.7", kmsg.ACLOperationRead, topic, "anything", false}, // DESCRIBE does not imply READ
		{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, group, "g", true},
		{"User:alice", "192.168.1.1", kmsg.ACLOperationRead, group, "g", false}, // DENY from that host
		{"User:alice", "192.168.1.1", kmsg.ACLOperationDelete, group, "g", true},
		{"User:broker", "1.2.3.4", kmsg.ACLOperationClusterAction, cluster, ClusterName, true},
		{"User:broker", "1.2.3.4", kmsg.ACLOperationAlter, cluster, ClusterName, false},
		{"User:admin", "1.2.3.4", kmsg.ACLOperationAlter, cluster, ClusterName, true}, // super user
		{"User:admin", "1.2.3.4", kmsg.ACLOperationWrite, topic, "logs-secret", true},
	}
	for _, c := range cases {
		if got := a.Authorize(set, c.principal, c.host, c.op, c.typ, c.name); got != c.want {
			t.Errorf("%s from %s: %s %s %q = %v, want %v", c.principal, c.host, c.op, c.typ, c.name, got, c.want)
		}
	}
	// allow.everyone.if.no.acl.found opens only resources no binding covers.
	open := NewAuthorizer(nil, true)
	if !open.Authorize(set, "User:x", "h", kmsg.ACLOperationWrite, group, "other") {
		t.Error("uncovered group closed with allow.everyone.if.no.acl.found")
	}
	if open.Authorize(set, "User:x", "h", kmsg.ACLOperationWrite, topic, "orders") {
		t.Error("covered topic open to a principal without an ACL")
	}
	if a.Authorize(nil, "User:x", "h", kmsg.ACLOperationRead, topic, "t") {
		t.Error("no ACLs and allow.everyone.if.no.acl.found=false allowed a request")
	}
	var off *Authorizer
	if !off.Authorize(set, "User:x", "h", kmsg.ACLOperationWrite, topic, "logs-secret") {
		t.Error("a nil authorizer refused a request")
	}
}

func TestAuthorizeAny(t *testing.T) {
	a := NewAuthorizer(nil, false)
	set := NewSet([]Binding{
		allow(topic, pre, "a-", "User:alice", "*", kmsg.ACLOperationWrite),
		deny(allow(topic, pre, "a", "User:carol", "*", kmsg.ACLOperationWrite)),
		allow(topic, lit, "a-1", "User:carol", "*", kmsg.ACLOperationWrite),
		allow(topic, lit, "b", "User:dave", "*", kmsg.ACLOperationWrite),
		deny(allow(topic, lit, "c", "User:dave", "*", kmsg.ACLOperationWrite)),
	})
	for principal, want := range map[string]bool{"User:alice": true, "User:bob": false, "User:carol": false, "User:dave": true} {
		if got := a.AuthorizeAny(set, principal, "h", kmsg.ACLOperationWrite, topic); got != want {
			t.Errorf("%s: %v, want %v", principal, got, want)
		}
	}
}

func TestFilterMatchesAndValidate(t *testing.T) {
	lb := allow(topic, lit, "orders", "User:alice", "*", kmsg.ACLOperationRead)
	pb := allow(topic, pre, "ord", "User:alice", "*", kmsg.ACLOperationRead)
	wb := allow(topic, lit, "*", "User:alice", "*", kmsg.ACLOperationRead)
	name := "orders"
	anyOf := func(pt kmsg.ACLResourcePatternType) Filter {
		return Filter{ResourceType: kmsg.ACLResourceTypeAny, ResourceName: &name, PatternType: pt,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	}
	for _, c := range []struct {
		f    Filter
		b    Binding
		want bool
	}{
		{anyOf(kmsg.ACLResourcePatternTypeMatch), lb, true},
		{anyOf(kmsg.ACLResourcePatternTypeMatch), pb, true},
		{anyOf(kmsg.ACLResourcePatternTypeMatch), wb, true},
		{anyOf(kmsg.ACLResourcePatternTypeAny), pb, false}, // ANY compares names exactly
		{anyOf(kmsg.ACLResourcePatternTypeLiteral), lb, true},
		{anyOf(kmsg.ACLResourcePatternTypeLiteral), wb, false},
		{anyOf(kmsg.ACLResourcePatternTypePrefixed), lb, false},
	} {
		if got := c.f.Matches(c.b); got != c.want {
			t.Errorf("%v matches %v = %v, want %v", c.f.PatternType, c.b, got, c.want)
		}
	}
	for _, b := range []Binding{
		{ResourceType: kmsg.ACLResourceTypeAny, ResourceName: "x", PatternType: lit, Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		{ResourceType: topic, ResourceName: "x", PatternType: kmsg.ACLResourcePatternTypeMatch, Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		{ResourceType: topic, ResourceName: "x", PatternType: lit, Principal: "a", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		{ResourceType: topic, ResourceName: "x", PatternType: lit, Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAllow},
		{ResourceType: topic, ResourceName: "x", PatternType: lit, Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAny},
		{ResourceType: cluster, ResourceName: "x", PatternType: lit, Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow},
	} {
		if b.Validate() == nil {
			t.Errorf("invalid binding accepted: %v", b)
		}
	}
	if err := lb.Validate(); err != nil {
		t.Errorf("valid binding refused: %v", err)
	}
}

func TestConfigParsing(t *testing.T) {
	if on, err := ParseAuthorizerClassName("org.apache.kafka.metadata.authorizer.StandardAuthorizer"); !on || err != nil {
		t.Fatal(on, err)
	}
	if on, err := ParseAuthorizerClassName(""); on || err != nil {
		t.Fatal(on, err)
	}
	if _, err := ParseAuthorizerClassName("com.example.Mine"); err == nil {
		t.Fatal("unknown authorizer class accepted")
	}
	users, err := ParseSuperUsers(" User:admin ; User:broker;")
	if err != nil || len(users) != 2 || users[1] != "User:broker" {
		t.Fatal(users, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Fatal("super user without a type accepted")
	}
}
