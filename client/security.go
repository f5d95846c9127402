package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security says how to connect to secured listeners, in the terms of Kafka's client
// properties (kafka-topics.sh --command-config).
type Security struct {
	// Protocol is security.protocol: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL.
	Protocol string
	// Mechanism is sasl.mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default).
	Mechanism string
	// Username and Password are the SASL login (from sasl.jaas.config, or librdkafka's
	// sasl.username and sasl.password).
	Username, Password string
	// Truststore is ssl.truststore.location: PEM CA certificates (default: the system's).
	Truststore string
	// Keystore is ssl.keystore.location: this client's PEM certificate chain and key,
	// for listeners that require client certificates.
	Keystore string
	// SkipHostnameCheck is ssl.endpoint.identification.algorithm set empty.
	SkipHostnameCheck bool
}

// LoadSecurity reads the security settings of a Kafka client properties file.
func LoadSecurity(path string) (Security, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Security{}, fmt.Errorf("client config: %w", err)
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return SecurityFrom(props), nil
}

// SecurityFrom reads the security settings of Kafka client properties (a properties
// file's, or a cluster link's configs).
func SecurityFrom(props map[string]string) Security {
	s := Security{}
	for k, v := range props {
		switch k {
		case "security.protocol":
			s.Protocol = strings.ToUpper(v)
		case "sasl.mechanism", "sasl.mechanisms":
			s.Mechanism = strings.ToUpper(v)
		case "sasl.jaas.config":
			if m := jaasOption("username").FindStringSubmatch(v); m != nil && props["sasl.username"] == "" {
				s.Username = m[1]
			}
			if m := jaasOption("password").FindStringSubmatch(v); m != nil && props["sasl.password"] == "" {
				s.Password = m[1]
			}
		case "sasl.username":
			s.Username = v
		case "sasl.password":
			s.Password = v
		case "ssl.truststore.location", "ssl.ca.location":
			s.Truststore = v
		case "ssl.keystore.location":
			s.Keystore = v
		case "ssl.endpoint.identification.algorithm":
			s.SkipHostnameCheck = v == ""
		}
	}
	return s
}

func jaasOption(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|\s)` + name + `\s*=\s*"((?:[^"\\]|\\.)*)"`)
}

// KgoOpts turns the settings into franz-go options.
func (s Security) KgoOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch s.Protocol {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer((&tlsDialer{cfg: cfg}).dial))
	default:
		return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", s.Protocol)
	}
	if s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL" {
		var m sasl.Mechanism
		switch s.Mechanism {
		case "PLAIN":
			m = plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
		case "", "SCRAM-SHA-512":
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
		default:
			return nil, fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.SkipHostnameCheck}
	if s.Truststore != "" {
		data, err := os.ReadFile(s.Truststore)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("ssl.truststore.location %s: no PEM certificates", s.Truststore)
		}
		cfg.RootCAs = pool
	}
	if s.SkipHostnameCheck {
		// Chain still verified, only the name is not: what Kafka's empty
		// ssl.endpoint.identification.algorithm means.
		roots := cfg.RootCAs
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, 0, len(raw))
			for _, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				certs = append(certs, c)
			}
			if len(certs) == 0 {
				return fmt.Errorf("server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	if s.Keystore != "" {
		data, err := os.ReadFile(s.Keystore)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		var certs, keys []byte
		for rest := data; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type == "CERTIFICATE" {
				certs = append(certs, pem.EncodeToMemory(b)...)
			} else if strings.HasSuffix(b.Type, "PRIVATE KEY") {
				keys = append(keys, pem.EncodeToMemory(b)...)
			}
		}
		cert, err := tls.X509KeyPair(certs, keys)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location %s: %w", s.Keystore, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

type tlsDialer struct{ cfg *tls.Config }

func (d *tlsDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	cfg := d.cfg.Clone()
	if h, _, err := net.SplitHostPort(host); err == nil {
		cfg.ServerName = h
	}
	return (&tls.Dialer{Config: cfg}).DialContext(ctx, network, host)
}
