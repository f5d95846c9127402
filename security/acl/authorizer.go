package acl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AuthorizerClassNames are the authorizer.class.name values that turn authorization on:
// Kafka's KRaft authorizer and its ZooKeeper-era predecessor both select Shale's
// authorizer, which stores ACLs through the controller as the KRaft one does.
var AuthorizerClassNames = []string{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
}

// ParseAuthorizerClassName reports whether authorizer.class.name turns authorization
// on: "" leaves it off, Kafka's authorizer class names turn it on, anything else is an
// error (Shale cannot load classes).
func ParseAuthorizerClassName(v string) (bool, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return false, nil
	}
	for _, n := range AuthorizerClassNames {
		if v == n {
			return true, nil
		}
	}
	return false, fmt.Errorf("authorizer.class.name %q is not supported: use %q or leave it empty", v, AuthorizerClassNames[0])
}

// ParseSuperUsers splits super.users: principals separated by semicolons.
func ParseSuperUsers(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if err := ValidPrincipal(p); err != nil {
			return nil, fmt.Errorf("super.users: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Authorizer decides requests against a Set. A nil *Authorizer allows everything: it is
// what a broker without authorizer.class.name has.
type Authorizer struct {
	superUsers map[string]bool
	// allowIfNoACL is allow.everyone.if.no.acl.found: a resource that no binding covers
	// is open to everyone instead of closed to all but super users.
	allowIfNoACL bool
}

// NewAuthorizer returns an authorizer with the given super.users and
// allow.everyone.if.no.acl.found.
func NewAuthorizer(superUsers []string, allowIfNoACL bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: allowIfNoACL}
	for _, p := range superUsers {
		a.superUsers[p] = true
	}
	return a
}

// Enabled reports whether requests are checked at all.
func (a *Authorizer) Enabled() bool { return a != nil }

// Authorize reports whether principal, connecting from host, may perform op on the
// resource: super users may do anything; otherwise a matching DENY (of op or ALL) wins,
// then a matching ALLOW of op or of an operation implying it allows, and a resource no
// binding covers at all follows allow.everyone.if.no.acl.found.
func (a *Authorizer) Authorize(s *Set, principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if a == nil || a.superUsers[principal] {
		return true
	}
	covered, allowed, denied := false, false, false
	s.forResource(typ, name, func(b Binding) bool {
		covered = true
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			return true
		}
		if b.Host != Wildcard && b.Host != host {
			return true
		}
		switch b.Permission {
		case kmsg.ACLPermissionTypeDeny:
			if b.Operation == op || b.Operation == kmsg.ACLOperationAll {
				denied = true
				return false
			}
		case kmsg.ACLPermissionTypeAllow:
			if implies(b.Operation, op) {
				allowed = true
			}
		}
		return true
	})
	switch {
	case denied:
		return false
	case allowed:
		return true
	default:
		return !covered && a.allowIfNoACL
	}
}

// AuthorizeAny reports whether principal may perform op on at least one resource of the
// type, as Kafka's authorizeByResourceType: some ALLOW binding of op (or an operation
// implying it) must apply to the principal and host without a DENY that covers every
// resource that ALLOW names.
func (a *Authorizer) AuthorizeAny(s *Set, principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType) bool {
	if a == nil || a.superUsers[principal] {
		return true
	}
	applies := func(b Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == Wildcard || b.Host == host)
	}
	var allows, denies []Binding
	covered := false
	for _, b := range s.All() {
		if b.ResourceType != typ {
			continue
		}
		covered = true
		if !applies(b) {
			continue
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == op || b.Operation == kmsg.ACLOperationAll):
			denies = append(denies, b)
		case b.Permission == kmsg.ACLPermissionTypeAllow && implies(b.Operation, op):
			allows = append(allows, b)
		}
	}
	if !covered {
		return a.allowIfNoACL
	}
	for _, al := range allows {
		shadowed := false
		for _, d := range denies {
			if shadows(d, al) {
				shadowed = true
				break
			}
		}
		if !shadowed {
			return true
		}
	}
	return false
}

// shadows reports whether deny d covers every resource allow al names.
func shadows(d, al Binding) bool {
	switch {
	case d.PatternType == kmsg.ACLResourcePatternTypeLiteral && d.ResourceName == Wildcard:
		return true
	case d.PatternType == kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(al.ResourceName, d.ResourceName) && al.ResourceName != Wildcard
	default: // LITERAL name: covers only the same literal
		return al.PatternType == kmsg.ACLResourcePatternTypeLiteral && al.ResourceName == d.ResourceName
	}
}
