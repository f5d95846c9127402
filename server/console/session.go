package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const cookieName = "shale_console"

// session is one viewer's: its CSRF token and, on a SASL listener, the user it logged
// in as and its own Kafka client. The state stays on the server; the cookie holds only
// the random id.
type session struct {
	id, csrf string
	user     string
	// mech is the user's SASL mechanism; nil when the listener has no SASL.
	mech    sasl.Mechanism
	client  *lazyClient // nil: the console's shared client
	created time.Time

	mu       sync.Mutex
	lastSeen time.Time
}

type sessions struct {
	clock Clock
	mu    sync.Mutex
	byID  map[string]*session
}

func newSessions(clock Clock) *sessions {
	return &sessions{clock: clock, byID: map[string]*session{}}
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the platform has no randomness: nothing is safe
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxSessions bounds the server-side state: without SASL every cookie-less request
// starts a session, so a script that keeps none would otherwise grow it for 30 minutes.
const maxSessions = 10000

func (s *sessions) create(user string, mech sasl.Mechanism, client *lazyClient) *session {
	now := s.clock.Now()
	ss := &session{id: randomToken(), csrf: randomToken(), user: user, mech: mech, client: client, created: now, lastSeen: now}
	s.mu.Lock()
	var evicted *session
	if len(s.byID) >= maxSessions {
		// The least recently seen goes (a scan, but only when full).
		for _, o := range s.byID {
			o.mu.Lock()
			if evicted == nil || o.lastSeen.Before(evicted.lastSeen) {
				evicted = o
			}
			o.mu.Unlock()
		}
		delete(s.byID, evicted.id)
	}
	s.byID[ss.id] = ss
	s.mu.Unlock()
	if evicted != nil && evicted.client != nil {
		evicted.client.close()
	}
	return ss
}

// get returns the live session with id, touching it; expired ones are removed.
func (s *sessions) get(id string) *session {
	now := s.clock.Now()
	s.mu.Lock()
	ss := s.byID[id]
	s.mu.Unlock()
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	expired := now.Sub(ss.lastSeen) > sessionIdle || now.Sub(ss.created) > sessionMax
	if !expired {
		ss.lastSeen = now
	}
	ss.mu.Unlock()
	if expired {
		s.remove(id)
		return nil
	}
	return ss
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	ss := s.byID[id]
	delete(s.byID, id)
	s.mu.Unlock()
	if ss != nil && ss.client != nil {
		ss.client.close()
	}
}

// sweep ends the sessions idle or too old at now (the sampler calls it each tick).
func (s *sessions) sweep(now time.Time) {
	s.mu.Lock()
	var dead []string
	for id, ss := range s.byID {
		ss.mu.Lock()
		if now.Sub(ss.lastSeen) > sessionIdle || now.Sub(ss.created) > sessionMax {
			dead = append(dead, id)
		}
		ss.mu.Unlock()
	}
	s.mu.Unlock()
	for _, id := range dead {
		s.remove(id)
	}
}

func (s *sessions) closeAll() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.remove(id)
	}
}

func setSessionCookie(w http.ResponseWriter, r *http.Request, ss *session) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: ss.id, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		// Secure only over TLS: a browser drops a Secure cookie set over plain HTTP.
		Secure: r.TLS != nil,
		MaxAge: int(sessionMax / time.Second),
	})
}

// session returns the request's session. Without SASL a viewer without one gets a new
// one (it carries the CSRF token); with SASL, nil means "log in first".
func (c *Console) session(w http.ResponseWriter, r *http.Request) *session {
	if ck, err := r.Cookie(cookieName); err == nil {
		if ss := c.sessions.get(ck.Value); ss != nil {
			return ss
		}
	}
	if c.opts.Kafka.SASL {
		return nil
	}
	ss := c.sessions.create("", nil, nil)
	setSessionCookie(w, r, ss)
	return ss
}

// clients returns the Kafka client the session's requests go through.
func (c *Console) clients(ss *session) (*kgo.Client, *kadm.Client, error) {
	if ss.client != nil {
		return ss.client.get()
	}
	return c.shared.get()
}

// newClient makes a fresh client as the session's principal with extra options (the
// message browser consumes with its own).
func (c *Console) newClient(ss *session, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := c.clientOpts()
	if ss.mech != nil {
		opts = append(opts, kgo.SASL(ss.mech))
	}
	return kgo.NewClient(append(opts, extra...)...)
}

// validCSRF checks a change's token against its session's, in constant time.
func validCSRF(ss *session, r *http.Request) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}

// mechanism builds the SASL mechanism a login form names.
func mechanism(name, user, pass string) (sasl.Mechanism, error) {
	switch name {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, errors.New("unknown SASL mechanism " + name)
}
