package metadata

import (
	"context"

	"github.com/shalelog/shale/security/acl"
)

// ACLStore is how a broker changes the cluster's ACLs; the result reaches every broker in
// the image (Image.ACLs). Errors follow Store's rules.
type ACLStore interface {
	// CreateACLs stores bindings and returns one error per binding (nil: stored).
	CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error)
	// DeleteACLs removes every binding a filter matches and returns, per filter, what it
	// removed.
	DeleteACLs(ctx context.Context, filters []acl.Filter) ([]ACLDeletion, error)
}

// ACLDeletion is one DeleteAcls filter's outcome.
type ACLDeletion struct {
	Err     error
	Deleted []acl.Binding
}
