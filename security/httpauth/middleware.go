package httpauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security"
)

// Authentication methods, Confluent's authentication.method values.
const (
	MethodNone  = "NONE"
	MethodBasic = "BASIC"
)

// Options configure an Authenticator.
type Options struct {
	// API names the API in logs ("schema-registry", "rest-proxy").
	API string
	// Method is NONE or BASIC. With BASIC every request needs HTTP basic credentials of
	// a known user, and its principal is User:<name>. With NONE the principal is the
	// client certificate's, mapped by Principals, or Anonymous without one.
	Method string
	// Realm is the realm of the WWW-Authenticate challenge.
	Realm string
	// Principals maps client certificates to principals (ssl.principal.mapping.rules);
	// nil is DEFAULT.
	Principals *security.PrincipalMapper
	// PlainUsers are sasl.plain.users.file's users; nil for none.
	PlainUsers *security.PlainUsers
	// Scram reads SCRAM credentials from the controller quorum; nil for none.
	Scram metadata.ScramStore
	// InterBrokerUser and InterBrokerPassword are sasl.inter.broker.username/password,
	// which every broker accepts without a stored credential, on Kafka listeners and
	// here alike.
	InterBrokerUser, InterBrokerPassword string
	// ContentType is the media type of the error bodies (default application/json).
	ContentType string
	Log         *slog.Logger
}

// Authenticator finds the principal of HTTP requests with the node's users and
// certificates, and refuses requests that do not authenticate.
type Authenticator struct {
	o        Options
	verified *verifiedCache
}

// New returns an Authenticator; it fails on an unknown method.
func New(o Options) (*Authenticator, error) {
	o.Method = strings.ToUpper(strings.TrimSpace(o.Method))
	switch o.Method {
	case "":
		o.Method = MethodNone
	case MethodNone, MethodBasic:
	default:
		return nil, fmt.Errorf("authentication method %q: want NONE or BASIC", o.Method)
	}
	if o.Principals == nil {
		o.Principals, _ = security.ParsePrincipalRules("")
	}
	if o.ContentType == "" {
		o.ContentType = "application/json"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Authenticator{o: o, verified: newVerifiedCache()}, nil
}

// errUnauthorized is a failed authentication: the client is told 401 and no more.
var errUnauthorized = errors.New("unauthorized")

// credentialLookupTimeout bounds the read of SCRAM credentials from the controller.
const credentialLookupTimeout = 10 * time.Second

// Wrap returns next behind authentication: requests that authenticate reach it with
// their principal in the context (Principal), the others are answered 401 with a
// WWW-Authenticate challenge and Confluent's error body, or 503 when the credentials
// could not be read.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal, mech, err := a.authenticate(r)
		if err != nil {
			a.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "authentication failed",
				slog.String("event", "authentication"), slog.Bool("success", false), slog.String("principal", principal),
				slog.String("client", r.RemoteAddr), slog.String("listener", a.o.API), slog.String("mechanism", mech),
				slog.String("reason", err.Error()))
			if errors.Is(err, errUnauthorized) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", a.o.Realm))
				a.fail(w, http.StatusUnauthorized, http.StatusUnauthorized, "Unauthorized")
				return
			}
			a.fail(w, http.StatusServiceUnavailable, http.StatusServiceUnavailable, "cannot check credentials now: "+err.Error())
			return
		}
		a.o.Log.LogAttrs(r.Context(), slog.LevelDebug, "authentication succeeded",
			slog.String("event", "authentication"), slog.String("principal", principal),
			slog.String("client", r.RemoteAddr), slog.String("listener", a.o.API), slog.String("mechanism", mech))
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), principal)))
	})
}

// fail answers an error with Confluent's body ({"error_code": ..., "message": ...}).
func (a *Authenticator) fail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", a.o.ContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}

// authenticate returns the request's principal and how it was found. An error wrapping
// errUnauthorized refuses the request; any other error is the credential store's.
func (a *Authenticator) authenticate(r *http.Request) (principal, mechanism string, err error) {
	if a.o.Method == MethodNone {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return Anonymous, "", nil
		}
		return a.certificatePrincipal(r.TLS)
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return Anonymous, "BASIC", fmt.Errorf("%w: no basic credentials", errUnauthorized)
	}
	principal = "User:" + user
	ok, err = a.checkPassword(r.Context(), user, pass)
	switch {
	case err != nil:
		return principal, "BASIC", err
	case !ok:
		return principal, "BASIC", fmt.Errorf("%w: unknown user or wrong password", errUnauthorized)
	}
	return principal, "BASIC", nil
}

func (a *Authenticator) certificatePrincipal(cs *tls.ConnectionState) (string, string, error) {
	p, err := a.o.Principals.CertificatePrincipal(cs.PeerCertificates[0])
	if err != nil {
		return Anonymous, "SSL", fmt.Errorf("%w: %w", errUnauthorized, err)
	}
	return p, "SSL", nil
}

// checkPassword checks a password against the inter-broker login, the PLAIN users and
// the user's SCRAM credentials, in that order; any one that matches will do.
func (a *Authenticator) checkPassword(ctx context.Context, user, pass string) (bool, error) {
	if a.o.InterBrokerUser != "" && user == a.o.InterBrokerUser {
		if subtle.ConstantTimeCompare([]byte(pass), []byte(a.o.InterBrokerPassword)) == 1 {
			return true, nil
		}
	}
	if a.o.PlainUsers != nil && a.o.PlainUsers.Check(user, pass) {
		return true, nil
	}
	if a.o.Scram == nil {
		return false, nil
	}
	// Read on every request, so that a changed or deleted credential applies at once.
	lctx, cancel := context.WithTimeout(ctx, credentialLookupTimeout)
	defer cancel()
	creds, err := a.o.Scram.ScramCredentials(lctx, []string{user})
	if err != nil {
		return false, fmt.Errorf("read SCRAM credentials: %w", err)
	}
	for _, c := range creds {
		if c.User == user && a.scramMatches(c, pass) {
			return true, nil
		}
	}
	return false, nil
}

// scramMatches derives the StoredKey of pass with the credential's salt and iterations
// (RFC 5802: StoredKey = H(HMAC(PBKDF2(pass, salt, i), "Client Key"))) and compares it
// with the stored one in constant time. A match is remembered, keyed by the password and
// the credential together, so that a client sending the same credentials on every
// request pays for PBKDF2 once, and a new salt or password is derived afresh.
func (a *Authenticator) scramMatches(c metadata.ScramCredential, pass string) bool {
	if len(c.Salt) == 0 || c.Iterations <= 0 {
		return false
	}
	k := a.verified.key(c, pass)
	if a.verified.has(k) {
		return true
	}
	_, salted, err := security.SaltPassword(c.Mechanism, pass, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	derived := security.ScramFromSalted(c.User, c.Mechanism, c.Salt, salted, c.Iterations)
	if subtle.ConstantTimeCompare(derived.StoredKey, c.StoredKey) != 1 {
		return false
	}
	a.verified.add(k)
	return true
}

// verifiedCache remembers password and credential pairs that matched. Keys are HMACs
// under a key of this process, never the passwords themselves.
type verifiedCache struct {
	secret []byte
	mu     sync.Mutex
	keys   map[[sha256.Size]byte]struct{}
}

// maxVerified bounds the cache; when full it starts again empty.
const maxVerified = 4096

func newVerifiedCache() *verifiedCache {
	s := make([]byte, 32)
	rand.Read(s)
	return &verifiedCache{secret: s, keys: map[[sha256.Size]byte]struct{}{}}
}

func (v *verifiedCache) key(c metadata.ScramCredential, pass string) [sha256.Size]byte {
	m := hmac.New(sha256.New, v.secret)
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	field([]byte(c.User))
	field([]byte(c.Mechanism))
	field(c.Salt)
	field(c.StoredKey)
	field(binary.BigEndian.AppendUint32(nil, uint32(c.Iterations)))
	field([]byte(pass))
	var out [sha256.Size]byte
	copy(out[:], m.Sum(nil))
	return out
}

func (v *verifiedCache) has(k [sha256.Size]byte) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.keys[k]
	return ok
}

func (v *verifiedCache) add(k [sha256.Size]byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.keys) >= maxVerified {
		clear(v.keys)
	}
	v.keys[k] = struct{}{}
}

// ClientHost is the host ACLs match a request against: its client's IP address, as
// Kafka matches a connection's.
func ClientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ServerTLS is the TLS configuration of an HTTP API's listener: the node's certificate
// (reloaded when its files change) and clientAuth (required, requested or none) for
// client certificates checked against the node's truststore.
func ServerTLS(files *security.TLSReloader, clientAuth string) (*tls.Config, error) {
	if files == nil {
		return nil, errors.New("HTTPS needs ssl.keystore.location")
	}
	switch clientAuth {
	case "", "none", "requested", "required":
	default:
		return nil, fmt.Errorf("client auth %q: want required, requested or none", clientAuth)
	}
	// http/1.1 only: HTTP/2 over a hand-made TLS listener would need its own setup, and
	// registry and proxy clients speak HTTP/1.1.
	return files.ServerConfigClientAuth(clientAuth, "http/1.1"), nil
}
