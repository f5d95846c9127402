// Package objstore is the object store under tiered storage: a small interface over an
// S3-compatible bucket, so that the remote log (tiered/...) and the replica manager can
// be tested against memory, an in-process fake and a real S3 server alike.
//
// Keys are relative to the store's prefix; an implementation adds the prefix. Objects
// are written whole (Put) and never modified; readers ask for byte ranges (Get), which is
// what both a consumer's chunked reads and S3's Range header need.
package objstore

import (
	"context"
	"errors"
	"io"
)

// ErrNotFound is returned (wrapped) by Get and Head when the key does not exist.
// Delete of a missing key is not an error: deletes are retried after indeterminate
// outcomes, so they must be idempotent.
var ErrNotFound = errors.New("object not found")

// Object describes one stored object.
type Object struct {
	Key  string
	Size int64
}

// Store is an object store. Implementations are safe for concurrent use. Every call
// honours ctx; an error other than ErrNotFound may leave the outcome unknown (a Put
// that timed out may still have stored the object), and callers treat it so.
type Store interface {
	// Put stores size bytes read from body under key, replacing any object there.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// Get reads n bytes of key from offset off; n < 0 reads to the end. Reading past
	// the end returns what exists.
	Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Head returns the object's description.
	Head(ctx context.Context, key string) (Object, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose keys start with prefix, in key order.
	List(ctx context.Context, prefix string) ([]Object, error)
}
