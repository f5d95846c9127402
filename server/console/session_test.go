package console

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Sessions end after 30 idle minutes or 12 hours in all, by the console's clock.
func TestSessionsExpire(t *testing.T) {
	clock := newFakeClock()
	s := newSessions(clock)
	advance := func(d time.Duration) {
		clock.mu.Lock()
		clock.now = clock.now.Add(d)
		clock.mu.Unlock()
	}
	idle := s.create("", nil, nil)
	busy := s.create("", nil, nil)
	for range 3 {
		advance(20 * time.Minute)
		if s.get(busy.id) == nil {
			t.Fatal("a session in use expired")
		}
	}
	if s.get(idle.id) != nil {
		t.Fatal("a session idle for an hour is still valid")
	}
	for range 40 {
		advance(20 * time.Minute)
		s.get(busy.id)
	}
	if s.get(busy.id) != nil {
		t.Fatal("a session older than 12 hours is still valid")
	}
	if len(s.byID) != 0 {
		t.Fatalf("expired sessions kept on the server: %d", len(s.byID))
	}
}

// The sessions held are bounded: the least recently seen goes first.
func TestSessionsBounded(t *testing.T) {
	clock := newFakeClock()
	s := newSessions(clock)
	first := s.create("", nil, nil)
	second := s.create("", nil, nil)
	clock.mu.Lock()
	clock.now = clock.now.Add(time.Second)
	clock.mu.Unlock()
	s.get(first.id) // seen more recently than second
	for range maxSessions - 1 {
		s.create("", nil, nil)
	}
	if len(s.byID) != maxSessions || s.get(second.id) != nil || s.get(first.id) == nil {
		t.Fatalf("%d sessions; the least recently seen should have gone", len(s.byID))
	}
}

// Login redirects only within the console, and a cross-origin login form is refused.
func TestLoginStaysOnSite(t *testing.T) {
	for in, want := range map[string]string{"/topics": "/topics", "//evil.example/": "/", "https://evil.example/": "/", "/\\evil": "/", "": "/"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
	c, err := New(Options{Kafka: Kafka{Addr: "127.0.0.1:1", SASL: true, Mechanisms: []string{"PLAIN"}}, Clock: newFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := httptest.NewRequest("POST", "http://console.example/login", strings.NewReader(url.Values{"user": {"u"}, "password": {"p"}, "mechanism": {"PLAIN"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "https://evil.example")
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	if w.Code != 403 || !strings.Contains(w.Body.String(), "cross-origin") {
		t.Fatalf("cross-origin login: %d\n%s", w.Code, w.Body.String())
	}
	// Without a session, a SASL console sends every page to the login page.
	w = httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", "http://console.example/groups", nil))
	if w.Code != 303 || w.Header().Get("Location") != "/login?next=%2Fgroups" {
		t.Fatalf("a page without a session: %d %q", w.Code, w.Header().Get("Location"))
	}
}
