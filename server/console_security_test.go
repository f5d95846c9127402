package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/internal/testutil"
)

// The Security page changes ACLs, client quotas and SCRAM users as the viewer: admin
// (a super user) may; alice, without ALTER on the cluster, is shown Kafka's refusal.
func TestConsoleSecurityChanges(t *testing.T) {
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startSecureNode(t, "--http.listener="+httpAddr,
		"--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx := ctxFor(t, 120*time.Second)
	n.addAlice(t, ctx, "visible")
	adm := kadm.NewClient(n.saslClient(t, scram512("admin", "admin-secret")))

	a := newBrowser(t, "http://"+httpAddr)
	if code, _, _ := a.post("/login", url.Values{"user": {"admin"}, "password": {"admin-secret"}, "mechanism": {"SCRAM-SHA-512"}}); code != http.StatusSeeOther {
		t.Fatalf("login as admin: %d", code)
	}
	_, page := a.get("/security")
	for _, want := range []string{`id="acl-form"`, `id="quota-form"`, `id="user-form"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("no %s on admin's security page:\n%s", want, page)
		}
	}
	token := csrfOf(t, page)
	post := func(b *browser, f url.Values) (int, string, string) {
		t.Helper()
		f.Set("csrf", token)
		return b.post("/security", f)
	}
	done := func(what string, code int, loc, body string) {
		t.Helper()
		if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/security?done=") {
			t.Fatalf("%s: %d %q\n%s", what, code, loc, body)
		}
		if _, page := a.get(loc); !strings.Contains(page, `id="done"`) {
			t.Fatalf("%s: the page after it says nothing:\n%s", what, page)
		}
	}

	// An ACL: added, seen through kadm, deleted with the row's own form fields.
	acl := url.Values{"resource": {"GROUP"}, "pattern": {"PREFIXED"}, "name": {"billing-"}, "principal": {"User:bob"},
		"host": {"*"}, "operation": {"READ"}, "permission": {"DENY"}}
	f := url.Values{"action": {"acl-add"}}
	for k, v := range acl {
		f[k] = v
	}
	code, loc, body := post(a, f)
	done("add an ACL", code, loc, body)
	bob := kadm.NewACLs().Deny("User:bob").DenyHosts("*").Groups("billing-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead)
	described, err := adm.DescribeACLs(ctx, bob)
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 1 {
		t.Fatalf("the ACL added, through kadm: %v %+v", err, described)
	}
	if _, page = a.get("/security"); !strings.Contains(page, "<td>User:bob</td><td>*</td><td>GROUP</td><td>billing-</td><td>PREFIXED</td><td>READ</td><td>DENY</td>") {
		t.Fatalf("the ACL on the page:\n%s", page)
	}
	f.Set("action", "acl-delete")
	code, loc, body = post(a, f)
	done("delete the ACL", code, loc, body)
	if described, err = adm.DescribeACLs(ctx, bob); err != nil || len(described) != 1 || len(described[0].Described) != 0 {
		t.Fatalf("the ACL deleted, through kadm: %v %+v", err, described)
	}

	// A quota for user alice: set, then removed.
	code, loc, body = post(a, url.Values{"action": {"quota-set"}, "et": {"user"}, "en": {"alice"}, "key": {"producer_byte_rate"}, "value": {"1048576"}})
	done("set a quota", code, loc, body)
	alice := "alice"
	qs, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &alice, MatchType: 0}})
	if err != nil || len(qs) != 1 || len(qs[0].Values) != 1 || qs[0].Values[0].Key != "producer_byte_rate" || qs[0].Values[0].Value != 1048576 {
		t.Fatalf("the quota set, through kadm: %v %+v", err, qs)
	}
	_, page = a.get("/security")
	if !strings.Contains(page, "<td>{user=alice}</td><td>producer_byte_rate=1048576</td>") {
		t.Fatalf("the quota on the page:\n%s", page)
	}
	code, loc, body = post(a, url.Values{"action": {"quota-remove"}, "et": {"user"}, "en": {"alice"}, "ed": {"0"}, "key": {"producer_byte_rate"}})
	done("remove the quota", code, loc, body)
	if qs, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &alice, MatchType: 0}}); err != nil || len(qs) != 0 {
		t.Fatalf("the quota removed, through kadm: %v %+v", err, qs)
	}

	// A SCRAM user: created with a password that then logs in, and deleted.
	code, loc, body = post(a, url.Values{"action": {"user-set"}, "user": {"carol"}, "mechanism": {"SCRAM-SHA-256"}, "iterations": {"8192"}, "password": {"carol-secret"}})
	done("create a SCRAM user", code, loc, body)
	users, err := adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || len(users["carol"].CredInfos) != 1 || users["carol"].CredInfos[0].Mechanism != kadm.ScramSha256 || users["carol"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("carol, through kadm: %v %+v", err, users)
	}
	c := newBrowser(t, "http://"+httpAddr)
	if code, _, body := c.post("/login", url.Values{"user": {"carol"}, "password": {"carol-secret"}, "mechanism": {"SCRAM-SHA-256"}}); code != http.StatusSeeOther {
		t.Fatalf("carol logs in with the password set: %d\n%s", code, body)
	}
	code, loc, body = post(a, url.Values{"action": {"user-delete"}, "user": {"carol"}, "mechanism": {"SCRAM-SHA-256"}})
	done("delete the SCRAM user", code, loc, body)
	if users, err = adm.DescribeUserSCRAMs(ctx); err != nil || len(users["carol"].CredInfos) != 0 {
		t.Fatalf("carol deleted, through kadm: %v %+v", err, users)
	}

	// Without the session's CSRF token, nothing changes.
	f = url.Values{"action": {"acl-add"}}
	for k, v := range acl {
		f[k] = v
	}
	if code, _, body := a.post("/security", f); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("a change without the CSRF token: %d\n%s", code, body)
	}
	if described, err = adm.DescribeACLs(ctx, bob); err != nil || len(described[0].Described) != 0 {
		t.Fatalf("a change without the CSRF token was made: %v %+v", err, described)
	}

	// alice may not alter the cluster: Kafka's refusal is what she sees.
	b := newBrowser(t, "http://"+httpAddr)
	if code, _, _ := b.post("/login", url.Values{"user": {"alice"}, "password": {"alice-secret"}, "mechanism": {"SCRAM-SHA-512"}}); code != http.StatusSeeOther {
		t.Fatalf("login as alice: %d", code)
	}
	// DescribeCluster says she may not alter the cluster: the page offers no forms.
	_, page = b.get("/security")
	if strings.Contains(page, `action="/security"`) || !strings.Contains(page, `id="read-only"`) {
		t.Fatalf("alice's security page offers changes:\n%s", page)
	}
	token = csrfOf(t, page)
	// Posted anyway, a change is refused by Kafka, and that is what she sees.
	for _, f := range []url.Values{
		{"action": {"acl-add"}, "resource": {"TOPIC"}, "pattern": {"LITERAL"}, "name": {"visible"}, "principal": {"User:alice"}, "operation": {"WRITE"}, "permission": {"ALLOW"}},
		{"action": {"quota-set"}, "et": {"user"}, "en": {"alice"}, "key": {"consumer_byte_rate"}, "value": {"1"}},
		{"action": {"user-set"}, "user": {"admin"}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"4096"}, "password": {"taken-over"}},
	} {
		code, _, body := post(b, f)
		if code != http.StatusBadRequest || !strings.Contains(body, "CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(body, `id="acls"`) {
			t.Fatalf("alice's %s: %d\n%s", f.Get("action"), code, body)
		}
	}
	if described, err = adm.DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("visible").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil || len(described[0].Described) != 0 {
		t.Fatalf("alice granted herself WRITE: %v %+v", err, described)
	}
}

// console.read.only offers no security forms and refuses their POSTs with a valid token.
func TestConsoleSecurityReadOnly(t *testing.T) {
	// No REST proxy: its default port 8082 may be another process's.
	n := startConsoleNode(t, "--console.read.only=true", "--rest.proxy.listener=")
	ctx := ctxFor(t, 60*time.Second)
	b := newBrowser(t, "http://"+n.http)
	_, page := b.get("/security")
	if !strings.Contains(page, `id="read-only"`) {
		t.Fatalf("a read-only console does not say so:\n%s", page)
	}
	for _, form := range []string{`id="acl-form"`, `id="quota-form"`, `id="user-form"`, `action="/security"`} {
		if strings.Contains(page, form) {
			t.Fatalf("a read-only console offers %s:\n%s", form, page)
		}
	}
	token := csrfOf(t, page)
	code, _, body := b.post("/security", url.Values{"csrf": {token}, "action": {"quota-set"}, "et": {"user"}, "en": {"dave"}, "key": {"producer_byte_rate"}, "value": {"5"}})
	if code != http.StatusForbidden || !strings.Contains(body, "console.read.only") {
		t.Fatalf("a change on a read-only console: %d\n%s", code, body)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if qs, err := kadm.NewClient(cl).DescribeClientQuotas(ctx, false, nil); err != nil || len(qs) != 0 {
		t.Fatalf("a read-only console set a quota: %v %+v", err, qs)
	}
}
