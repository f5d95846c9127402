package metadata

import "context"

// ScramCredential is one user's salted SCRAM credential for one mechanism (KIP-554). The
// password is never stored: StoredKey and ServerKey are what RFC 5802 needs to check a
// client's proof and to prove the server to the client.
type ScramCredential struct {
	User       string
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramCredentialKey names one user's credential for one mechanism.
type ScramCredentialKey struct {
	User      string
	Mechanism string
}

// ScramStore keeps SCRAM credentials through the controller quorum. It is separate from
// Store so that brokers without it (tests, fakes) simply have no SCRAM users.
type ScramStore interface {
	// AlterScramCredentials deletes, then upserts, credentials in one committed record.
	// It returns one error per deletion and per upsert, in request order (nil for
	// success; RESOURCE_NOT_FOUND for a deletion of a credential that does not exist).
	AlterScramCredentials(ctx context.Context, upserts []ScramCredential, deletions []ScramCredentialKey) (upsertErrs, deletionErrs []error, err error)
	// ScramCredentials returns the stored credentials of the given users, all users when
	// users is empty, sorted by user then mechanism.
	ScramCredentials(ctx context.Context, users []string) ([]ScramCredential, error)
}
