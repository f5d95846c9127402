package protocol_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/security"
)

// saslBroker starts a broker with a SASL_PLAINTEXT listener named SASL beside the
// PLAINTEXT one, PLAIN users alice and bob, and the given session lifetime.
func saslBroker(t *testing.T, reauth time.Duration) (addr string, logs *testutil.Buffer) {
	t.Helper()
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("alice=alice-secret\nbob=bob-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pu, err := security.NewPlainUsers(users, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs = &testutil.Buffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	t.Cleanup(func() { <-served }) // runs after the broker's own cleanup closed the listener
	tb := startBrokerIn(t, dir, func(c *protocol.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Auth = protocol.AuthConfig{SASLMechanisms: []string{"PLAIN"}, PlainUsers: pu, MaxReauth: reauth}
	})
	go func() {
		defer close(served)
		tb.srv.ServeListener(context.Background(), ln, protocol.Listener{Name: "SASL", SecurityProtocol: protocol.ProtocolSASLPlaintext})
	}()
	return ln.Addr().String(), logs
}

func (rc *rawConn) plainLogin(user, pass string) *kmsg.SASLAuthenticateResponse {
	rc.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if resp := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		rc.t.Fatalf("SaslHandshake: error %d", resp.ErrorCode)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+pass)
	return rc.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
}

func metadataV1() *kmsg.MetadataRequest {
	m := kmsg.NewPtrMetadataRequest()
	m.Version = 1
	return m
}

// Before authentication a SASL listener answers ApiVersions only, and refuses a large
// request before reading it.
func TestSASLListenerBeforeAuthentication(t *testing.T) {
	addr, logs := saslBroker(t, 0)
	rc := dialRaw(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	if resp := rc.roundTrip(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: error %d", resp.ErrorCode)
	}
	rc.send(metadataV1())
	rc.expectClosed()
	if !strings.Contains(logs.String(), "request before SASL authentication") {
		t.Errorf("not logged:\n%s", logs.String())
	}

	big := dialRaw(t, addr)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], 1<<20)
	if _, err := big.c.Write(size[:]); err != nil {
		t.Fatal(err)
	}
	big.expectClosed()

	// An unknown mechanism is refused with the list of those served.
	um := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	resp := um.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 1 || resp.SupportedMechanisms[0] != "PLAIN" {
		t.Fatalf("GSSAPI handshake: %+v", resp)
	}
	um.expectClosed()

	// A wrong password fails and closes; a right one lets requests through.
	bad := dialRaw(t, addr)
	if r := bad.plainLogin("alice", "nope"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: error %d", r.ErrorCode)
	}
	bad.expectClosed()
	good := dialRaw(t, addr)
	if r := good.plainLogin("alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
		t.Fatalf("login: %+v", r)
	}
	// The broker registered no listener named SASL, so, as in Kafka, it lists no broker
	// to a client on that listener; the answer itself is what matters here.
	if resp := good.roundTrip(metadataV1()).(*kmsg.MetadataResponse); resp.ControllerID != 1 || len(resp.Brokers) != 0 {
		t.Fatalf("Metadata after login: controller %d, brokers %+v", resp.ControllerID, resp.Brokers)
	}
}

// KIP-368: the session lifetime is announced; a client that re-authenticates in time
// (as the same principal) goes on, one that does not is disconnected at its next request,
// and a re-authentication as someone else fails.
func TestSASLReauthentication(t *testing.T) {
	const lifetime = 500 * time.Millisecond
	addr, logs := saslBroker(t, lifetime)
	rc := dialRaw(t, addr)
	if r := rc.plainLogin("alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("login: %+v", r)
	}
	rc.roundTrip(metadataV1())
	time.Sleep(lifetime + 100*time.Millisecond)
	if r := rc.plainLogin("alice", "alice-secret"); r.ErrorCode != 0 {
		t.Fatalf("re-authentication: %+v", r)
	}
	rc.roundTrip(metadataV1())
	time.Sleep(lifetime + 100*time.Millisecond)
	rc.send(metadataV1())
	rc.expectClosed()
	if !strings.Contains(logs.String(), "SASL session expired") {
		t.Errorf("expiry not logged:\n%s", logs.String())
	}

	other := dialRaw(t, addr)
	other.plainLogin("alice", "alice-secret")
	if r := other.plainLogin("bob", "bob-secret"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as bob: %+v", r)
	}
	other.expectClosed()

	// franz-go re-authenticates by itself when told the lifetime.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	before := strings.Count(logs.String(), "authentication succeeded")
	for range 3 {
		if _, err := metadataV1().RequestWith(ctxTimeout(t, 10*time.Second), cl); err != nil {
			t.Fatalf("franz-go across session lifetimes: %v", err)
		}
		time.Sleep(lifetime + 100*time.Millisecond)
	}
	if n := strings.Count(logs.String(), "authentication succeeded") - before; n < 2 {
		t.Errorf("franz-go authenticated %d times over three lifetimes", n)
	}
}
