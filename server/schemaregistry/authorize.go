package schemaregistry

import (
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/httpauth"
)

// Authorization: when the broker has an authorizer, every request is decided for the
// principal the HTTP middleware found (httpauth.Principal) with the cluster's ACLs, on
// Shale's SUBJECT and REGISTRY resource types. The operation each endpoint needs is
// Redpanda's table (Confluent keeps its registry ACLs in a store of its own, Redpanda
// uses Kafka-style ACLs as Shale does): READ, WRITE and DELETE on a subject for its
// schemas, DESCRIBE to list it, DESCRIBE_CONFIGS and ALTER_CONFIGS for its config and
// mode; the same configs operations on the REGISTRY for the global config and mode, and
// DESCRIBE on it for .../referencedby. A schema by id needs READ on one subject that has
// it (Confluent's SCHEMA_READ rule). One departure from Redpanda: /schemas/ids/{id}/versions
// and /subjects need that READ too rather than DESCRIBE on the REGISTRY, and list only the
// subjects the principal may describe, because serializers (franz-go's CreateSchema) call
// them after every registration: a producer would otherwise need registry-wide rights.

// RegistryForbidden is Confluent's error code of a request the principal may not make.
const RegistryForbidden = 40301

// rule decides whether a request may reach its handler.
type rule func(s *Server, r *http.Request) error

// anyone lets every request through: the handler decides, or nothing needs deciding.
func anyone(*Server, *http.Request) error { return nil }

// onSubject needs op on the subject of the path.
func onSubject(op kmsg.ACLOperation) rule {
	return func(s *Server, r *http.Request) error {
		return s.authorize(r, op, acl.ResourceTypeSubject, r.PathValue("subject"))
	}
}

// onRegistry needs op on the REGISTRY resource.
func onRegistry(op kmsg.ACLOperation) rule {
	return func(s *Server, r *http.Request) error {
		return s.authorize(r, op, acl.ResourceTypeRegistry, acl.RegistryName)
	}
}

// onConfig needs op on the path's subject, or on the REGISTRY for the global config
// or mode.
func onConfig(op kmsg.ACLOperation) rule {
	return func(s *Server, r *http.Request) error {
		if r.PathValue("subject") == "" {
			return onRegistry(op)(s, r)
		}
		return onSubject(op)(s, r)
	}
}

// authorize returns a 40301 error, and writes an audit record, when the request's
// principal may not perform op on the resource.
func (s *Server) authorize(r *http.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) error {
	if s.permitted(r, op, typ, name) {
		return nil
	}
	p := httpauth.Principal(r.Context())
	s.log.Info("authorization denied", "audit", "authz", "principal", p, "client", r.RemoteAddr,
		"api", "schema-registry", "method", r.Method, "path", r.URL.Path,
		"operation", strings.ToUpper(op.String()), "resource_type", acl.ResourceTypeName(typ), "resource", name)
	return errorf(RegistryForbidden, "%s is denied operation %s on %s %s", p, strings.ToUpper(op.String()),
		acl.ResourceTypeName(typ), name)
}

// permitted is authorize without the audit record, for what a request did not name
// (the subjects a listing leaves out), as Kafka filters Metadata silently.
func (s *Server) permitted(r *http.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if !s.authz.Enabled() {
		return true
	}
	var set *acl.Set
	if im := s.images.Current(); im != nil {
		set = im.ACLs
	}
	return s.authz.Authorize(set, httpauth.Principal(r.Context()), httpauth.ClientHost(r), op, typ, name)
}
