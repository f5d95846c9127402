package security

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/shalelog/shale/metadata"
)

// ScramServer is the server side of one SCRAM exchange (RFC 5802) as Kafka runs it:
// client-first, server-first, client-final, server-final.
//
// It is Shale's own rather than a library's because of one leniency Kafka has and
// clients rely on: librdkafka (2.0, kcat, confluent-kafka) sends a client-final nonce
// that repeats its own nonce before the combined one, and Kafka's ScramSaslServer only
// checks that the nonce ends with the one it sent; a strict server (xdg-go/scram's)
// refuses every librdkafka login. The proof is checked over the messages exactly as
// sent, as Kafka does.
type ScramServer struct {
	mechanism string
	lookup    func(user string) (metadata.ScramCredential, error)

	step       int
	user       string
	clientBare string
	serverMsg  string
	nonce      string
	gs2Header  string
	cred       metadata.ScramCredential
	valid      bool
}

// NewScramServer starts an exchange; lookup finds the user's stored credential for the
// mechanism.
func NewScramServer(mechanism string, lookup func(user string) (metadata.ScramCredential, error)) (*ScramServer, error) {
	if _, ok := ScramHash(mechanism); !ok {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	return &ScramServer{mechanism: mechanism, lookup: lookup}, nil
}

// Username is the user the client named ("" before its first message).
func (s *ScramServer) Username() string { return s.user }

// Done reports whether the exchange has ended, Valid whether it proved the client.
func (s *ScramServer) Done() bool  { return s.step >= 2 }
func (s *ScramServer) Valid() bool { return s.valid }

// Step takes the client's next message and returns the server's.
func (s *ScramServer) Step(msg string) (string, error) {
	switch s.step {
	case 0:
		s.step = 1
		return s.first(msg)
	case 1:
		s.step = 2
		return s.final(msg)
	}
	return "", errors.New("SCRAM exchange already ended")
}

func (s *ScramServer) first(msg string) (string, error) {
	// gs2-header: "n,," or "y,," (no channel binding), with an optional a=authzid.
	parts := strings.SplitN(msg, ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") {
		return "", errors.New("malformed SCRAM client-first message (channel binding is not supported)")
	}
	authz := parts[1]
	s.gs2Header = parts[0] + "," + authz + ","
	s.clientBare = parts[2]
	var cnonce string
	for i, attr := range strings.Split(s.clientBare, ",") {
		k, v, ok := strings.Cut(attr, "=")
		if !ok {
			return "", errors.New("malformed SCRAM client-first attribute")
		}
		switch {
		case i == 0 && k == "n":
			name, err := decodeSaslName(v)
			if err != nil {
				return "", err
			}
			s.user = name
		case i == 1 && k == "r":
			cnonce = v
		case i < 2:
			return "", errors.New("SCRAM client-first must start with n= and r=")
		}
		// Later attributes are extensions (Kafka's tokenauth); none is served.
	}
	if s.user == "" || cnonce == "" {
		return "", errors.New("SCRAM client-first lacks the user or the nonce")
	}
	if authz != "" {
		if a, ok := strings.CutPrefix(authz, "a="); !ok {
			return "", errors.New("malformed SCRAM authorization id")
		} else if name, err := decodeSaslName(a); err != nil || name != s.user {
			return "", errors.New("SCRAM authorization id differs from the user")
		}
	}
	cred, err := s.lookup(s.user)
	if err != nil {
		return "", err
	}
	s.cred = cred
	snonce := make([]byte, 24)
	rand.Read(snonce)
	s.nonce = cnonce + base64.RawStdEncoding.EncodeToString(snonce)
	s.serverMsg = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	return s.serverMsg, nil
}

func (s *ScramServer) final(msg string) (string, error) {
	idx := strings.LastIndex(msg, ",p=")
	if idx < 0 {
		return "", errors.New("SCRAM client-final has no proof")
	}
	withoutProof, proofB64 := msg[:idx], msg[idx+3:]
	var channel, nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		k, v, _ := strings.Cut(attr, "=")
		switch k {
		case "c":
			channel = v
		case "r":
			nonce = v
		}
	}
	if channel != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return "", errors.New("SCRAM channel binding does not match the client-first header")
	}
	if !strings.HasSuffix(nonce, s.nonce) {
		return "", errors.New("SCRAM client-final nonce does not end with the server's")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", errors.New("malformed SCRAM proof")
	}
	h := newHash(s.mechanism)
	authMsg := s.clientBare + "," + s.serverMsg + "," + withoutProof
	mac := func(key []byte, m string) []byte {
		x := hmac.New(h, key)
		x.Write([]byte(m))
		return x.Sum(nil)
	}
	sig := mac(s.cred.StoredKey, authMsg)
	if len(proof) != len(sig) {
		return "", errors.New("invalid SCRAM proof")
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	hs := h()
	hs.Write(clientKey)
	if subtle.ConstantTimeCompare(hs.Sum(nil), s.cred.StoredKey) != 1 {
		return "", errors.New("invalid SCRAM proof (wrong password)")
	}
	s.valid = true
	return "v=" + base64.StdEncoding.EncodeToString(mac(s.cred.ServerKey, authMsg)), nil
}

// decodeSaslName undoes RFC 5802's escaping of ',' and '=' in names.
func decodeSaslName(s string) (string, error) {
	out := strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
	if strings.Count(s, "=") != strings.Count(s, "=2C")+strings.Count(s, "=3D") {
		return "", errors.New("malformed SCRAM user name")
	}
	return out, nil
}
