package security

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/shalelog/shale/metadata"
)

func storedCred(t *testing.T, user, mech, password string) metadata.ScramCredential {
	t.Helper()
	salt, salted, err := SaltPassword(mech, password, nil, MinScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	return ScramFromSalted(user, mech, salt, salted, MinScramIterations)
}

// exchange runs franz-go's SCRAM client against the server; rewrite, when set, changes
// the client-final message as a client would send it.
func exchange(t *testing.T, mech, user, pass string, cred metadata.ScramCredential, rewrite func(string) string) (*ScramServer, error) {
	t.Helper()
	srv, err := NewScramServer(mech, func(u string) (metadata.ScramCredential, error) {
		if u != cred.User {
			return metadata.ScramCredential{}, errors.New("unknown user")
		}
		return cred, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := scram.Auth{User: user, Pass: pass}
	m := auth.AsSha512Mechanism()
	if mech == MechanismScramSHA256 {
		m = auth.AsSha256Mechanism()
	}
	sess, first, err := m.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	serverFirst, err := srv.Step(string(first))
	if err != nil {
		return srv, err
	}
	_, final, err := sess.Challenge([]byte(serverFirst))
	if err != nil {
		t.Fatal(err)
	}
	msg := string(final)
	if rewrite != nil {
		msg = rewrite(msg)
	}
	serverFinal, err := srv.Step(msg)
	if err != nil {
		return srv, err
	}
	if done, _, err := sess.Challenge([]byte(serverFinal)); err != nil || !done {
		t.Fatalf("client rejected the server's signature: %v", err)
	}
	return srv, nil
}

func TestScramServer(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		cred := storedCred(t, "al,ice", mech, "s3cret")
		srv, err := exchange(t, mech, "al,ice", "s3cret", cred, nil)
		if err != nil || !srv.Done() || !srv.Valid() || srv.Username() != "al,ice" {
			t.Fatalf("%s: %v, done %v valid %v user %q", mech, err, srv.Done(), srv.Valid(), srv.Username())
		}
		if srv, err := exchange(t, mech, "al,ice", "wrong", cred, nil); err == nil || srv.Valid() {
			t.Errorf("%s: wrong password accepted", mech)
		}
		if _, err := exchange(t, mech, "bob", "s3cret", cred, nil); err == nil {
			t.Errorf("%s: unknown user accepted", mech)
		}
		// A nonce that is not the server's is refused, even with the right password.
		if _, err := exchange(t, mech, "al,ice", "s3cret", cred, func(m string) string {
			return strings.Replace(m, ",r=", ",r=x", 1)
		}); err == nil {
			t.Errorf("%s: altered nonce accepted", mech)
		}
	}
	// A credential for one mechanism does not serve the other.
	cred := storedCred(t, "alice", MechanismScramSHA256, "s3cret")
	if _, err := exchange(t, MechanismScramSHA512, "alice", "s3cret", cred, nil); err == nil {
		t.Error("SHA-256 credential accepted for SCRAM-SHA-512")
	}
}
