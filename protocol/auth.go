package protocol

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security"
)

// Kafka's security protocols.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Listener describes one Kafka listener a server accepts connections on.
type Listener struct {
	// Name is the listener name; Metadata, FindCoordinator and DescribeCluster answer a
	// client with the brokers' advertised addresses of the listener it arrived on. ""
	// answers with the inter-broker addresses.
	Name string
	// SecurityProtocol is PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string
	// TLS serves SSL and SASL_SSL listeners.
	TLS *tls.Config
}

// The accessors take a nil listener (a conn built by hand in a test) as PLAINTEXT.

func (l *Listener) sasl() bool {
	return l != nil && (l.SecurityProtocol == ProtocolSASLPlaintext || l.SecurityProtocol == ProtocolSASLSSL)
}

func (l *Listener) name() string {
	if l == nil {
		return ""
	}
	return l.Name
}

func (l *Listener) protocol() string {
	if l == nil || l.SecurityProtocol == "" {
		return ProtocolPlaintext
	}
	return l.SecurityProtocol
}

// AuthConfig is how listeners authenticate clients.
type AuthConfig struct {
	// SASLMechanisms is sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
	SASLMechanisms []string
	// PlainUsers checks SASL/PLAIN passwords; nil refuses every PLAIN login.
	PlainUsers *security.PlainUsers
	// Principals maps client certificates to principals (ssl.principal.mapping.rules);
	// nil is DEFAULT.
	Principals *security.PrincipalMapper
	// MaxReauth is connections.max.reauth.ms: a SASL session's lifetime (KIP-368); 0
	// keeps sessions for the connection's life.
	MaxReauth time.Duration
	// HandshakeTimeout bounds a TLS handshake (default 10s).
	HandshakeTimeout time.Duration
	// InterBrokerUser and InterBrokerPassword are the login brokers use with each other
	// (sasl.inter.broker.username/password). Every broker knows them from its own
	// configuration and accepts them with any enabled mechanism without a stored
	// credential, so a new cluster's brokers can replicate before any user exists.
	InterBrokerUser, InterBrokerPassword string
	// interBrokerScram caches the inter-broker user's SCRAM credentials by mechanism.
	interBrokerScram map[string]metadata.ScramCredential
}

// maxPreAuthRequestBytes is Kafka's sasl.server.max.receive.size: before a SASL
// connection has authenticated, requests are tokens and version probes, so a large one
// is an attack on memory, refused before it is read.
const maxPreAuthRequestBytes = 512 << 10

// authState is a connection's authentication. Only the processor goroutine touches it,
// except authenticated, which the reader also reads.
type authState struct {
	authenticated atomic.Bool
	// mechanism is what the last SaslHandshake chose; "" before one.
	mechanism string
	// inProgress: a handshake was accepted and SaslAuthenticate is expected.
	inProgress bool
	scram      *security.ScramServer
	// expiry ends the session (connections.max.reauth.ms); zero for none.
	expiry time.Time
	// raw is set from an accepted SaslHandshake v0 until the exchange ends: the frames
	// in between are bare SASL tokens (kafka-python 2.0 speaks only this). The reader
	// reads it; the client sends the next token only after the previous answer, which
	// the processor writes after updating raw.
	raw atomic.Bool
}

// decodeOrRawSASL decodes a request, or wraps a bare SASL token as a SaslAuthenticate.
func (c *conn) decodeOrRawSASL(body []byte) (*Request, error) {
	if !c.auth.raw.Load() {
		return c.decode(body)
	}
	kreq := kmsg.NewPtrSASLAuthenticateRequest()
	kreq.SASLAuthBytes = body
	return &Request{Key: kmsg.SASLAuthenticate.Int16(), Kreq: kreq, Remote: c.nc.RemoteAddr(), Received: time.Now(),
		Listener: c.ln.name(), rawSASL: true}, nil
}

// writeRawSASL answers a bare token with a bare token: size, then bytes.
func writeRawSASL(bw *bufio.Writer, res Result) error {
	resp, _ := res.Resp.(*kmsg.SASLAuthenticateResponse)
	if resp == nil {
		return nil
	}
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(resp.SASLAuthBytes)))
	if _, err := bw.Write(size[:]); err != nil {
		return err
	}
	_, err := bw.Write(resp.SASLAuthBytes)
	return err
}

type connKey struct{}

func connFrom(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

// initAuth derives the inter-broker user's SCRAM credentials and keeps the metadata
// store's SCRAM credentials, when it keeps them, for the SASL exchanges.
func (s *Server) initAuth() {
	if a := &s.cfg.Auth; a.InterBrokerUser != "" {
		a.interBrokerScram = map[string]metadata.ScramCredential{}
		for _, mech := range []string{security.MechanismScramSHA256, security.MechanismScramSHA512} {
			salt, salted, err := security.SaltPassword(mech, a.InterBrokerPassword, nil, security.MinScramIterations)
			if err == nil {
				a.interBrokerScram[mech] = security.ScramFromSalted(a.InterBrokerUser, mech, salt, salted, security.MinScramIterations)
			}
		}
	}
	if st, ok := s.deps.Meta.(metadata.ScramStore); ok {
		s.scram = st
	}
}

// handshakeTLS runs the TLS handshake of an SSL or SASL_SSL connection and, for SSL,
// takes the principal from the client certificate. It reports whether the connection
// may go on.
func (c *conn) handshakeTLS(ctx context.Context) bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	timeout := c.s.cfg.Auth.HandshakeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.s.audit(false, AnonymousPrincipal, c, "SSL", fmt.Errorf("TLS handshake: %w", err))
		return false
	}
	certs := tc.ConnectionState().PeerCertificates
	if c.ln.protocol() != ProtocolSSL {
		return true // SASL_SSL: the principal comes from SASL
	}
	if len(certs) == 0 {
		return true // ssl.client.auth=none or requested: ANONYMOUS, as in Kafka
	}
	mapper := c.s.cfg.Auth.Principals
	if mapper == nil {
		mapper, _ = security.ParsePrincipalRules("")
	}
	p, err := mapper.CertificatePrincipal(certs[0])
	if err != nil {
		c.s.audit(false, AnonymousPrincipal, c, "SSL", err)
		return false
	}
	c.principal = p
	c.s.audit(true, p, c, "SSL", nil)
	return true
}

// gate applies the SASL state to a request before it is handled: on a SASL listener,
// only ApiVersions and the SASL APIs are allowed before authentication and after the
// session expired (Kafka closes the connection then, as here). The SASL handlers get
// the connection through the context.
func (c *conn) gate(ctx context.Context, req *Request) (context.Context, Result, bool) {
	switch kmsg.Key(req.Key) {
	case kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return context.WithValue(ctx, connKey{}, c), Result{}, false
	case kmsg.ApiVersions:
		return ctx, Result{}, false
	}
	if !c.ln.sasl() {
		return ctx, Result{}, false
	}
	if !c.auth.authenticated.Load() {
		c.lg.Info("closing connection: request before SASL authentication", "api", describeKey(req.Key), "listener", c.ln.name())
		return ctx, Result{NoResponse: true, CloseConn: true}, true
	}
	if !c.auth.expiry.IsZero() && time.Now().After(c.auth.expiry) {
		c.lg.Info("closing connection: SASL session expired without re-authentication (connections.max.reauth.ms)",
			"principal", c.principal, "api", describeKey(req.Key), "listener", c.ln.name())
		return ctx, Result{NoResponse: true, CloseConn: true}, true
	}
	return ctx, Result{}, false
}

func (s *Server) handleSaslHandshake(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = slices.Clone(s.cfg.Auth.SASLMechanisms)
	c := connFrom(ctx)
	switch {
	case c == nil || !c.ln.sasl():
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return Result{Resp: resp}
	case c.auth.inProgress:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return Result{Resp: resp, CloseConn: true}
	case !slices.Contains(s.cfg.Auth.SASLMechanisms, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.audit(false, AnonymousPrincipal, c, req.Mechanism, errors.New("mechanism not enabled (sasl.enabled.mechanisms)"))
		return Result{Resp: resp, CloseConn: true}
	case c.auth.authenticated.Load() && req.Mechanism != c.auth.mechanism:
		// KIP-368: re-authentication keeps the mechanism.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		s.audit(false, c.principal, c, req.Mechanism, fmt.Errorf("re-authentication changes the mechanism from %s", c.auth.mechanism))
		return Result{Resp: resp, CloseConn: true}
	}
	c.auth.mechanism, c.auth.inProgress, c.auth.scram = req.Mechanism, true, nil
	if r.Version == 0 {
		c.auth.raw.Store(true)
	}
	return Result{Resp: resp}
}

// authFailedMessage is what a client is told of any failed login, whatever the cause, as
// Kafka does: the audit log has the cause.
const authFailedMessage = "Authentication failed: invalid credentials with SASL mechanism "

func (s *Server) handleSaslAuthenticate(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := connFrom(ctx)
	if c == nil || !c.ln.sasl() || !c.auth.inProgress {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without an accepted SaslHandshake"
		resp.ErrorMessage = &msg
		return Result{Resp: resp, CloseConn: true}
	}
	mech := c.auth.mechanism
	fail := func(principal string, err error) Result {
		c.auth.inProgress, c.auth.scram = false, nil
		c.auth.raw.Store(false)
		s.audit(false, principal, c, mech, err)
		if r.rawSASL {
			// Without a header there is no way to carry an error: Kafka closes.
			return Result{NoResponse: true, CloseConn: true}
		}
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := authFailedMessage + mech
		resp.ErrorMessage = &msg
		resp.SASLAuthBytes = nil
		return Result{Resp: resp, CloseConn: true}
	}
	var user string
	switch mech {
	case security.MechanismPlain:
		u, err := s.checkPlain(req.SASLAuthBytes)
		if err != nil {
			return fail(userPrincipal(u), err)
		}
		user = u
	case security.MechanismScramSHA256, security.MechanismScramSHA512:
		if c.auth.scram == nil {
			conv, err := s.newScramConversation(ctx, mech)
			if err != nil {
				return fail(AnonymousPrincipal, err)
			}
			c.auth.scram = conv
			out, err := conv.Step(string(req.SASLAuthBytes))
			if err != nil {
				return fail(userPrincipal(conv.Username()), err)
			}
			resp.SASLAuthBytes = []byte(out)
			return Result{Resp: resp} // the client's final message comes next
		}
		conv := c.auth.scram
		out, err := conv.Step(string(req.SASLAuthBytes))
		if err != nil || !conv.Done() || !conv.Valid() {
			if err == nil {
				err = errors.New("SCRAM exchange did not complete")
			}
			return fail(userPrincipal(conv.Username()), err)
		}
		resp.SASLAuthBytes = []byte(out)
		user = conv.Username()
	default:
		return fail(AnonymousPrincipal, fmt.Errorf("mechanism %s is not served", mech))
	}
	principal := userPrincipal(user)
	if c.auth.authenticated.Load() && principal != c.principal {
		return fail(principal, fmt.Errorf("re-authentication as %s changes the principal from %s", principal, c.principal))
	}
	c.principal = principal
	c.auth.inProgress, c.auth.scram = false, nil
	c.auth.raw.Store(false)
	c.auth.authenticated.Store(true)
	if d := s.cfg.Auth.MaxReauth; d > 0 {
		c.auth.expiry = time.Now().Add(d)
		resp.SessionLifetimeMillis = d.Milliseconds()
	}
	s.audit(true, principal, c, mech, nil)
	return Result{Resp: resp}
}

// sensitiveConfig reports whether a broker config holds a secret: as Kafka does for its
// PASSWORD-type configs, DescribeConfigs then gives no value and marks it sensitive.
func sensitiveConfig(name string) bool {
	return strings.HasSuffix(name, ".password") || strings.HasSuffix(name, "sasl.jaas.config")
}

func userPrincipal(user string) string {
	if user == "" {
		return AnonymousPrincipal
	}
	return "User:" + user
}

// checkPlain checks a PLAIN token (RFC 4616: authzid NUL authcid NUL password). As in
// Kafka, an authorization id other than the user's own is refused.
func (s *Server) checkPlain(token []byte) (string, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return "", errors.New("malformed PLAIN token")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "":
		return "", errors.New("PLAIN token has no user name")
	case authz != "" && authz != user:
		return user, fmt.Errorf("authorization id %q differs from the user", authz)
	case s.cfg.Auth.InterBrokerUser != "" && user == s.cfg.Auth.InterBrokerUser:
		if subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.Auth.InterBrokerPassword)) != 1 {
			return user, errors.New("wrong password for the inter-broker user")
		}
	case s.cfg.Auth.PlainUsers == nil:
		return user, errors.New("no PLAIN users are configured (sasl.plain.users.file)")
	case !s.cfg.Auth.PlainUsers.Check(user, pass):
		return user, errors.New("unknown user or wrong password")
	}
	return user, nil
}

var errUnknownScramUser = errors.New("unknown user or no credential for the mechanism")

// scramLookupTimeout bounds the credential read from the controller quorum.
const scramLookupTimeout = 10 * time.Second

func (s *Server) newScramConversation(ctx context.Context, mech string) (*security.ScramServer, error) {
	return security.NewScramServer(mech, func(user string) (metadata.ScramCredential, error) {
		if cr, ok := s.cfg.Auth.interBrokerScram[mech]; ok && user == cr.User {
			return cr, nil
		}
		if s.scram == nil {
			return metadata.ScramCredential{}, errUnknownScramUser
		}
		lctx, cancel := context.WithTimeout(ctx, scramLookupTimeout)
		defer cancel()
		creds, err := s.scram.ScramCredentials(lctx, []string{user})
		if err != nil {
			return metadata.ScramCredential{}, fmt.Errorf("read SCRAM credentials: %w", err)
		}
		for _, cr := range creds {
			if cr.User == user && cr.Mechanism == mech {
				return cr, nil
			}
		}
		return metadata.ScramCredential{}, errUnknownScramUser
	})
}

// audit logs an authentication outcome as a structured record: who, from where, how,
// on which listener, and why a failure failed.
func (s *Server) audit(ok bool, principal string, c *conn, mechanism string, err error) {
	attrs := []slog.Attr{
		slog.String("event", "authentication"),
		slog.Bool("success", ok),
		slog.String("principal", principal),
		slog.String("client", remoteString(c.nc.RemoteAddr())),
		slog.String("listener", c.ln.name()),
		slog.String("security_protocol", c.ln.protocol()),
		slog.String("mechanism", mechanism),
	}
	if ok {
		s.lg.LogAttrs(context.Background(), slog.LevelInfo, "authentication succeeded", attrs...)
		return
	}
	attrs = append(attrs, slog.String("reason", err.Error()))
	s.lg.LogAttrs(context.Background(), slog.LevelWarn, "authentication failed", attrs...)
}

func remoteString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// SaslHandshake (17) and SaslAuthenticate (36), whose handlers are above. SaslHandshake
// v0 makes the tokens that follow bare frames without a Kafka header (kafka-python 2.0);
// librdkafka needs v0 in range to use SASL at all. Both: every version kmsg knows.
var (
	saslHandshakeAPI    = api{key: kmsg.SASLHandshake, min: 0, max: 1, handle: (*Server).handleSaslHandshake}
	saslAuthenticateAPI = api{key: kmsg.SASLAuthenticate, min: 0, max: 2, handle: (*Server).handleSaslAuthenticate}
)
