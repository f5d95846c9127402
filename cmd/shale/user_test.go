package main

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/security/securitytest"
)

// `shale user` against a node whose only Kafka listener is SASL_SSL: the admin login
// (the inter-broker user) creates alice, alice produces and consumes with the CLI's
// --command-config, and once deleted she can no longer log in.
func TestUserCommandsOverSASLSSL(t *testing.T) {
	dir := t.TempDir()
	ca := securitytest.NewCA(t, "cli test CA")
	keystore := ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "broker"}, Hosts: []string{"127.0.0.1"}}).WriteKeystore(t, dir, "broker.pem")
	truststore := securitytest.WriteTruststore(t, dir, "ca.pem", ca)
	kafka, controller := testutil.FreePort(t), testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	var serveErr testutil.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--log.dirs=" + filepath.Join(dir, "data"),
			fmt.Sprintf("--listeners=SASL_SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", kafka, controller),
			"--inter.broker.listener.name=SASL_SSL", "--ssl.keystore.location=" + keystore,
			"--sasl.inter.broker.username=admin", "--sasl.inter.broker.password=admin-secret",
			"--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=", "--log.level=warn"}, nil, io.Discard, &serveErr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	props := func(name, user, pass string) string {
		p := filepath.Join(dir, name)
		body := fmt.Sprintf("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s\";\n"+
			"ssl.truststore.location=%s\n", user, pass, truststore)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return "--command-config=" + p
	}
	b := fmt.Sprintf("--bootstrap-server=127.0.0.1:%d", kafka)
	admin := props("admin.properties", "admin", "admin-secret")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if r := shale(t, "", "topic", "list", b, admin, "--timeout", "2s"); r.code == exitOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up: %s", serveErr.String())
		}
	}
	if out := must(t, "", "user", "create", b, admin, "--user", "alice", "--password", "alice-secret"); out != "created user alice\n" {
		t.Errorf("create printed %q", out)
	}
	if out := must(t, "", "user", "list", b, admin); !strings.Contains(out, "alice  SCRAM-SHA-256  4096") || !strings.Contains(out, "alice  SCRAM-SHA-512  4096") {
		t.Errorf("list printed %q", out)
	}
	alice := props("alice.properties", "alice", "alice-secret")
	must(t, "", "topic", "create", b, admin, "--topic", "t")
	must(t, "hello\n", "produce", b, alice, "--topic", "t")
	if got := must(t, "", "consume", b, alice, "--topic", "t", "--from-beginning", "--max-messages", "1"); got != "hello\n" {
		t.Errorf("consumed %q", got)
	}
	if r := shale(t, "", "topic", "list", b, props("bad.properties", "alice", "wrong"), "--timeout", "5s"); r.code == exitOK || !strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("wrong password: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := must(t, "", "user", "delete", b, admin, "--user", "alice"); out != "deleted user alice\n" {
		t.Errorf("delete printed %q", out)
	}
	if r := shale(t, "", "user", "list", b, admin, "--user", "alice"); r.code != exitFailed || !strings.Contains(r.stderr, "no such user: alice") {
		t.Errorf("list after delete: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := shale(t, "", "topic", "list", b, alice, "--timeout", "5s"); r.code == exitOK {
		t.Errorf("alice still logs in after her deletion: %q", r.stdout)
	}
}
