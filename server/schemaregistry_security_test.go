package server

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/securitytest"
)

// The schema registry over HTTPS with basic authentication against the node's SCRAM
// and PLAIN users and ACLs on subjects, driven with franz-go's pkg/sr client: alice
// (SCRAM-SHA-512) is refused until an ACL grants her the subject, wrong or missing
// credentials get 401, and plain HTTP is not served.
func TestSchemaRegistryHTTPSBasicAuthAndACLs(t *testing.T) {
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startSecureNode(t, "--schema.registry.listener="+registry, "--schema.registry.ssl.enable=true",
		"--schema.registry.authentication.method=BASIC",
		"--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx := ctxFor(t, 90*time.Second)
	n.addAlice(t, ctx, "orders")

	client := func(opts ...sr.ClientOpt) *sr.Client {
		t.Helper()
		cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs("https://" + registry), sr.DialTLSConfig(n.clientTLS())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	status := func(err error) (int, int) {
		var re *sr.ResponseError
		if !errors.As(err, &re) {
			return 0, 0
		}
		return re.StatusCode, re.ErrorCode
	}
	schema := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`}

	admin := client(sr.BasicAuth("admin", "admin-secret"))
	testutil.Eventually(t, 20*time.Second, "the registry answers over HTTPS", func() bool {
		_, err := admin.Subjects(ctx)
		return err == nil
	})
	alice := client(sr.BasicAuth("alice", "alice-secret"))
	if _, err := alice.CreateSchema(ctx, "orders-value", schema); func() bool { s, c := status(err); return s != 403 || c != 40301 }() {
		t.Fatalf("alice without an ACL: %v, want 403 with 40301\n%s", err, n.logs.String())
	}
	if subjects, err := alice.Subjects(ctx); err != nil || len(subjects) != 0 {
		t.Fatalf("alice's subjects without an ACL: %v, %v", subjects, err)
	}
	// carol, a PLAIN user, authenticates too: she is refused by ACLs, not by a 401.
	if _, err := client(sr.BasicAuth("carol", "carol-secret")).CreateSchema(ctx, "orders-value", schema); func() bool { s, _ := status(err); return s != 403 }() {
		t.Fatalf("carol: %v, want 403", err)
	}
	for what, cl := range map[string]*sr.Client{
		"wrong password": client(sr.BasicAuth("alice", "bob-secret")),
		"unknown user":   client(sr.BasicAuth("mallory", "x")),
		"no credentials": client(),
	} {
		if _, err := cl.Subjects(ctx); func() bool { s, c := status(err); return s != 401 || c != 401 }() {
			t.Errorf("%s: %v, want 401", what, err)
		}
	}
	// Plain HTTP on the HTTPS port is not served.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + registry + "/subjects"); err == nil {
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP answered %d", resp.StatusCode)
		}
		resp.Body.Close()
	}

	// The super user grants alice WRITE and READ on orders-value, a SUBJECT ACL created
	// with CreateAcls like any other.
	kadmin := n.saslClient(t, scram512("admin", "admin-secret"))
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationRead} {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = acl.ResourceTypeSubject, "orders-value", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, kadmin)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("CreateAcls: error %d %v", r.ErrorCode, r.ErrorMessage)
		}
	}
	var created sr.SubjectSchema
	testutil.Eventually(t, 10*time.Second, "alice may register", func() bool {
		created, err = alice.CreateSchema(ctx, "orders-value", schema)
		if err != nil {
			t.Logf("alice registers: %v", err)
		}
		return err == nil
	})
	if got, err := alice.SchemaByID(ctx, created.ID); err != nil || !strings.Contains(got.Schema, "Order") {
		t.Fatalf("alice reads her schema by id: %+v, %v", got, err)
	}
	if subjects, err := alice.Subjects(ctx); err != nil || len(subjects) != 1 || subjects[0] != "orders-value" {
		t.Fatalf("alice's subjects: %v, %v", subjects, err)
	}
	// Only that subject.
	if _, err := alice.CreateSchema(ctx, "payments-value", schema); func() bool { s, c := status(err); return s != 403 || c != 40301 }() {
		t.Fatalf("alice on another subject: %v, want 40301", err)
	}
	if _, err := alice.DeleteSubject(ctx, "orders-value", sr.SoftDelete); func() bool { s, _ := status(err); return s != 403 }() {
		t.Fatalf("alice deletes without DELETE: %v", err)
	}
	if logs := n.logs.String(); !strings.Contains(logs, "audit=authz principal=User:alice") ||
		!strings.Contains(logs, "operation=WRITE resource_type=SUBJECT resource=payments-value") {
		t.Errorf("no audit record of the denials:\n%s", logs)
	}
}

// The schema registry with client certificates: the principal is the certificate's
// through ssl.principal.mapping.rules (CN=alice,OU=eng is User:alice), a client without
// one is refused in the handshake, and a rotated keystore is served without a restart.
func TestSchemaRegistryMutualTLS(t *testing.T) {
	registry := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n := startSecureNode(t, "--schema.registry.listener="+registry, "--schema.registry.ssl.enable=true",
		"--schema.registry.ssl.client.auth=required",
		"--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "--super.users=User:admin")
	ctx := ctxFor(t, 90*time.Second)
	n.addAlice(t, ctx, "orders")

	certFor := func(cn string) tls.Certificate {
		return n.ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: []string{"eng"}}}).TLS(t)
	}
	client := func(certs ...tls.Certificate) *sr.Client {
		t.Helper()
		cl, err := sr.NewClient(sr.URLs("https://"+registry), sr.DialTLSConfig(n.clientTLS(certs...)))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	admin, alice := client(certFor("admin")), client(certFor("alice"))
	schema := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`}
	var created sr.SubjectSchema
	var err error
	testutil.Eventually(t, 20*time.Second, "the registry answers over mTLS", func() bool {
		created, err = admin.CreateSchema(ctx, "orders-value", schema)
		return err == nil
	})
	var re *sr.ResponseError
	if _, err := alice.SchemaByID(ctx, created.ID); !errors.As(err, &re) || re.ErrorCode != 40301 {
		t.Fatalf("alice without an ACL: %v", err)
	}
	kadmin := n.saslClient(t, scram512("admin", "admin-secret"))
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = acl.ResourceTypeSubject, "orders-", kmsg.ACLResourcePatternTypePrefixed
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	if resp, err := req.RequestWith(ctx, kadmin); err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls: %+v, %v", resp, err)
	}
	testutil.Eventually(t, 10*time.Second, "alice reads by id", func() bool {
		_, err := alice.SchemaByID(ctx, created.ID)
		return err == nil
	})
	if _, err := alice.CreateSchema(ctx, "orders-value", schema); !errors.As(err, &re) || re.ErrorCode != 40301 {
		t.Fatalf("alice writes with READ only: %v", err)
	}
	// No certificate, or one of another CA: no TLS session at all.
	if _, err := client().Subjects(ctx); err == nil || errors.As(err, &re) {
		t.Errorf("a client without a certificate: %v", err)
	}
	rogue := n.rogue.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "admin", OrganizationalUnit: []string{"eng"}}}).TLS(t)
	if _, err := client(rogue).Subjects(ctx); err == nil || errors.As(err, &re) {
		t.Errorf("a certificate of another CA: %v", err)
	}

	// Rotate the keystore in place: new connections get the new certificate.
	rotated := n.ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "broker-1-rotated"}, Hosts: []string{"127.0.0.1"}})
	rotated.WriteKeystore(t, n.dir, "broker.pem")
	testutil.Eventually(t, 10*time.Second, "the rotated certificate", func() bool {
		conn, err := tls.Dial("tcp", registry, n.clientTLS(certFor("alice")))
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName == "broker-1-rotated"
	})
}
