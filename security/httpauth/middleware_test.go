package httpauth

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security"
	"github.com/shalelog/shale/security/securitytest"
)

// fakeScram is a credential store holding what AlterUserScramCredentials would store.
type fakeScram struct {
	mu    sync.Mutex
	creds []metadata.ScramCredential
	err   error
	reads int
}

func (f *fakeScram) AlterScramCredentials(context.Context, []metadata.ScramCredential, []metadata.ScramCredentialKey) ([]error, []error, error) {
	return nil, nil, errors.New("not used")
}

func (f *fakeScram) ScramCredentials(_ context.Context, users []string) ([]metadata.ScramCredential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	var out []metadata.ScramCredential
	for _, c := range f.creds {
		for _, u := range users {
			if c.User == u {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// set stores user's password for mechanism, replacing what was there.
func (f *fakeScram) set(t *testing.T, user, mech, pass string) {
	t.Helper()
	salt, salted, err := security.SaltPassword(mech, pass, nil, security.MinScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.creds {
		if c.User == user && c.Mechanism == mech {
			f.creds = append(f.creds[:i], f.creds[i+1:]...)
			break
		}
	}
	f.creds = append(f.creds, security.ScramFromSalted(user, mech, salt, salted, security.MinScramIterations))
}

// echo answers with the principal the middleware found.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, Principal(r.Context())) })

type answer struct {
	status int
	body   string
	header http.Header
}

func get(t *testing.T, cl *http.Client, url, user, pass string) answer {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}

func newAuth(t *testing.T, o Options) *Authenticator {
	t.Helper()
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestBasicAuthentication(t *testing.T) {
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users")
	os.WriteFile(usersFile, []byte("carol=carol-secret\n"), 0o600)
	plain, err := security.NewPlainUsers(usersFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	scram := &fakeScram{}
	scram.set(t, "alice", security.MechanismScramSHA256, "alice-secret")
	scram.set(t, "bob", security.MechanismScramSHA512, "bob-secret")
	a := newAuth(t, Options{API: "test", Method: "basic", Realm: "SchemaRegistry", PlainUsers: plain, Scram: scram,
		InterBrokerUser: "admin", InterBrokerPassword: "admin-secret", ContentType: "application/vnd.schemaregistry.v1+json"})
	srv := httptest.NewServer(a.Wrap(echo))
	defer srv.Close()
	cl := srv.Client()

	for _, c := range []struct{ user, pass, want string }{
		{"alice", "alice-secret", "User:alice"}, // SCRAM-SHA-256
		{"bob", "bob-secret", "User:bob"},       // SCRAM-SHA-512
		{"carol", "carol-secret", "User:carol"}, // PLAIN users file
		{"admin", "admin-secret", "User:admin"}, // inter-broker login
		{"alice", "alice-secret", "User:alice"}, // again, from the cache of derived keys
	} {
		if got := get(t, cl, srv.URL, c.user, c.pass); got.status != 200 || got.body != c.want {
			t.Errorf("%s: %d %q, want 200 %q", c.user, got.status, got.body, c.want)
		}
	}

	refused := func(what, user, pass string) {
		t.Helper()
		got := get(t, cl, srv.URL, user, pass)
		if got.status != 401 {
			t.Fatalf("%s: status %d (%s), want 401", what, got.status, got.body)
		}
		if h := got.header.Get("WWW-Authenticate"); h != `Basic realm="SchemaRegistry"` {
			t.Errorf("%s: WWW-Authenticate %q", what, h)
		}
		if ct := got.header.Get("Content-Type"); ct != "application/vnd.schemaregistry.v1+json" {
			t.Errorf("%s: content type %q", what, ct)
		}
		var body struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(got.body), &body); err != nil || body.Code != 401 || body.Message != "Unauthorized" {
			t.Errorf("%s: body %s", what, got.body)
		}
	}
	refused("no credentials", "", "")
	refused("wrong SCRAM password", "alice", "bob-secret")
	refused("wrong SCRAM-SHA-512 password", "bob", "alice-secret")
	refused("wrong PLAIN password", "carol", "x")
	refused("wrong inter-broker password", "admin", "x")
	refused("unknown user", "dave", "dave-secret")

	// A changed password applies to the next request: the old one no longer derives
	// the stored key, cached or not.
	scram.set(t, "alice", security.MechanismScramSHA256, "new-secret")
	refused("old password after a change", "alice", "alice-secret")
	if got := get(t, cl, srv.URL, "alice", "new-secret"); got.status != 200 {
		t.Errorf("new password: %d %s", got.status, got.body)
	}

	// Credentials that cannot be read are not a wrong password.
	scram.mu.Lock()
	scram.err = errors.New("no controller")
	scram.mu.Unlock()
	if got := get(t, cl, srv.URL, "bob", "bob-secret"); got.status != 503 {
		t.Errorf("store down: %d %s, want 503", got.status, got.body)
	}
}

// With NONE, a request without a certificate is Anonymous, whatever it sends.
func TestNoAuthentication(t *testing.T) {
	a := newAuth(t, Options{Method: "NONE"})
	srv := httptest.NewServer(a.Wrap(echo))
	defer srv.Close()
	if got := get(t, srv.Client(), srv.URL, "alice", "whatever"); got.status != 200 || got.body != Anonymous {
		t.Errorf("got %d %q", got.status, got.body)
	}
	if _, err := New(Options{Method: "DIGEST"}); err == nil {
		t.Error("DIGEST accepted")
	}
}

// mTLS: the principal is the certificate's through the mapping rules; ServerTLS takes
// the node's files and the API's own client-auth setting.
func TestCertificatePrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := securitytest.NewCA(t, "ca")
	server := ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "broker"}, Hosts: []string{"127.0.0.1"}})
	files, err := security.NewTLSReloader(security.TLSFiles{
		Keystore:   server.WriteKeystore(t, dir, "server.pem"),
		Truststore: securitytest.WriteTruststore(t, dir, "ca.pem", ca),
		ClientAuth: "none", // the node's ssl.client.auth; the API's setting wins
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := security.ParsePrincipalRules(`RULE:^CN=([^,]*),.*$/$1/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := ServerTLS(files, "required")
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Options{Method: "NONE", Principals: rules})
	srv := httptest.NewUnstartedServer(a.Wrap(echo))
	srv.Listener = tls.NewListener(srv.Listener, tlsCfg)
	srv.Start()
	defer srv.Close()

	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: securitytest.Pool(ca), Certificates: certs}}}
	}
	alice := ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}}})
	url := "https://" + srv.Listener.Addr().(*net.TCPAddr).String()
	if got := get(t, client(alice.TLS(t)), url, "", ""); got.status != 200 || got.body != "User:alice" {
		t.Errorf("alice's certificate: %d %q", got.status, got.body)
	}
	// required: no certificate, no handshake.
	req, _ := http.NewRequest("GET", url, nil)
	if resp, err := client().Do(req); err == nil {
		resp.Body.Close()
		t.Error("a client without a certificate was served")
	}
	// A certificate of another CA fails the handshake too.
	other := securitytest.NewCA(t, "other").Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "mallory"}})
	if resp, err := client(other.TLS(t)).Do(req); err == nil {
		resp.Body.Close()
		t.Error("a certificate of an unknown CA was accepted")
	}

	// With BASIC, the certificate still gets through TLS, but the principal is the
	// basic user's, and basic credentials are required.
	scram := &fakeScram{}
	scram.set(t, "bob", security.MechanismScramSHA512, "bob-secret")
	b := newAuth(t, Options{Method: "BASIC", Principals: rules, Scram: scram, Realm: "r"})
	srv2 := httptest.NewUnstartedServer(b.Wrap(echo))
	srv2.Listener = tls.NewListener(srv2.Listener, tlsCfg)
	srv2.Start()
	defer srv2.Close()
	url2 := "https://" + srv2.Listener.Addr().(*net.TCPAddr).String()
	if got := get(t, client(alice.TLS(t)), url2, "", ""); got.status != 401 {
		t.Errorf("certificate without basic credentials under BASIC: %d %q", got.status, got.body)
	}
	if got := get(t, client(alice.TLS(t)), url2, "bob", "bob-secret"); got.status != 200 || got.body != "User:bob" {
		t.Errorf("basic over mTLS: %d %q", got.status, got.body)
	}

	if _, err := ServerTLS(files, "sometimes"); err == nil {
		t.Error("client auth \"sometimes\" accepted")
	}
}

// PBKDF2 runs once per password and credential, not per request.
func TestScramDerivationIsCached(t *testing.T) {
	scram := &fakeScram{}
	scram.set(t, "alice", security.MechanismScramSHA512, "alice-secret")
	a := newAuth(t, Options{Method: "BASIC", Scram: scram})
	c := scram.creds[0]
	if !a.scramMatches(c, "alice-secret") {
		t.Fatal("right password refused")
	}
	if !a.verified.has(a.verified.key(c, "alice-secret")) {
		t.Error("a match is not remembered")
	}
	if a.scramMatches(c, "wrong") || a.verified.has(a.verified.key(c, "wrong")) {
		t.Error("a wrong password matched or was remembered")
	}
	c2 := c
	c2.StoredKey = append([]byte{}, c.StoredKey...)
	c2.StoredKey[0] ^= 1
	if a.scramMatches(c2, "alice-secret") {
		t.Error("the cache answered for a different stored key")
	}
}
