package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/httpauth"
)

// authzRegistry is a registry with the authorizer on and User:admin a super user. Its
// test middleware takes the principal from the basic user name unchecked: these tests
// are about authorization; httpauth tests authentication.
type authzRegistry struct {
	t   *testing.T
	n   *controllertest.Node
	url string
}

func newAuthzRegistry(t *testing.T) *authzRegistry {
	n := controllertest.Start(t)
	trust := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, _, ok := r.BasicAuth(); ok {
				r = r.WithContext(httpauth.WithPrincipal(r.Context(), "User:"+u))
			}
			h.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(New(Options{Images: n.Broker, Store: n.Broker,
		Authorizer: acl.NewAuthorizer([]string{"User:admin"}, false), Middleware: trust}).Handler())
	t.Cleanup(srv.Close)
	return &authzRegistry{t: t, n: n, url: srv.URL}
}

// as sends a request as user ("" for anonymous) and checks the status; for 403 it checks
// Confluent's 40301 body.
func (a *authzRegistry) as(user, method, path string, body any, want int) any {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Content-Type", contentType)
	if user != "" {
		req.SetBasicAuth(user, "unchecked")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s as %q: status %d (%s), want %d", method, path, user, resp.StatusCode, raw, want)
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	if want == 403 {
		m, _ := out.(map[string]any)
		if code, _ := m["error_code"].(float64); code != RegistryForbidden || m["message"] == "" {
			a.t.Fatalf("%s %s as %q: body %s, want error_code 40301", method, path, user, raw)
		}
	}
	return out
}

// grant stores bindings and waits until the broker's image has them.
func (a *authzRegistry) grant(bs ...acl.Binding) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs, err := a.n.Broker.CreateACLs(ctx, bs)
	if err != nil {
		a.t.Fatal(err)
	}
	for _, e := range errs {
		if e != nil {
			a.t.Fatal(e)
		}
	}
	for {
		im := a.n.Broker.Current()
		all := true
		for _, b := range bs {
			all = all && im.ACLs.Contains(b)
		}
		if all {
			return
		}
		select {
		case <-ctx.Done():
			a.t.Fatal("ACLs did not reach the image")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func binding(typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Binding {
	return acl.Binding{ResourceType: typ, ResourceName: name, PatternType: pattern, Principal: principal, Host: acl.Wildcard,
		Operation: op, Permission: perm}
}

const ordersV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`

func TestAuthorization(t *testing.T) {
	a := newAuthzRegistry(t)
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	allow, deny := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	subject, registry := acl.ResourceTypeSubject, acl.ResourceTypeRegistry

	// The super user may do anything.
	a.as("admin", "POST", "/subjects/users-value/versions", map[string]any{"schema": userV1}, 200)
	a.as("admin", "POST", "/subjects/orders-value/versions", map[string]any{"schema": ordersV1}, 200)
	a.as("admin", "PUT", "/config", map[string]any{"compatibility": "BACKWARD"}, 200)

	// Without ACLs, nobody else may do anything, anonymous included; listings are empty.
	for _, user := range []string{"alice", ""} {
		a.as(user, "POST", "/subjects/users-value/versions", map[string]any{"schema": userV2}, 403)
		a.as(user, "GET", "/subjects/users-value/versions/1", nil, 403)
		a.as(user, "GET", "/subjects/users-value/versions", nil, 403)
		a.as(user, "GET", "/schemas/ids/1", nil, 403)
		a.as(user, "GET", "/config", nil, 403)
		a.as(user, "GET", "/mode", nil, 403)
		if got := js(a.as(user, "GET", "/subjects", nil, 200)); got != `[]` {
			t.Errorf("subjects as %q: %s", user, got)
		}
	}
	// Open to all: the types and the root.
	a.as("alice", "GET", "/schemas/types", nil, 200)
	a.as("alice", "GET", "/", nil, 200)
	// An unknown id is not found, authorized or not.
	a.as("alice", "GET", "/schemas/ids/99", nil, 404)

	a.grant(
		binding(subject, "users-", pre, "User:alice", kmsg.ACLOperationRead, allow),
		binding(subject, "users-value", lit, "User:alice", kmsg.ACLOperationWrite, allow),
		binding(registry, acl.RegistryName, lit, "User:alice", kmsg.ACLOperationDescribeConfigs, allow),
	)
	// READ implies DESCRIBE: the listing shows what alice may read.
	if got := js(a.as("alice", "GET", "/subjects", nil, 200)); got != `["users-value"]` {
		t.Errorf("alice's subjects: %s", got)
	}
	if got := js(a.as("admin", "GET", "/subjects", nil, 200)); got != `["orders-value","users-value"]` {
		t.Errorf("admin's subjects: %s", got)
	}
	a.as("alice", "GET", "/subjects/users-value/versions", nil, 200)
	a.as("alice", "GET", "/subjects/users-value/versions/1", nil, 200)
	a.as("alice", "GET", "/subjects/users-value/versions/latest/schema", nil, 200)
	a.as("alice", "POST", "/subjects/users-value", map[string]any{"schema": userV1}, 200)
	a.as("alice", "POST", "/compatibility/subjects/users-value/versions/latest", map[string]any{"schema": userV2}, 200)
	a.as("alice", "POST", "/subjects/users-value/versions", map[string]any{"schema": userV2}, 200)
	a.as("alice", "GET", "/schemas/ids/1", nil, 200)
	a.as("alice", "GET", "/schemas/ids/1/schema", nil, 200)
	a.as("alice", "GET", "/config", nil, 200)
	a.as("alice", "GET", "/mode", nil, 200)
	// Schema 1 is under another subject too: only hers is listed.
	a.as("admin", "POST", "/subjects/other-value/versions", map[string]any{"schema": userV1}, 200)
	if got := js(a.as("alice", "GET", "/schemas/ids/1/versions", nil, 200)); got != `[{"subject":"users-value","version":1}]` {
		t.Errorf("alice's versions of schema 1: %s", got)
	}
	if got := js(a.as("alice", "GET", "/schemas/ids/1/subjects", nil, 200)); got != `["users-value"]` {
		t.Errorf("alice's subjects of schema 1: %s", got)
	}
	if got := js(a.as("admin", "GET", "/schemas/ids/1/subjects", nil, 200)); got != `["other-value","users-value"]` {
		t.Errorf("admin's subjects of schema 1: %s", got)
	}
	// What alice was not granted.
	a.as("alice", "GET", "/subjects/orders-value/versions/1", nil, 403)
	a.as("alice", "POST", "/subjects/orders-value/versions", map[string]any{"schema": ordersV1}, 403)
	a.as("alice", "GET", "/schemas/ids/2", nil, 403) // only orders-value has it
	a.as("alice", "PUT", "/config", map[string]any{"compatibility": "NONE"}, 403)
	a.as("alice", "PUT", "/mode", map[string]any{"mode": "READONLY"}, 403)
	a.as("alice", "GET", "/config/users-value", nil, 403)
	a.as("alice", "PUT", "/config/users-value", map[string]any{"compatibility": "NONE"}, 403)
	a.as("alice", "DELETE", "/subjects/users-value/versions/1", nil, 403)
	a.as("alice", "DELETE", "/subjects/users-value", nil, 403)
	a.as("alice", "GET", "/subjects/users-value/versions/1/referencedby", nil, 403) // DESCRIBE on the registry
	a.as("alice", "GET", "/schemas/ids/2/versions", nil, 403)
	a.as("bob", "GET", "/subjects/users-value/versions/1", nil, 403) // grants are per principal

	a.grant(
		binding(subject, "users-value", lit, "User:alice", kmsg.ACLOperationAlterConfigs, allow),
		binding(subject, "users-value", lit, "User:alice", kmsg.ACLOperationDelete, allow),
		binding(registry, acl.RegistryName, lit, "User:alice", kmsg.ACLOperationDescribe, allow),
	)
	a.as("alice", "PUT", "/config/users-value", map[string]any{"compatibility": "NONE"}, 200)
	a.as("alice", "GET", "/config/users-value", nil, 200) // ALTER_CONFIGS implies DESCRIBE_CONFIGS
	a.as("alice", "PUT", "/mode/users-value", map[string]any{"mode": "READWRITE"}, 200)
	a.as("alice", "GET", "/subjects/users-value/versions/1/referencedby", nil, 200)
	a.as("alice", "DELETE", "/subjects/users-value/versions/1", nil, 200)
	// A soft-deleted version still lets alice read its schema by id.
	a.as("alice", "GET", "/schemas/ids/1", nil, 200)

	// DENY wins over the prefixed ALLOW.
	a.grant(binding(subject, "users-value", lit, "User:alice", kmsg.ACLOperationRead, deny))
	a.as("alice", "GET", "/subjects/users-value/versions/2", nil, 403)
	a.as("alice", "GET", "/schemas/ids/1", nil, 403)
	if got := js(a.as("alice", "GET", "/subjects", nil, 200)); got != `["users-value"]` {
		// Still listed: the WRITE and DELETE alice keeps imply DESCRIBE.
		t.Errorf("alice's subjects after the deny: %s", got)
	}
}
