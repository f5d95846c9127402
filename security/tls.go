package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSFiles names the PEM files of Kafka's ssl.keystore.type=PEM and
// ssl.truststore.type=PEM.
type TLSFiles struct {
	// Keystore is ssl.keystore.location: this node's certificate chain and its private
	// key (unencrypted PKCS#8, PKCS#1 or SEC 1) in one PEM file.
	Keystore string
	// Truststore is ssl.truststore.location: the CA certificates that client (and, for
	// the inter-broker client, server) certificates must chain to. Empty: the system's.
	Truststore string
	// ClientAuth is ssl.client.auth: required, requested or none.
	ClientAuth string
	// VerifyHostname is ssl.endpoint.identification.algorithm=https: the inter-broker
	// client checks the leader's certificate names its host.
	VerifyHostname bool
}

// TLSReloader serves TLS configurations built from PEM files and re-reads the files when
// their modification time or size changes, checked at most once per CheckInterval on a
// new handshake: certificates can be rotated (cert-manager, a Kubernetes secret's
// symlink swap) without a restart, and without a watcher goroutine to leak or miss a
// rename. A file that fails to load leaves the previous material in use.
type TLSReloader struct {
	files TLSFiles
	lg    *slog.Logger
	// CheckInterval bounds how often the files are stat'ed (default one second).
	CheckInterval time.Duration

	mu        sync.Mutex
	lastCheck time.Time
	stamps    [2]fileStamp
	cert      *tls.Certificate
	pool      *x509.CertPool // nil: the system's
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewTLSReloader loads the files once; an error here fails the start.
func NewTLSReloader(files TLSFiles, lg *slog.Logger) (*TLSReloader, error) {
	if lg == nil {
		lg = slog.Default()
	}
	switch files.ClientAuth {
	case "", "none", "requested", "required":
	default:
		return nil, fmt.Errorf("ssl.client.auth=%q: want required, requested or none", files.ClientAuth)
	}
	r := &TLSReloader{files: files, lg: lg, CheckInterval: time.Second}
	stamps := r.stat()
	if err := r.load(stamps); err != nil {
		return nil, err
	}
	if r.pool == nil && (files.ClientAuth == "required" || files.ClientAuth == "requested") {
		return nil, errors.New("ssl.client.auth asks for client certificates but ssl.truststore.location is not set")
	}
	r.lastCheck = time.Now()
	return r, nil
}

func (r *TLSReloader) stat() [2]fileStamp {
	var out [2]fileStamp
	for i, p := range []string{r.files.Keystore, r.files.Truststore} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
		}
	}
	return out
}

// load reads both files and swaps them in together; callers hold r.mu (or own r).
func (r *TLSReloader) load(stamps [2]fileStamp) error {
	var cert *tls.Certificate
	if r.files.Keystore != "" {
		c, err := LoadKeystore(r.files.Keystore)
		if err != nil {
			return err
		}
		cert = c
	}
	var pool *x509.CertPool
	if r.files.Truststore != "" {
		p, err := LoadTruststore(r.files.Truststore)
		if err != nil {
			return err
		}
		pool = p
	}
	r.cert, r.pool, r.stamps = cert, pool, stamps
	return nil
}

// current returns the material in use, reloading it first when the files changed.
func (r *TLSReloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.lastCheck) >= r.CheckInterval {
		r.lastCheck = now
		if stamps := r.stat(); stamps != r.stamps {
			if err := r.load(stamps); err != nil {
				// Keep serving with what worked; the next change is tried again.
				r.stamps = stamps
				r.lg.Error("TLS files changed but do not load; keeping the previous certificates", "err", err)
			} else {
				r.lg.Info("TLS certificates reloaded", "keystore", r.files.Keystore, "truststore", r.files.Truststore)
			}
		}
	}
	return r.cert, r.pool
}

// ServerConfig is the listeners' TLS configuration; each handshake gets the current files.
// withClientAuth false never asks for a client certificate: as in Kafka, ssl.client.auth
// applies to SSL listeners, not to SASL_SSL ones, whose clients authenticate with SASL.
// nextProtos are offered in ALPN (h2 for gRPC, which requires it).
func (r *TLSReloader) ServerConfig(withClientAuth bool, nextProtos ...string) *tls.Config {
	clientAuth := "none"
	if withClientAuth {
		clientAuth = r.files.ClientAuth
	}
	return r.ServerConfigClientAuth(clientAuth, nextProtos...)
}

// ServerConfigClientAuth is ServerConfig with clientAuth (required, requested or none)
// in place of ssl.client.auth: the HTTP APIs have a setting of their own.
func (r *TLSReloader) ServerConfigClientAuth(clientAuth string, nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			if cert == nil {
				return nil, errors.New("no server certificate: ssl.keystore.location is not set")
			}
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, ClientCAs: pool, NextProtos: nextProtos}
			switch clientAuth {
			case "required":
				c.ClientAuth = tls.RequireAndVerifyClientCert
			case "requested":
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}
}

// ClientConfig is the inter-broker (and broker-to-controller) client side: it presents
// this node's certificate and verifies the server's against the current truststore.
// Verification is done in VerifyConnection, rather than by crypto/tls from a fixed
// RootCAs, so that a rotated truststore applies to new connections too.
func (r *TLSReloader) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified below, in full, against the current pool.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := r.current()
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server sent no certificate")
			}
			_, pool := r.current()
			opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
			if r.files.VerifyHostname {
				opts.DNSName = cs.ServerName
			}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		},
	}
}

// LoadKeystore reads a PEM keystore: a certificate chain and its private key in one file
// (Kafka's ssl.keystore.type=PEM layout).
func LoadKeystore(path string) (*tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location: %w", err)
	}
	var certs, keys []byte
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(b)...)
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			keys = append(keys, pem.EncodeToMemory(b)...)
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("ssl.keystore.location %s: encrypted private keys (ssl.key.password) are not supported; store the key unencrypted with file permissions 0600", path)
		}
	}
	if len(certs) == 0 || len(keys) == 0 {
		return nil, fmt.Errorf("ssl.keystore.location %s: want a PEM certificate chain and a private key in the file", path)
	}
	cert, err := tls.X509KeyPair(certs, keys)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location %s: %w", path, err)
	}
	return &cert, nil
}

// LoadTruststore reads PEM CA certificates.
func LoadTruststore(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssl.truststore.location: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("ssl.truststore.location %s: no PEM certificates in it", path)
	}
	return pool, nil
}
