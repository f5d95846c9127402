package acl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Shale's own resource types, for the built-in schema registry. Kafka has no resource
// type for schema registry subjects (Confluent keeps its registry ACLs in its own store,
// Redpanda adds "subject" and "registry" types of its own), so Shale adds two, with codes
// far above Kafka's (0 to 7) so that a type Kafka adds later does not collide with them.
//
// Bindings of these types are stored, replicated and decided like every other binding,
// and CreateAcls, DescribeAcls and DeleteAcls take them, but a filter matches them only
// when it names their type: a client that does not know them (kafka-acls.sh --list,
// a DescribeAcls with ANY) never receives a resource type it cannot decode, and a
// DeleteAcls with ANY does not remove them as a side effect.
const (
	// ResourceTypeSubject is a registry subject, by name (LITERAL, "*" or PREFIXED).
	ResourceTypeSubject kmsg.ACLResourceType = 100
	// ResourceTypeRegistry is the registry as a whole (its global config and mode): one
	// resource, LITERAL RegistryName, as CLUSTER is LITERAL kafka-cluster.
	ResourceTypeRegistry kmsg.ACLResourceType = 101
)

// RegistryName is the one name the REGISTRY resource has.
const RegistryName = "schema-registry"

// IsRegistryType reports whether typ is one of Shale's registry resource types.
func IsRegistryType(typ kmsg.ACLResourceType) bool {
	return typ == ResourceTypeSubject || typ == ResourceTypeRegistry
}

// ResourceTypeName is a resource type's name: Kafka's (TOPIC, GROUP, ...) or Shale's
// (SUBJECT, REGISTRY).
func ResourceTypeName(typ kmsg.ACLResourceType) string {
	switch typ {
	case ResourceTypeSubject:
		return "SUBJECT"
	case ResourceTypeRegistry:
		return "REGISTRY"
	}
	return strings.ToUpper(typ.String())
}

// ParseResourceType parses a resource type name, Kafka's or Shale's, case-insensitively.
func ParseResourceType(s string) (kmsg.ACLResourceType, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "SUBJECT":
		return ResourceTypeSubject, nil
	case "REGISTRY":
		return ResourceTypeRegistry, nil
	}
	t, err := kmsg.ParseACLResourceType(s)
	if err != nil || t == kmsg.ACLResourceTypeUnknown {
		return 0, fmt.Errorf("unknown resource type %q", s)
	}
	return t, nil
}
