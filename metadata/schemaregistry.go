package metadata

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// The built-in schema registry's state travels in the image like ACLs and quotas, so
// that every broker answers reads from its own copy; writes go through the controller
// (SchemaRegistryStore), which allocates the ids.

// SchemaRegistry is the registry's state. Immutable once in an image.
type SchemaRegistry struct {
	// Schemas by id; never removed, so an id is never given to another schema.
	Schemas map[int32]*RegistrySchema
	// Subjects holds each subject's versions in increasing version order, soft-deleted
	// ones included.
	Subjects map[string][]SubjectVersion
	// Configs by subject; "" is the registry's global config.
	Configs map[string]RegistryConfig
	// NextID is the id the next new schema gets.
	NextID int32
}

// RegistrySchema is one schema under its global id.
type RegistrySchema struct {
	ID         int32
	Type       string // AVRO, PROTOBUF or JSON
	Schema     string
	References []SchemaReference
}

// SchemaReference resolves an imported name to a subject's version.
type SchemaReference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int32  `json:"version"`
}

// SubjectVersion is one version of a subject.
type SubjectVersion struct {
	Subject  string
	Version  int32
	SchemaID int32
	Deleted  bool
}

// RegistryConfig is a compatibility level and mode; empty fields are not set.
type RegistryConfig struct {
	Compatibility string
	Mode          string
}

// Versions returns a subject's versions, soft-deleted ones only with deleted.
func (r *SchemaRegistry) Versions(subject string, deleted bool) []SubjectVersion {
	if r == nil {
		return nil
	}
	var out []SubjectVersion
	for _, v := range r.Subjects[subject] {
		if deleted || !v.Deleted {
			out = append(out, v)
		}
	}
	return out
}

// Version returns one version of a subject.
func (r *SchemaRegistry) Version(subject string, version int32) (SubjectVersion, bool) {
	if r == nil {
		return SubjectVersion{}, false
	}
	vs := r.Subjects[subject]
	i, ok := slices.BinarySearchFunc(vs, version, func(v SubjectVersion, n int32) int { return int(v.Version) - int(n) })
	if !ok {
		return SubjectVersion{}, false
	}
	return vs[i], true
}

// Schema returns a schema by id.
func (r *SchemaRegistry) Schema(id int32) *RegistrySchema {
	if r == nil {
		return nil
	}
	return r.Schemas[id]
}

// Config returns a subject's config ("" for the global one).
func (r *SchemaRegistry) Config(subject string) (RegistryConfig, bool) {
	if r == nil {
		return RegistryConfig{}, false
	}
	c, ok := r.Configs[subject]
	return c, ok
}

// Registry error codes are Confluent Schema Registry's.
const (
	RegistrySubjectNotFound         = 40401
	RegistryVersionNotFound         = 40402
	RegistrySchemaNotFound          = 40403
	RegistrySubjectSoftDeleted      = 40404
	RegistrySubjectNotSoftDeleted   = 40405
	RegistryVersionSoftDeleted      = 40406
	RegistryVersionNotSoftDeleted   = 40407
	RegistrySubjectConfigNotFound   = 40408
	RegistrySubjectModeNotFound     = 40409
	RegistryIncompatibleSchema      = 409
	RegistryInvalidSchema           = 42201
	RegistryInvalidVersion          = 42202
	RegistryInvalidCompatibility    = 42203
	RegistryInvalidMode             = 42204
	RegistryOperationNotPermitted   = 42205
	RegistryReferenceExists         = 42206
	RegistryInternalError           = 50001
	RegistryStoreError              = 50002
	RegistryRequestForwardingFailed = 50003
	// RegistryConflict is Shale's: the subject changed between the compatibility check
	// and the write; the broker checks again.
	RegistryConflict = 40900
)

// RegistryError is an error with a Confluent registry error code.
type RegistryError struct {
	Code    int
	Message string
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("%s (registry error %d)", e.Message, e.Code)
}

// RegistryErrorf builds a RegistryError.
func RegistryErrorf(code int, format string, args ...any) *RegistryError {
	return &RegistryError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// RegistryOp is one write to the registry; exactly one of its pointers is set.
type RegistryOp struct {
	Register      *RegisterSchemaOp
	DeleteSubject *DeleteSubjectOp
	DeleteVersion *DeleteVersionOp
	// SetConfig sets the non-empty fields of a subject's config ("" global).
	SetConfig *RegistryConfigOp
	// DeleteConfig clears the non-empty fields of a subject's config.
	DeleteConfig *RegistryConfigOp
}

// RegisterSchemaOp registers Schema (ID 0: allocated, else IMPORT's explicit id) under
// Subject at Version (0: next). ExpectLatest is the latest live version the caller
// checked compatibility against (0 none, -1 skip the check).
type RegisterSchemaOp struct {
	Subject      string
	Schema       RegistrySchema
	Version      int32
	ExpectLatest int32
}

// DeleteSubjectOp soft-deletes a subject's versions, or permanently removes them.
type DeleteSubjectOp struct {
	Subject   string
	Permanent bool
}

// DeleteVersionOp soft-deletes one version, or permanently removes a soft-deleted one.
type DeleteVersionOp struct {
	Subject   string
	Version   int32
	Permanent bool
}

// RegistryConfigOp names a subject's config fields.
type RegistryConfigOp struct {
	Subject string
	Config  RegistryConfig
}

// RegistryResult is a write's outcome.
type RegistryResult struct {
	ID       int32   // registered schema's id
	Version  int32   // registered version
	Versions []int32 // deleted versions
}

// SchemaRegistryStore is how a broker writes to the registry; errors are a
// *RegistryError when the registry refused the write, else transport failures.
type SchemaRegistryStore interface {
	AlterSchemaRegistry(ctx context.Context, op RegistryOp) (RegistryResult, error)
}

// SchemaIDs returns the schemas' ids, sorted.
func (r *SchemaRegistry) SchemaIDs() []int32 {
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(r.Schemas))
}

// SubjectNames returns the subjects, sorted; soft-deleted ones only with deleted.
func (r *SchemaRegistry) SubjectNames(deleted bool) []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(r.Subjects)) {
		if len(r.Versions(name, deleted)) > 0 {
			out = append(out, name)
		}
	}
	return out
}
