package security_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shalelog/shale/security"
	"github.com/shalelog/shale/security/securitytest"
)

// handshake dials a TLS server built from r and returns the certificate it presented.
func handshake(t *testing.T, r *security.TLSReloader, client *tls.Config) (string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, r.ServerConfig(true))
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		done <- tc.Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	serverErr := <-done
	if err != nil {
		return "", err
	}
	defer c.Close()
	if serverErr != nil {
		return "", serverErr
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// A rotated keystore serves the next handshake; a broken one leaves the old in use.
func TestTLSReloaderRotates(t *testing.T) {
	dir := t.TempDir()
	ca := securitytest.NewCA(t, "ca")
	ks := ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "first"}, Hosts: []string{"127.0.0.1"}}).WriteKeystore(t, dir, "ks.pem")
	ts := securitytest.WriteTruststore(t, dir, "ts.pem", ca)
	r, err := security.NewTLSReloader(security.TLSFiles{Keystore: ks, Truststore: ts, ClientAuth: "requested"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.CheckInterval = 0
	client := &tls.Config{RootCAs: securitytest.Pool(ca), ServerName: "127.0.0.1"}
	if cn, err := handshake(t, r, client); err != nil || cn != "first" {
		t.Fatalf("first handshake: %q, %v", cn, err)
	}
	ca.Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "second-and-longer"}, Hosts: []string{"127.0.0.1"}}).WriteKeystore(t, dir, "ks.pem")
	if cn, err := handshake(t, r, client); err != nil || cn != "second-and-longer" {
		t.Fatalf("after rotation: %q, %v", cn, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ks.pem"), []byte("not a certificate, and of another size"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cn, err := handshake(t, r, client); err != nil || cn != "second-and-longer" {
		t.Fatalf("after a broken rotation: %q, %v", cn, err)
	}
	// A client certificate from another CA is refused even when only requested.
	rogue := securitytest.NewCA(t, "rogue").Issue(t, securitytest.Options{Subject: pkix.Name{CommonName: "x"}})
	bad := client.Clone()
	rogueCert := rogue.TLS(t)
	// Sent whatever CAs the server names (crypto/tls would otherwise send none).
	bad.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rogueCert, nil }
	if _, err := handshake(t, r, bad); err == nil {
		t.Fatal("untrusted client certificate accepted")
	}
}
