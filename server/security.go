package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/security"
	"github.com/shalelog/shale/security/httpauth"
	"github.com/shalelog/shale/server/config"
)

// nodeSecurity is what a node's listeners and its clients of other nodes need to
// authenticate: the TLS material (one keystore and truststore for every listener, as
// Kafka's unprefixed ssl.* settings), principal mapping rules and the PLAIN users.
type nodeSecurity struct {
	cfg    *config.Config
	tls    *security.TLSReloader // nil when nothing uses TLS
	rules  *security.PrincipalMapper
	plain  *security.PlainUsers
	reauth time.Duration
}

func newNodeSecurity(cfg *config.Config, lg *slog.Logger) (*nodeSecurity, error) {
	ns := &nodeSecurity{cfg: cfg, reauth: time.Duration(cfg.ConnectionsMaxReauthMs) * time.Millisecond}
	var err error
	if ns.rules, err = security.ParsePrincipalRules(cfg.SSLPrincipalMappingRules); err != nil {
		return nil, err
	}
	if cfg.UsesTLS() {
		ns.tls, err = security.NewTLSReloader(security.TLSFiles{
			Keystore:       cfg.SSLKeystoreLocation,
			Truststore:     cfg.SSLTruststoreLocation,
			ClientAuth:     cfg.SSLClientAuth,
			VerifyHostname: cfg.SSLEndpointIdentificationAlgorithm == "https",
		}, lg)
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
	}
	if cfg.SASLPlainUsersFile != "" {
		if ns.plain, err = security.NewPlainUsers(cfg.SASLPlainUsersFile, lg); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

func isTLS(proto string) bool {
	return proto == protocol.ProtocolSSL || proto == protocol.ProtocolSASLSSL
}
func isSASL(proto string) bool {
	return proto == protocol.ProtocolSASLPlaintext || proto == protocol.ProtocolSASLSSL
}

// auth is the protocol server's authentication configuration.
func (ns *nodeSecurity) auth() protocol.AuthConfig {
	return protocol.AuthConfig{
		SASLMechanisms:      ns.cfg.SASLEnabledMechanisms,
		PlainUsers:          ns.plain,
		Principals:          ns.rules,
		MaxReauth:           ns.reauth,
		InterBrokerUser:     ns.cfg.SASLInterBrokerUsername,
		InterBrokerPassword: ns.cfg.SASLInterBrokerPassword,
	}
}

// listener describes the named Kafka listener to the protocol server.
func (ns *nodeSecurity) listener(name string) protocol.Listener {
	l := protocol.Listener{Name: name, SecurityProtocol: ns.cfg.SecurityProtocol(name)}
	if isTLS(l.SecurityProtocol) && ns.tls != nil {
		l.TLS = ns.tls.ServerConfig(l.SecurityProtocol == protocol.ProtocolSSL)
	}
	return l
}

// fetcherOpts make replica fetchers connect as the inter-broker listener asks.
func (ns *nodeSecurity) fetcherOpts() []kgo.Opt {
	proto := ns.cfg.SecurityProtocol(ns.cfg.InterBrokerListenerName)
	var opts []kgo.Opt
	if isTLS(proto) && ns.tls != nil {
		opts = append(opts, kgo.Dialer(ns.tlsDial))
	}
	if isSASL(proto) {
		opts = append(opts, kgo.SASL(ns.interBrokerMechanism()))
	}
	return opts
}

// tlsDial dials a peer broker with this node's certificate, verifying the peer's
// certificate names the host dialed when ssl.endpoint.identification.algorithm=https.
func (ns *nodeSecurity) tlsDial(ctx context.Context, network, host string) (net.Conn, error) {
	cfg := ns.tls.ClientConfig()
	if h, _, err := net.SplitHostPort(host); err == nil {
		cfg.ServerName = h
	}
	d := &tls.Dialer{Config: cfg}
	return d.DialContext(ctx, network, host)
}

func (ns *nodeSecurity) interBrokerMechanism() sasl.Mechanism {
	user, pass := ns.cfg.SASLInterBrokerUsername, ns.cfg.SASLInterBrokerPassword
	switch ns.cfg.SASLMechanismInterBrokerProtocol {
	case security.MechanismPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case security.MechanismScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
}

// controllerClientTLS secures the broker's gRPC connections to the controllers when the
// controller listener is mapped to SSL.
func (ns *nodeSecurity) controllerClientTLS() *tls.Config {
	if ns.tls == nil || len(ns.cfg.ControllerListenerNames) == 0 || ns.cfg.SecurityProtocol(ns.cfg.ControllerListenerNames[0]) != protocol.ProtocolSSL {
		return nil
	}
	c := ns.tls.ClientConfig()
	c.NextProtos = []string{"h2"}
	return c
}

// controllerServerTLS serves the controller's gRPC over TLS when the controller
// listener is mapped to SSL; ssl.client.auth applies to it as to any SSL listener.
func (ns *nodeSecurity) controllerServerTLS() *tls.Config {
	if ns.tls == nil || len(ns.cfg.ControllerListenerNames) == 0 || ns.cfg.SecurityProtocol(ns.cfg.ControllerListenerNames[0]) != protocol.ProtocolSSL {
		return nil
	}
	return ns.tls.ServerConfig(true, "h2")
}

// otherEndpoints are the advertised broker listeners other than the inter-broker one.
func otherEndpoints(cfg *config.Config) []metadata.Endpoint {
	var out []metadata.Endpoint
	for _, l := range cfg.AdvertisedListeners {
		if l.Name == cfg.InterBrokerListenerName {
			continue
		}
		if _, ok := findBrokerListener(cfg, l.Name); !ok {
			continue
		}
		out = append(out, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: cfg.SecurityProtocol(l.Name)})
	}
	return out
}

func findBrokerListener(cfg *config.Config, name string) (config.Listener, bool) {
	for _, l := range cfg.BrokerListeners() {
		if l.Name == name {
			return l, true
		}
	}
	return config.Listener{}, false
}

// httpAuthenticator authenticates one of the broker's HTTP APIs with this node's users:
// the PLAIN users file, the SCRAM credentials in scram, the inter-broker login, and
// client certificates through ssl.principal.mapping.rules.
func (ns *nodeSecurity) httpAuthenticator(api string, hs config.HTTPSecurity, scram metadata.ScramStore, contentType string, lg *slog.Logger) (*httpauth.Authenticator, error) {
	return httpauth.New(httpauth.Options{
		API: api, Method: hs.AuthenticationMethod, Realm: hs.AuthenticationRealm,
		Principals: ns.rules, PlainUsers: ns.plain, Scram: scram,
		InterBrokerUser: ns.cfg.SASLInterBrokerUsername, InterBrokerPassword: ns.cfg.SASLInterBrokerPassword,
		ContentType: contentType, Log: lg,
	})
}

// httpListener wraps an HTTP API's listener in TLS when hs asks for HTTPS.
func (ns *nodeSecurity) httpListener(ln net.Listener, hs config.HTTPSecurity) (net.Listener, error) {
	if !hs.SSLEnable {
		return ln, nil
	}
	c, err := httpauth.ServerTLS(ns.tls, hs.SSLClientAuth)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, c), nil
}
