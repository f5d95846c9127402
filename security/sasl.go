package security

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/shalelog/shale/metadata"
)

// SASL mechanisms Shale serves.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations, and the broker's
// 16384 cap on AlterUserScramCredentials).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ScramHash returns the hash of a SCRAM mechanism, false for any other name.
func ScramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New, true
	case MechanismScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

func newHash(mechanism string) func() hash.Hash {
	if mechanism == MechanismScramSHA256 {
		return sha256.New
	}
	return sha512.New
}

// ScramFromSalted derives the stored credential from a salted password, which is what
// AlterUserScramCredentials carries (RFC 5802: StoredKey = H(HMAC(salted, "Client
// Key")), ServerKey = HMAC(salted, "Server Key")).
func ScramFromSalted(user, mechanism string, salt, salted []byte, iterations int32) metadata.ScramCredential {
	h := newHash(mechanism)
	mac := func(msg string) []byte {
		m := hmac.New(h, salted)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	hs := h()
	hs.Write(mac("Client Key"))
	return metadata.ScramCredential{User: user, Mechanism: mechanism, Salt: bytes.Clone(salt),
		StoredKey: hs.Sum(nil), ServerKey: mac("Server Key"), Iterations: iterations}
}

// SaltPassword is PBKDF2(password, salt, iterations) with the mechanism's hash; it
// returns a fresh random salt when salt is nil.
func SaltPassword(mechanism, password string, salt []byte, iterations int32) (saltOut, salted []byte, err error) {
	if _, ok := ScramHash(mechanism); !ok {
		return nil, nil, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	if salt == nil {
		salt = make([]byte, 32)
		rand.Read(salt)
	}
	h := newHash(mechanism)
	salted, err = pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		return nil, nil, fmt.Errorf("salt password: %w", err)
	}
	return salt, salted, nil
}

// PlainUsers is the user list SASL/PLAIN checks passwords against: Shale's
// sasl.plain.users.file, a properties-style file of "user=password" lines (# comments).
// Kafka takes the same list from user_<name>="<password>" options of the listener's JAAS
// PlainLoginModule entry; a plain file is simpler to template and rotate. The file is
// re-read when it changes (checked at most once a second, on an authentication).
type PlainUsers struct {
	path string
	lg   *slog.Logger

	mu        sync.Mutex
	lastCheck time.Time
	stamp     fileStamp
	users     map[string]string
}

// NewPlainUsers loads the file; an error here fails the start.
func NewPlainUsers(path string, lg *slog.Logger) (*PlainUsers, error) {
	if lg == nil {
		lg = slog.Default()
	}
	p := &PlainUsers{path: path, lg: lg}
	users, st, err := p.read()
	if err != nil {
		return nil, err
	}
	p.users, p.stamp, p.lastCheck = users, st, time.Now()
	return p, nil
}

func (p *PlainUsers) read() (map[string]string, fileStamp, error) {
	fi, err := os.Stat(p.path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("sasl.plain.users.file: %w", err)
	}
	data, err := os.ReadFile(p.path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("sasl.plain.users.file: %w", err)
	}
	users := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, pass, ok := strings.Cut(line, "=")
		user = strings.TrimSpace(user)
		if !ok || user == "" {
			return nil, fileStamp{}, fmt.Errorf("sasl.plain.users.file %s line %d: want user=password", p.path, n)
		}
		users[user] = pass
	}
	return users, fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// Check reports whether password is user's.
func (p *PlainUsers) Check(user, password string) bool {
	p.mu.Lock()
	if now := time.Now(); now.Sub(p.lastCheck) >= time.Second {
		p.lastCheck = now
		if fi, err := os.Stat(p.path); err == nil && (fileStamp{mod: fi.ModTime(), size: fi.Size()}) != p.stamp {
			if users, st, err := p.read(); err != nil {
				p.lg.Error("sasl.plain.users.file changed but does not load; keeping the previous users", "err", err)
			} else {
				p.users, p.stamp = users, st
			}
		}
	}
	want, ok := p.users[user]
	p.mu.Unlock()
	// Compared even for an unknown user, so that timing does not tell which users exist.
	eq := subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
	return ok && eq
}
