package server

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controllerpb "github.com/shalelog/shale/controller/proto"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/security/securitytest"
)

// secureNode is one combined node with a SASL_SSL listener (the inter-broker one), an
// SSL listener that requires client certificates, and a PLAINTEXT-free controller port.
type secureNode struct {
	ca, rogue    *securitytest.CA
	secure, mtls string // addresses
	ctl          string
	logs         *testutil.Buffer
	dir          string
}

func startSecureNode(t *testing.T, extra ...string) *secureNode {
	t.Helper()
	n := &secureNode{logs: &testutil.Buffer{}, dir: t.TempDir()}
	n.ca = securitytest.NewCA(t, "shale test CA")
	n.rogue = securitytest.NewCA(t, "someone else's CA")
	server := n.ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "broker-1"}, Hosts: []string{"127.0.0.1", "localhost"}})
	keystore := server.WriteKeystore(t, n.dir, "broker.pem")
	truststore := securitytest.WriteTruststore(t, n.dir, "ca.pem", n.ca)
	users := filepath.Join(n.dir, "plain-users")
	if err := os.WriteFile(users, []byte("# PLAIN users\ncarol=carol-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.secure = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n.mtls = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n.ctl = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	args := append([]string{
		"--log.dirs=" + filepath.Join(n.dir, "data"), "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
		"--listeners=SECURE://" + n.secure + ",MTLS://" + n.mtls + ",CONTROLLER://" + n.ctl,
		"--listener.security.protocol.map=SECURE:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
		"--inter.broker.listener.name=SECURE",
		"--ssl.keystore.location=" + keystore, "--ssl.truststore.location=" + truststore,
		"--ssl.client.auth=required",
		"--ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=eng.*$/$1/L,DEFAULT",
		"--sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", "--sasl.plain.users.file=" + users,
		"--sasl.inter.broker.username=admin", "--sasl.inter.broker.password=admin-secret",
		"--group.initial.rebalance.delay.ms=0",
	}, extra...)
	runNode(t, n.logs, args...)
	return n
}

func (n *secureNode) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: securitytest.Pool(n.ca), Certificates: certs, MinVersion: tls.VersionTLS12}
}

func (n *secureNode) saslClient(t *testing.T, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.secure), kgo.DialTLSConfig(n.clientTLS()), kgo.SASL(mech),
		kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (n *secureNode) mtlsClient(t *testing.T, certs ...tls.Certificate) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.mtls), kgo.DialTLSConfig(n.clientTLS(certs...)),
		kgo.RequestRetries(1), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// addAlice waits for the node over SASL_SSL, then, as the inter-broker admin, creates the
// SCRAM-SHA-512 user alice (password alice-secret) and a one-partition topic.
func (n *secureNode) addAlice(t *testing.T, ctx context.Context, topic string) {
	t.Helper()
	admin := n.saslClient(t, scram512("admin", "admin-secret"))
	testutil.Eventually(t, 30*time.Second, "the broker over SASL_SSL", func() bool {
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 2*time.Second), admin)
		return err == nil
	})
	adm := kadm.NewClient(admin)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// aliceCertFiles writes a client certificate for CN=alice,OU=eng (User:alice through the
// node's mapping rule) and its key, as the PEM files non-Go clients read.
func (n *secureNode) aliceCertFiles(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	cert := n.ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}}})
	certFile, keyFile = filepath.Join(n.dir, "alice.crt"), filepath.Join(n.dir, "alice.key")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func scram512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestSASLAndMutualTLS drives one node with franz-go: SCRAM users created through
// AlterUserScramCredentials, SCRAM-SHA-512 and PLAIN over SASL_SSL, client certificates
// over SSL, each listener advertised to its own clients, and every wrong credential
// refused with Kafka's error before any data is seen.
func TestSASLAndMutualTLS(t *testing.T) {
	n := startSecureNode(t)
	admin := n.saslClient(t, scram512("admin", "admin-secret"))
	testutil.Eventually(t, 30*time.Second, "the broker over SASL_SSL", func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 2*time.Second), admin)
		return err == nil && len(resp.Brokers) == 1
	})
	adm := kadm.NewClient(admin)
	ctx := ctxFor(t, 60*time.Second)
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "alice-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := altered["alice"].Err; e != nil {
		t.Fatalf("upsert alice: %v", e)
	}
	weak := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "bob", 2, 100, []byte("salt"), []byte("salted")
	weak.Upsertions = append(weak.Upsertions, up)
	if resp, err := weak.RequestWith(ctx, admin); err != nil || len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.UnacceptableCredential.Code {
		t.Fatalf("upsert with 100 iterations: %+v, %v; want UNACCEPTABLE_CREDENTIAL", resp, err)
	}
	described, err := adm.DescribeUserSCRAMs(ctx, "alice", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["alice"]; d.Err != nil || len(d.CredInfos) != 2 {
		t.Fatalf("describe alice: %+v", d)
	}
	if d := described["nobody"]; !errors.Is(d.Err, kerr.ResourceNotFound) {
		t.Fatalf("describe an unknown user: %+v", d)
	}

	// alice produces over SASL_SSL with SCRAM-SHA-512, and reads back with SCRAM-SHA-256.
	alice := n.saslClient(t, scram512("alice", "alice-secret"), kgo.DefaultProduceTopic("secured"), kgo.AllowAutoTopicCreation())
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("for alice's eyes")}).FirstErr(); err != nil {
		t.Fatalf("produce as alice: %v\n%s", err, n.logs.String())
	}
	reader := n.saslClient(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), kgo.ConsumeTopics("secured"))
	fs := reader.PollFetches(ctx)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "for alice's eyes" {
		t.Fatalf("consume as alice: %v, %d records", err, fs.NumRecords())
	}
	// Metadata answers each client with the listener it came in on.
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, alice)
	if err != nil || len(meta.Brokers) != 1 || fmt.Sprintf("%s:%d", meta.Brokers[0].Host, meta.Brokers[0].Port) != n.secure {
		t.Fatalf("Metadata over SASL_SSL: %+v, %v", meta, err)
	}

	// The inter-broker password is a secret, as Kafka's password configs are.
	cfgs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if c.Key == "sasl.inter.broker.password" {
				found = true
				if c.Value != nil || !c.Sensitive {
					t.Errorf("DescribeConfigs shows sasl.inter.broker.password: %+v", c)
				}
			}
		}
	}
	if !found {
		t.Error("DescribeConfigs lacks sasl.inter.broker.password")
	}

	// PLAIN against the users file.
	carol := n.saslClient(t, plain.Auth{User: "carol", Pass: "carol-secret"}.AsMechanism())
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, carol); err != nil {
		t.Fatalf("PLAIN login: %v", err)
	}

	// Wrong password, unknown user, a PLAIN user trying SCRAM: SASL_AUTHENTICATION_FAILED,
	// and no fetch gets an answer.
	for name, mech := range map[string]sasl.Mechanism{
		"wrong password":      scram512("alice", "not-her-password"),
		"unknown user":        scram512("mallory", "whatever"),
		"wrong PLAIN":         plain.Auth{User: "carol", Pass: "nope"}.AsMechanism(),
		"PLAIN user on SCRAM": scram512("carol", "carol-secret"),
	} {
		cl := n.saslClient(t, mech)
		fetch := kmsg.NewPtrFetchRequest()
		fetch.MaxWaitMillis, fetch.MaxBytes = 100, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "secured"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		resp, err := fetch.RequestWith(ctxFor(t, 20*time.Second), cl)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || resp != nil {
			t.Errorf("%s: fetch answered %+v, err %v; want SASL_AUTHENTICATION_FAILED", name, resp, err)
		}
	}

	// mTLS: alice's certificate maps to User:alice and may produce.
	aliceCert := n.ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}}})
	m := n.mtlsClient(t, aliceCert.TLS(t))
	meta, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, m)
	if err != nil || len(meta.Brokers) != 1 || fmt.Sprintf("%s:%d", meta.Brokers[0].Host, meta.Brokers[0].Port) != n.mtls {
		t.Fatalf("Metadata over SSL: %+v, %v", meta, err)
	}
	if err := m.ProduceSync(ctx, &kgo.Record{Topic: "secured", Value: []byte("over mTLS")}).FirstErr(); err != nil {
		t.Fatalf("produce over mTLS: %v", err)
	}

	// No certificate, an untrusted one, an expired one: the TLS handshake fails.
	untrusted := n.rogue.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}}})
	expired := n.ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}}, Expired: true})
	for name, certs := range map[string][]tls.Certificate{
		"no certificate": nil,
		"untrusted":      {untrusted.TLS(t)},
		"expired":        {expired.TLS(t)},
	} {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 20*time.Second), n.mtlsClient(t, certs...))
		if err == nil || resp != nil || !strings.Contains(err.Error(), "tls") {
			t.Errorf("%s: Metadata answered %+v, err %v; want a TLS handshake failure", name, resp, err)
		}
	}

	logs := n.logs.String()
	for _, want := range []string{
		`msg="authentication succeeded" event=authentication success=true principal=User:alice`,
		`mechanism=SCRAM-SHA-512`, `mechanism=SSL`, `listener=MTLS security_protocol=SSL`,
		`msg="authentication failed" event=authentication success=false principal=User:mallory`,
		`reason="TLS handshake`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(logs)
	}
}

// Before authenticating, a SASL listener answers ApiVersions only; anything else closes
// the connection, and the controller port serves no Kafka client when every broker
// listener is secured.
func TestSASLListenerRefusesUnauthenticatedRequests(t *testing.T) {
	n := startSecureNode(t)
	waitSecure := n.saslClient(t, scram512("admin", "admin-secret"))
	testutil.Eventually(t, 30*time.Second, "the broker over SASL_SSL", func() bool {
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 2*time.Second), waitSecure)
		return err == nil
	})
	// TLS but no SASL.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.secure), kgo.DialTLSConfig(n.clientTLS()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 10*time.Second), cl); err == nil {
		t.Fatalf("Metadata without SASL answered: %+v", resp)
	}
	if !strings.Contains(n.logs.String(), "request before SASL authentication") {
		t.Errorf("the closed connection is not logged:\n%s", n.logs.String())
	}
	// The controller port would be a way around authentication.
	cp, err := kgo.NewClient(kgo.SeedBrokers(n.ctl), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 10*time.Second), cp); err == nil {
		t.Fatalf("Metadata through the controller port answered: %+v", resp)
	}
}

// With the controller listener mapped to SSL, the broker reaches the controller's gRPC
// over TLS (with its own certificate, as ssl.client.auth=required asks): it registers and
// serves clients.
func TestControllerListenerOverTLS(t *testing.T) {
	n := startSecureNode(t, "--listener.security.protocol.map=SECURE:SASL_SSL,MTLS:SSL,CONTROLLER:SSL")
	admin := n.saslClient(t, scram512("admin", "admin-secret"))
	testutil.Eventually(t, 30*time.Second, "the broker registered through a TLS controller listener", func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 2*time.Second), admin)
		return err == nil && len(resp.Brokers) == 1
	})
	// A plaintext gRPC client is refused.
	cc, err := grpc.NewClient(n.ctl, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := controllerpb.NewControllerClient(cc).ListOffsetGroups(ctxFor(t, 5*time.Second), &controllerpb.ListOffsetGroupsRequest{}); err == nil {
		t.Fatal("plaintext gRPC to an SSL controller listener was answered")
	}
}

// Followers replicate over a secured inter-broker listener: SASL_SSL, where a second
// broker logs in to the first with the inter-broker SCRAM-SHA-512 login, and SSL with
// required client certificates, where it presents its own. An acks=all write that needs
// both replicas (min.insync.replicas=2) is acknowledged.
func TestReplicationOverSecuredListeners(t *testing.T) {
	for _, interBroker := range []string{"SECURE", "MTLS"} {
		t.Run(interBroker, func(t *testing.T) {
			n := startSecureNode(t, "--node.id=1", "--inter.broker.listener.name="+interBroker)
			secure2 := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
			mtls2 := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
			keystore, truststore := filepath.Join(n.dir, "broker.pem"), filepath.Join(n.dir, "ca.pem")
			runNode(t, n.logs, "--node.id=2", "--process.roles=broker", "--controller.quorum.voters=1@"+n.ctl,
				"--log.dirs="+filepath.Join(n.dir, "data2"), "--schema.registry.listener=", "--rest.proxy.listener=", "--http.listener=",
				"--listeners=SECURE://"+secure2+",MTLS://"+mtls2, "--listener.security.protocol.map=SECURE:SASL_SSL,MTLS:SSL",
				"--inter.broker.listener.name="+interBroker, "--ssl.client.auth=required",
				"--ssl.keystore.location="+keystore, "--ssl.truststore.location="+truststore,
				"--sasl.inter.broker.username=admin", "--sasl.inter.broker.password=admin-secret")
			admin := n.saslClient(t, scram512("admin", "admin-secret"))
			testutil.Eventually(t, 30*time.Second, "both brokers", func() bool {
				resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 2*time.Second), admin)
				return err == nil && len(resp.Brokers) == 2
			})
			ctx := ctxFor(t, 60*time.Second)
			adm := kadm.NewClient(admin)
			if _, err := adm.CreateTopic(ctx, 2, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "replicated"); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			producer := n.saslClient(t, scram512("admin", "admin-secret"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			for p := range int32(2) { // one partition led by each broker
				if err := producer.ProduceSync(wctx, &kgo.Record{Topic: "replicated", Partition: p, Value: []byte("on both brokers")}).FirstErr(); err != nil {
					t.Fatalf("acks=all produce to partition %d with min.insync.replicas=2: %v\n%s", p, err, n.logs.String())
				}
			}
			want := `principal=User:admin client=127.0.0.1:`
			if interBroker == "MTLS" {
				want = `principal="User:CN=broker-1" client=127.0.0.1:`
			}
			if !strings.Contains(n.logs.String(), want) {
				t.Errorf("the followers' logins (%s) are not in the audit log", want)
			}
		})
	}
}

// kcat (librdkafka) over SASL_SSL with SCRAM-SHA-512 and over mTLS; a wrong password
// fails and reads nothing.
func TestKcatOverSASLSSLAndMutualTLS(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("no kcat on PATH (tests/deps.sh installs it)")
	}
	n := startSecureNode(t)
	ctx := ctxFor(t, 90*time.Second)
	n.addAlice(t, ctx, "kcat")
	ca := filepath.Join(n.dir, "ca.pem")
	kcat := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "kcat", args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	sasl := func(pass string) []string {
		return []string{"-b", n.secure, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + ca}
	}
	if out, err := kcat("one\ntwo\n", append(sasl("alice-secret"), "-P", "-t", "kcat")...); err != nil {
		t.Fatalf("kcat produce over SASL_SSL: %v\n%s", err, out)
	}
	if out, err := kcat("", append(sasl("alice-secret"), "-C", "-t", "kcat", "-o", "beginning", "-c", "2", "-e", "-q")...); err != nil || out != "one\ntwo\n" {
		t.Fatalf("kcat consume over SASL_SSL: %v\n%q", err, out)
	}
	if out, err := kcat("", append(sasl("wrong"), "-L", "-t", "kcat", "-m", "5")...); err == nil || strings.Contains(out, "one") || !strings.Contains(out, "Authentication failed") {
		t.Errorf("kcat with a wrong password: %v\n%s", err, out)
	}

	certFile, keyFile := n.aliceCertFiles(t)
	mtls := []string{"-b", n.mtls, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca,
		"-X", "ssl.certificate.location=" + certFile, "-X", "ssl.key.location=" + keyFile}
	if out, err := kcat("", append(mtls, "-C", "-t", "kcat", "-o", "beginning", "-c", "2", "-e", "-q")...); err != nil || out != "one\ntwo\n" {
		t.Fatalf("kcat consume over mTLS: %v\n%q", err, out)
	}
	noCert := []string{"-b", n.mtls, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca}
	if out, err := kcat("", append(noCert, "-L", "-t", "kcat", "-m", "5")...); err == nil || strings.Contains(out, "one") {
		t.Errorf("kcat without a client certificate: %v\n%s", err, out)
	}
}

// kafkaPythonScript produces one record and reads it back over SASL_SSL with
// SCRAM-SHA-512; kafka-python 2.0 uses SaslHandshake v0 and bare tokens.
const kafkaPythonScript = `
import sys
from kafka import KafkaProducer, KafkaConsumer
from kafka.errors import KafkaError
bootstrap, user, password, cafile, topic = sys.argv[1:6]
common = dict(bootstrap_servers=bootstrap, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
              sasl_plain_username=user, sasl_plain_password=password, ssl_cafile=cafile, api_version=(2, 4, 0))
try:
    p = KafkaProducer(max_block_ms=10000, **common)
    p.send(topic, b"from kafka-python").get(timeout=20)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **common)
    values = [m.value for m in c]
    c.close()
except KafkaError as e:
    print("FAILED", type(e).__name__, e)
    sys.exit(3)
print("OK", values)
`

// kafkaPythonMTLSScript reads the topic from the start over SSL with a client
// certificate (none when certfile is empty).
const kafkaPythonMTLSScript = `
import sys
from kafka import KafkaConsumer
from kafka.errors import KafkaError
bootstrap, cafile, certfile, keyfile, topic = sys.argv[1:6]
common = dict(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=cafile, api_version=(2, 4, 0))
if certfile:
    common.update(ssl_certfile=certfile, ssl_keyfile=keyfile)
try:
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **common)
    values = [m.value for m in c]
    c.close()
except KafkaError as e:
    print("FAILED", type(e).__name__, e)
    sys.exit(3)
print("OK", values)
`

// TestKafkaPythonOverSASLSSL also reads back over mTLS: kafka-python over both of the
// issue's secured listeners.
func TestKafkaPythonOverSASLSSL(t *testing.T) {
	const python = "/usr/bin/python3" // Debian's python3-kafka (tests/deps.sh)
	if err := exec.Command(python, "-c", "import kafka").Run(); err != nil {
		t.Skip("no kafka-python for /usr/bin/python3 (tests/deps.sh installs it)")
	}
	n := startSecureNode(t)
	ctx := ctxFor(t, 120*time.Second)
	n.addAlice(t, ctx, "py")
	run := func(pass string) (string, error) {
		out, err := exec.CommandContext(ctx, python, "-c", kafkaPythonScript, n.secure, "alice", pass, filepath.Join(n.dir, "ca.pem"), "py").CombinedOutput()
		return string(out), err
	}
	if out, err := run("alice-secret"); err != nil || !strings.Contains(out, "OK [b'from kafka-python']") {
		t.Fatalf("kafka-python over SASL_SSL: %v\n%s", err, out)
	}
	if out, err := run("wrong"); err == nil || strings.Contains(out, "OK") {
		t.Fatalf("kafka-python with a wrong password: %v\n%s", err, out)
	}

	certFile, keyFile := n.aliceCertFiles(t)
	mtls := func(certFile, keyFile string) (string, error) {
		out, err := exec.CommandContext(ctx, python, "-c", kafkaPythonMTLSScript, n.mtls, filepath.Join(n.dir, "ca.pem"), certFile, keyFile, "py").CombinedOutput()
		return string(out), err
	}
	if out, err := mtls(certFile, keyFile); err != nil || !strings.Contains(out, "OK [b'from kafka-python']") {
		t.Fatalf("kafka-python over mTLS: %v\n%s", err, out)
	}
	if out, err := mtls("", ""); err == nil || strings.Contains(out, "from kafka-python") {
		t.Fatalf("kafka-python without a client certificate: %v\n%s", err, out)
	}
}

// kafkajsScript produces one record and reads it back over SASL_SSL with SCRAM-SHA-512
// (or, with a certificate and key, over mTLS); it prints OK and the value, or FAILED
// and the error's name.
const kafkajsScript = `
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');
const [bootstrap, user, password, ca, cert, key] = process.argv.slice(1); // node -e: no script name
const ssl = { ca: [fs.readFileSync(ca)] };
if (cert) { ssl.cert = fs.readFileSync(cert); ssl.key = fs.readFileSync(key); }
const cfg = { clientId: 'shale-kafkajs', brokers: [bootstrap], ssl, logLevel: logLevel.NOTHING, retry: { retries: 1 } };
if (user) cfg.sasl = { mechanism: 'scram-sha-512', username: user, password };
(async () => {
  const kafka = new Kafka(cfg);
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: 'js', messages: [{ value: 'from kafkajs' }] });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'js-' + Date.now() });
  await consumer.connect();
  await consumer.subscribe({ topic: 'js', fromBeginning: true });
  const got = await new Promise((resolve) => {
    consumer.run({ eachMessage: async ({ message }) => resolve(message.value.toString()) });
  });
  await consumer.disconnect();
  console.log('OK ' + got);
  process.exit(0);
})().catch((e) => { console.log('FAILED ' + e.name + ': ' + e.message); process.exit(3); });
`

func TestKafkajsOverSASLSSLAndMutualTLS(t *testing.T) {
	nodeModules, _ := filepath.Abs("../../tests/interop/node/node_modules")
	if p := os.Getenv("SHALE_NODE_MODULES"); p != "" {
		nodeModules = p
	}
	if _, err := os.Stat(filepath.Join(nodeModules, "kafkajs", "package.json")); err != nil {
		t.Skip("kafkajs is not installed in tests/interop/node (tests/deps.sh installs it)")
	}
	n := startSecureNode(t)
	ctx := ctxFor(t, 120*time.Second)
	n.addAlice(t, ctx, "js")
	ca := filepath.Join(n.dir, "ca.pem")
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "node", append([]string{"-e", kafkajsScript, "--"}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(n.secure, "alice", "alice-secret", ca); err != nil || !strings.Contains(out, "OK from kafkajs") {
		t.Fatalf("kafkajs over SASL_SSL: %v\n%s", err, out)
	}
	if out, err := run(n.secure, "alice", "wrong", ca); err == nil || !strings.Contains(out, "SASL") {
		t.Fatalf("kafkajs with a wrong password: %v\n%s", err, out)
	}
	certFile, keyFile := n.aliceCertFiles(t)
	if out, err := run(n.mtls, "", "", ca, certFile, keyFile); err != nil || !strings.Contains(out, "OK from kafkajs") {
		t.Fatalf("kafkajs over mTLS: %v\n%s", err, out)
	}
}
