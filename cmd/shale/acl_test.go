package main

import (
	"strings"
	"testing"
)

const standardAuthorizer = "--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// shale acl add, list and remove against shale serve with the authorizer on; the CLI
// connects unauthenticated, so User:ANONYMOUS is made the super user.
func TestACLCommands(t *testing.T) {
	b, _ := startServe(t, standardAuthorizer, "--super.users=User:ANONYMOUS")
	out := must(t, "", "acl", "add", b, "--topic", "orders", "--allow-principal", "User:alice", "--operation", "read",
		"--operation", "DESCRIBE")
	if n := len(lines(out)); n != 3 { // header and two bindings
		t.Fatalf("add printed %q", out)
	}
	must(t, "", "acl", "add", b, "--topic", "logs-", "--resource-pattern-type", "prefixed", "--deny-principal", "User:bob",
		"--deny-host", "10.0.0.1", "--operation", "write")
	must(t, "", "acl", "add", b, "--cluster", "--allow-principal", "User:ops", "--operation", "alter")

	list := must(t, "", "acl", "list", b)
	for _, want := range []string{"TOPIC  ", "orders", "User:alice", "READ", "DESCRIBE", "logs-", "PREFIXED", "10.0.0.1", "DENY",
		"CLUSTER", "kafka-cluster", "User:ops", "ALTER"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	if got := lines(must(t, "", "acl", "list", b, "--principal", "User:bob")); len(got) != 2 || !strings.Contains(got[1], "logs-") {
		t.Errorf("list --principal User:bob: %q", got)
	}
	if got := lines(must(t, "", "acl", "list", b, "--topic", "logs-app", "--resource-pattern-type", "match")); len(got) != 2 {
		t.Errorf("list --topic logs-app --resource-pattern-type match: %q", got)
	}

	removed := must(t, "", "acl", "remove", b, "--topic", "orders", "--allow-principal", "User:alice", "--operation", "read")
	if got := lines(removed); len(got) != 2 || !strings.Contains(got[1], "READ") {
		t.Errorf("remove printed %q", removed)
	}
	if list := must(t, "", "acl", "list", b, "--topic", "orders"); strings.Contains(list, "READ") || !strings.Contains(list, "DESCRIBE") {
		t.Errorf("after remove:\n%s", list)
	}

	// The schema registry's resource types: a prefixed subject and the registry.
	must(t, "", "acl", "add", b, "--subject", "orders-", "--resource-pattern-type", "prefixed", "--allow-principal", "User:alice",
		"--operation", "write")
	must(t, "", "acl", "add", b, "--registry", "--allow-principal", "User:alice", "--operation", "describe_configs")
	list = must(t, "", "acl", "list", b)
	for _, want := range []string{"SUBJECT", "orders-", "REGISTRY", "schema-registry", "DESCRIBE_CONFIGS"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	if got := lines(must(t, "", "acl", "list", b, "--subject", "orders-value", "--resource-pattern-type", "match")); len(got) != 2 || !strings.Contains(got[1], "WRITE") {
		t.Errorf("list --subject orders-value --resource-pattern-type match: %q", got)
	}
	if got := lines(must(t, "", "acl", "remove", b, "--registry")); len(got) != 2 || !strings.Contains(got[1], "REGISTRY") {
		t.Errorf("remove --registry: %q", got)
	}

	if r := shale(t, "", "acl", "add", b, "--topic", "x", "--operation", "read"); r.code != exitUsage {
		t.Errorf("add without a principal: %+v", r)
	}
	if r := shale(t, "", "acl", "add", b, "--topic", "x", "--allow-principal", "alice"); r.code != exitUsage {
		t.Errorf("add with a principal without a type: %+v", r)
	}
	if r := shale(t, "", "acl", "remove", b, "--operation", "read"); r.code != exitUsage {
		t.Errorf("remove without a resource: %+v", r)
	}
}

// With the authorizer on, no ACL and no super user, nothing is allowed: the CLI's
// requests are refused with Kafka's authorization errors.
func TestAuthorizerRefusesWithoutACLs(t *testing.T) {
	b, _ := startServe(t, standardAuthorizer)
	r := shale(t, "", "topic", "create", b, "--topic", "t")
	if r.code != exitFailed || !strings.Contains(r.stderr, "TOPIC_AUTHORIZATION_FAILED") {
		t.Errorf("create topic: %+v", r)
	}
	r = shale(t, "", "acl", "list", b)
	if r.code != exitFailed || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("acl list: %+v", r)
	}
	r = shale(t, "", "serve", "--authorizer.class.name=com.example.Mine")
	if r.code != exitUsage || !strings.Contains(r.stderr, "authorizer.class.name") {
		t.Errorf("serve with an unknown authorizer: %+v", r)
	}
}
