// Package acl is Shale's access-control model: Kafka's ACL bindings (a resource pattern
// and an access-control entry), the filters DescribeAcls and DeleteAcls use, an immutable
// indexed set of bindings that brokers receive in the metadata image, and the authorizer
// that decides a request with Kafka's StandardAuthorizer semantics (super users, DENY
// winning over ALLOW, implied operations, allow.everyone.if.no.acl.found).
//
// Enumerations are franz-go's kmsg types, whose numeric values are Kafka's wire codes.
package acl

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterName is the one name the CLUSTER resource has, as in Kafka.
const ClusterName = "kafka-cluster"

// Wildcard matches every resource name (LITERAL "*"), every principal ("User:*") or every
// host ("*").
const Wildcard = "*"

// WildcardPrincipal matches every user.
const WildcardPrincipal = "User:*"

// Binding is one ACL: who (principal, host) may or may not (permission) do what
// (operation) to which resources (type, name, pattern type).
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %q) %s %s %s from %s", b.PatternType, ResourceTypeName(b.ResourceType), b.ResourceName,
		b.Permission, b.Principal, b.Operation, b.Host)
}

// Compare orders bindings by resource, then entry, so that every controller and broker
// lists them alike.
func Compare(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// Validate checks a binding CreateAcls is asked to store, as Kafka's controller does; the
// error wraps INVALID_REQUEST.
func (b Binding) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", kerr.InvalidRequest, fmt.Sprintf(format, args...))
	}
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
		kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser,
		ResourceTypeSubject, ResourceTypeRegistry:
	default:
		return bad("resource type %s cannot be stored", b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return bad("pattern type %s cannot be stored (LITERAL or PREFIXED)", b.PatternType)
	}
	if b.ResourceName == "" {
		return bad("resource name is empty")
	}
	if b.ResourceType == kmsg.ACLResourceTypeCluster && (b.ResourceName != ClusterName || b.PatternType != kmsg.ACLResourcePatternTypeLiteral) {
		return bad("the cluster resource is LITERAL %q", ClusterName)
	}
	if b.ResourceType == ResourceTypeRegistry && (b.ResourceName != RegistryName || b.PatternType != kmsg.ACLResourcePatternTypeLiteral) {
		return bad("the registry resource is LITERAL %q", RegistryName)
	}
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed && b.ResourceName == Wildcard {
		return bad("a PREFIXED pattern cannot be %q (use LITERAL %q)", Wildcard, Wildcard)
	}
	if err := ValidPrincipal(b.Principal); err != nil {
		return bad("%v", err)
	}
	if b.Host == "" {
		return bad("host is empty (use %q for any host)", Wildcard)
	}
	switch b.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return bad("operation %s cannot be stored", b.Operation)
	}
	if b.Operation > kmsg.ACLOperationDescribeTokens {
		return bad("unknown operation %d", b.Operation)
	}
	switch b.Permission {
	case kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny:
	default:
		return bad("permission %s cannot be stored (ALLOW or DENY)", b.Permission)
	}
	return nil
}

// ValidPrincipal checks Kafka's "Type:name" form.
func ValidPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q is not of the form Type:name (e.g. User:alice)", p)
	}
	return nil
}

// Filter selects bindings, as DescribeAcls and DeleteAcls carry them: ANY matches every
// type, operation and permission, a nil name, principal or host matches every one, and
// the MATCH pattern type selects every binding that would apply to the named resource.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate refuses filters that can match nothing because a field is UNKNOWN; the error
// wraps INVALID_REQUEST.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown || (f.ResourceType > kmsg.ACLResourceTypeUser && !IsRegistryType(f.ResourceType)):
		return fmt.Errorf("%w: unknown resource type %d", kerr.InvalidRequest, f.ResourceType)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: unknown pattern type %d", kerr.InvalidRequest, f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: unknown operation %d", kerr.InvalidRequest, f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: unknown permission %d", kerr.InvalidRequest, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b (Kafka's AclBindingFilter.matches). A
// binding of Shale's registry types is selected only by a filter that names its type
// (see ResourceTypeSubject).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != b.ResourceType && (f.ResourceType != kmsg.ACLResourceTypeAny || IsRegistryType(b.ResourceType)) {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch, b.PatternType:
	default:
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == kmsg.ACLResourcePatternTypeMatch {
			if !patternApplies(b, name) {
				return false
			}
		} else if name != b.ResourceName {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// patternApplies reports whether b's resource pattern covers the resource named name.
func patternApplies(b Binding, name string) bool {
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// implies reports whether an ALLOW of granted permits op: ALL permits everything,
// DESCRIBE is implied by READ, WRITE, DELETE and ALTER, and DESCRIBE_CONFIGS by
// ALTER_CONFIGS, as in Kafka.
func implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == kmsg.ACLOperationAll {
		return true
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// Set is an immutable set of bindings, indexed by resource for the authorizer. The zero
// value and nil are empty sets.
type Set struct {
	all []Binding // sorted by Compare, no duplicates
	// byType indexes all by resource type: literal names, then the wildcard and prefixed
	// patterns, which have to be checked against every name.
	byType map[kmsg.ACLResourceType]*typeIndex
}

type typeIndex struct {
	literal  map[string][]Binding
	patterns []Binding // LITERAL "*" and PREFIXED
}

// NewSet builds a set; duplicates collapse into one binding.
func NewSet(bs []Binding) *Set {
	all := slices.Clone(bs)
	slices.SortFunc(all, Compare)
	all = slices.Compact(all)
	s := &Set{all: all, byType: map[kmsg.ACLResourceType]*typeIndex{}}
	for _, b := range all {
		ix := s.byType[b.ResourceType]
		if ix == nil {
			ix = &typeIndex{literal: map[string][]Binding{}}
			s.byType[b.ResourceType] = ix
		}
		if b.PatternType == kmsg.ACLResourcePatternTypeLiteral && b.ResourceName != Wildcard {
			ix.literal[b.ResourceName] = append(ix.literal[b.ResourceName], b)
		} else {
			ix.patterns = append(ix.patterns, b)
		}
	}
	return s
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// All returns the bindings in Compare order; callers must not modify the slice.
func (s *Set) All() []Binding {
	if s == nil {
		return nil
	}
	return s.all
}

// Contains reports whether the set holds b.
func (s *Set) Contains(b Binding) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(s.all, b, Compare)
	return ok
}

// Matching returns the bindings f selects, in Compare order.
func (s *Set) Matching(f Filter) []Binding {
	var out []Binding
	for _, b := range s.All() {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// With returns a new set with add added and remove removed (removal first).
func (s *Set) With(add, remove []Binding) *Set {
	gone := make(map[Binding]bool, len(remove))
	for _, b := range remove {
		gone[b] = true
	}
	next := make([]Binding, 0, s.Len()+len(add))
	for _, b := range s.All() {
		if !gone[b] {
			next = append(next, b)
		}
	}
	return NewSet(append(next, add...))
}

// forResource calls fn with every binding whose pattern covers the resource.
func (s *Set) forResource(typ kmsg.ACLResourceType, name string, fn func(Binding) bool) {
	if s == nil {
		return
	}
	ix := s.byType[typ]
	if ix == nil {
		return
	}
	for _, b := range ix.literal[name] {
		if !fn(b) {
			return
		}
	}
	for _, b := range ix.patterns {
		if patternApplies(b, name) && !fn(b) {
			return
		}
	}
}
