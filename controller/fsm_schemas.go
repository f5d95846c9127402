package controller

import (
	"cmp"
	"errors"
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// The built-in schema registry's state lives in the image (metadata.SchemaRegistry) so
// that brokers serve reads locally. Brokers parse schemas and check compatibility before
// proposing; the FSM only keeps the bookkeeping that must be decided in one place: ids
// (allocated here, never reused), versions, deletes and configs.

// Compatibility levels and modes the FSM accepts, as Confluent's.
var (
	registryLevels = []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}
	registryModes  = []string{"READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"}
	registryTypes  = []string{"AVRO", "PROTOBUF", "JSON"}
)

func registryErr(code int, format string, args ...any) applyResult {
	return applyResult{err: metadata.RegistryErrorf(code, format, args...)}
}

func (f *fsm) applySchemaRegistry(c *change, r *pb.SchemaRegistryRecord) applyResult {
	reg := c.base.SchemaRegistry
	switch op := r.Op.(type) {
	case *pb.SchemaRegistryRecord_Register:
		return registerSchema(c, reg, op.Register)
	case *pb.SchemaRegistryRecord_DeleteSubject:
		return deleteSubject(c, reg, op.DeleteSubject)
	case *pb.SchemaRegistryRecord_DeleteVersion:
		return deleteVersion(c, reg, op.DeleteVersion)
	case *pb.SchemaRegistryRecord_SetConfig:
		return setRegistryConfig(c, reg, op.SetConfig, false)
	case *pb.SchemaRegistryRecord_DeleteConfig:
		return setRegistryConfig(c, reg, op.DeleteConfig, true)
	default:
		return registryErr(metadata.RegistryInternalError, "empty schema registry record")
	}
}

func sameSchema(s *metadata.RegistrySchema, p *pb.RegistrySchema) bool {
	if s.Type != p.SchemaType || s.Schema != p.Schema || len(s.References) != len(p.References) {
		return false
	}
	for i, r := range s.References {
		q := p.References[i]
		if r.Name != q.Name || r.Subject != q.Subject || r.Version != q.Version {
			return false
		}
	}
	return true
}

func registerSchema(c *change, reg *metadata.SchemaRegistry, op *pb.RegisterSchemaOp) applyResult {
	s := op.Schema
	switch {
	case op.Subject == "":
		return registryErr(metadata.RegistryInvalidSchema, "empty subject")
	case s == nil || s.Schema == "":
		return registryErr(metadata.RegistryInvalidSchema, "empty schema")
	case !slices.Contains(registryTypes, s.SchemaType):
		return registryErr(metadata.RegistryInvalidSchema, "unknown schema type %q", s.SchemaType)
	case op.Version < 0 || s.Id < 0:
		return registryErr(metadata.RegistryInvalidVersion, "negative version or id")
	}
	all := reg.Versions(op.Subject, true)
	live := reg.Versions(op.Subject, false)
	// An identical schema already live under the subject is answered, not registered again.
	for _, v := range live {
		if sameSchema(reg.Schemas[v.SchemaID], s) && (s.Id == 0 || s.Id == v.SchemaID) && (op.Version == 0 || op.Version == v.Version) {
			return applyResult{value: metadata.RegistryResult{ID: v.SchemaID, Version: v.Version}}
		}
	}
	latest := int32(0)
	if len(live) > 0 {
		latest = live[len(live)-1].Version
	}
	if op.ExpectLatest >= 0 && op.ExpectLatest != latest {
		return registryErr(metadata.RegistryConflict, "subject %q changed during the compatibility check", op.Subject)
	}
	for _, ref := range s.References {
		v, ok := reg.Version(ref.Subject, ref.Version)
		if !ok || v.Deleted {
			return registryErr(metadata.RegistryInvalidSchema, "reference %q: subject %q has no version %d", ref.Name, ref.Subject, ref.Version)
		}
	}
	next := max(registryNextID(reg), 1)
	id := s.Id
	newSchema := false
	if id != 0 {
		if old := reg.Schema(id); old != nil && !sameSchema(old, s) {
			return registryErr(metadata.RegistryOperationNotPermitted, "schema id %d is already used by another schema", id)
		} else if old == nil {
			newSchema = true
		}
	} else {
		// Ids are sorted so that every controller picks the same one.
		for _, sid := range reg.SchemaIDs() {
			if sameSchema(reg.Schemas[sid], s) {
				id = sid
				break
			}
		}
		if id == 0 {
			id, newSchema = next, true
		}
	}
	version := op.Version
	if version == 0 {
		version = 1
		if len(all) > 0 {
			version = all[len(all)-1].Version + 1
		}
	} else if v, ok := reg.Version(op.Subject, version); ok && v.SchemaID != id {
		return registryErr(metadata.RegistryOperationNotPermitted, "subject %q already has version %d with another schema", op.Subject, version)
	}
	d := &pb.SchemaRegistryDelta{
		Versions: []*pb.RegistrySubjectVersion{{Subject: op.Subject, Version: version, SchemaId: id}},
	}
	if newSchema {
		ns := &pb.RegistrySchema{Id: id, SchemaType: s.SchemaType, Schema: s.Schema, References: s.References}
		d.Schemas = []*pb.RegistrySchema{ns}
		d.NextId = max(next, id+1)
	}
	c.registry = d
	return applyResult{value: metadata.RegistryResult{ID: id, Version: version}}
}

// referencedBy returns a live version that references subject (at version, or any when
// 0), or false.
func referencedBy(reg *metadata.SchemaRegistry, subject string, version int32) (metadata.SubjectVersion, bool) {
	for _, name := range slices.Sorted(maps.Keys(reg.Subjects)) {
		for _, v := range reg.Subjects[name] {
			if v.Deleted {
				continue
			}
			for _, ref := range reg.Schemas[v.SchemaID].References {
				if ref.Subject == subject && (version == 0 || ref.Version == version) {
					return v, true
				}
			}
		}
	}
	return metadata.SubjectVersion{}, false
}

func deleteSubject(c *change, reg *metadata.SchemaRegistry, op *pb.DeleteSubjectOp) applyResult {
	all := reg.Versions(op.Subject, true)
	if len(all) == 0 {
		return registryErr(metadata.RegistrySubjectNotFound, "subject %q not found", op.Subject)
	}
	live := reg.Versions(op.Subject, false)
	if ref, ok := referencedBy(reg, op.Subject, 0); ok && len(live) > 0 {
		return registryErr(metadata.RegistryReferenceExists, "subject %q is referenced by %q version %d", op.Subject, ref.Subject, ref.Version)
	}
	d := &pb.SchemaRegistryDelta{}
	var versions []int32
	if op.Permanent {
		if len(live) > 0 {
			return registryErr(metadata.RegistrySubjectNotSoftDeleted, "subject %q was not deleted first before being permanently deleted", op.Subject)
		}
		for _, v := range all {
			d.Removed = append(d.Removed, &pb.RegistrySubjectVersion{Subject: v.Subject, Version: v.Version})
			versions = append(versions, v.Version)
		}
		// A permanently deleted subject loses its config and mode too, as in Confluent.
		if _, ok := reg.Config(op.Subject); ok {
			d.Configs = []*pb.RegistryConfig{{Subject: op.Subject}}
		}
	} else {
		if len(live) == 0 {
			return registryErr(metadata.RegistrySubjectSoftDeleted, "subject %q was soft deleted; set permanent=true to delete permanently", op.Subject)
		}
		for _, v := range live {
			d.Versions = append(d.Versions, &pb.RegistrySubjectVersion{Subject: v.Subject, Version: v.Version, SchemaId: v.SchemaID, Deleted: true})
			versions = append(versions, v.Version)
		}
	}
	c.registry = d
	return applyResult{value: metadata.RegistryResult{Versions: versions}}
}

func deleteVersion(c *change, reg *metadata.SchemaRegistry, op *pb.DeleteVersionOp) applyResult {
	if len(reg.Versions(op.Subject, true)) == 0 {
		return registryErr(metadata.RegistrySubjectNotFound, "subject %q not found", op.Subject)
	}
	v, ok := reg.Version(op.Subject, op.Version)
	if !ok {
		return registryErr(metadata.RegistryVersionNotFound, "subject %q has no version %d", op.Subject, op.Version)
	}
	d := &pb.SchemaRegistryDelta{}
	if op.Permanent {
		if !v.Deleted {
			return registryErr(metadata.RegistryVersionNotSoftDeleted, "version %d of subject %q was not deleted first before being permanently deleted", op.Version, op.Subject)
		}
		d.Removed = []*pb.RegistrySubjectVersion{{Subject: v.Subject, Version: v.Version}}
	} else {
		if v.Deleted {
			return registryErr(metadata.RegistryVersionSoftDeleted, "version %d of subject %q was soft deleted; set permanent=true to delete permanently", op.Version, op.Subject)
		}
		if ref, ok := referencedBy(reg, op.Subject, op.Version); ok {
			return registryErr(metadata.RegistryReferenceExists, "version %d of subject %q is referenced by %q version %d", op.Version, op.Subject, ref.Subject, ref.Version)
		}
		d.Versions = []*pb.RegistrySubjectVersion{{Subject: v.Subject, Version: v.Version, SchemaId: v.SchemaID, Deleted: true}}
	}
	c.registry = d
	return applyResult{value: metadata.RegistryResult{Versions: []int32{v.Version}}}
}

func setRegistryConfig(c *change, reg *metadata.SchemaRegistry, op *pb.RegistryConfig, clear bool) applyResult {
	if op.Compatibility != "" && !slices.Contains(registryLevels, op.Compatibility) {
		return registryErr(metadata.RegistryInvalidCompatibility, "invalid compatibility level %q", op.Compatibility)
	}
	if op.Mode != "" && !slices.Contains(registryModes, op.Mode) {
		return registryErr(metadata.RegistryInvalidMode, "invalid mode %q", op.Mode)
	}
	cur, _ := reg.Config(op.Subject)
	if clear {
		if op.Compatibility != "" {
			if cur.Compatibility == "" {
				return registryErr(metadata.RegistrySubjectConfigNotFound, "subject %q has no compatibility level", op.Subject)
			}
			cur.Compatibility = ""
		}
		if op.Mode != "" {
			if cur.Mode == "" {
				return registryErr(metadata.RegistrySubjectModeNotFound, "subject %q has no mode", op.Subject)
			}
			cur.Mode = ""
		}
	} else {
		cur.Compatibility = cmp.Or(op.Compatibility, cur.Compatibility)
		cur.Mode = cmp.Or(op.Mode, cur.Mode)
	}
	c.registry = &pb.SchemaRegistryDelta{Configs: []*pb.RegistryConfig{{Subject: op.Subject, Compatibility: cur.Compatibility, Mode: cur.Mode}}}
	return applyResult{}
}

// applyRegistryDelta returns old with d applied; old is left untouched (nil: empty).
func applyRegistryDelta(old *metadata.SchemaRegistry, d *pb.SchemaRegistryDelta) *metadata.SchemaRegistry {
	out := &metadata.SchemaRegistry{}
	if old != nil {
		*out = *old
	}
	if len(d.Schemas) > 0 {
		out.Schemas = maps.Clone(out.Schemas)
		if out.Schemas == nil {
			out.Schemas = map[int32]*metadata.RegistrySchema{}
		}
		for _, s := range d.Schemas {
			ns := &metadata.RegistrySchema{ID: s.Id, Type: s.SchemaType, Schema: s.Schema}
			for _, r := range s.References {
				ns.References = append(ns.References, metadata.SchemaReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
			}
			out.Schemas[s.Id] = ns
		}
	}
	if len(d.Versions) > 0 || len(d.Removed) > 0 {
		out.Subjects = maps.Clone(out.Subjects)
		if out.Subjects == nil {
			out.Subjects = map[string][]metadata.SubjectVersion{}
		}
		cloned := map[string]bool{}
		edit := func(subject string) []metadata.SubjectVersion {
			if !cloned[subject] {
				out.Subjects[subject] = slices.Clone(out.Subjects[subject])
				cloned[subject] = true
			}
			return out.Subjects[subject]
		}
		byVersion := func(v metadata.SubjectVersion, n int32) int { return cmp.Compare(v.Version, n) }
		for _, v := range d.Removed {
			vs := edit(v.Subject)
			if i, ok := slices.BinarySearchFunc(vs, v.Version, byVersion); ok {
				vs = slices.Delete(vs, i, i+1)
			}
			if len(vs) == 0 {
				delete(out.Subjects, v.Subject)
			} else {
				out.Subjects[v.Subject] = vs
			}
		}
		for _, v := range d.Versions {
			sv := metadata.SubjectVersion{Subject: v.Subject, Version: v.Version, SchemaID: v.SchemaId, Deleted: v.Deleted}
			vs := edit(v.Subject)
			if i, ok := slices.BinarySearchFunc(vs, v.Version, byVersion); ok {
				vs[i] = sv
			} else {
				vs = slices.Insert(vs, i, sv)
			}
			out.Subjects[v.Subject] = vs
		}
	}
	if len(d.Configs) > 0 {
		out.Configs = maps.Clone(out.Configs)
		if out.Configs == nil {
			out.Configs = map[string]metadata.RegistryConfig{}
		}
		for _, c := range d.Configs {
			if c.Compatibility == "" && c.Mode == "" {
				delete(out.Configs, c.Subject)
			} else {
				out.Configs[c.Subject] = metadata.RegistryConfig{Compatibility: c.Compatibility, Mode: c.Mode}
			}
		}
	}
	if d.NextId != 0 {
		out.NextID = d.NextId
	}
	return out
}

// registryToPB returns the registry's whole state as a delta from an empty one, sorted.
func registryToPB(r *metadata.SchemaRegistry) *pb.SchemaRegistryDelta {
	d := &pb.SchemaRegistryDelta{NextId: r.NextID}
	for _, id := range r.SchemaIDs() {
		s := r.Schemas[id]
		ps := &pb.RegistrySchema{Id: s.ID, SchemaType: s.Type, Schema: s.Schema}
		for _, ref := range s.References {
			ps.References = append(ps.References, &pb.RegistrySchemaReference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version})
		}
		d.Schemas = append(d.Schemas, ps)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Subjects)) {
		for _, v := range r.Subjects[name] {
			d.Versions = append(d.Versions, &pb.RegistrySubjectVersion{Subject: v.Subject, Version: v.Version, SchemaId: v.SchemaID, Deleted: v.Deleted})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Configs)) {
		c := r.Configs[name]
		d.Configs = append(d.Configs, &pb.RegistryConfig{Subject: name, Compatibility: c.Compatibility, Mode: c.Mode})
	}
	return d
}

func registryOpToPB(op metadata.RegistryOp) (*pb.SchemaRegistryRecord, error) {
	cfg := func(o *metadata.RegistryConfigOp) *pb.RegistryConfig {
		return &pb.RegistryConfig{Subject: o.Subject, Compatibility: o.Config.Compatibility, Mode: o.Config.Mode}
	}
	switch {
	case op.Register != nil:
		r := op.Register
		s := &pb.RegistrySchema{Id: r.Schema.ID, SchemaType: r.Schema.Type, Schema: r.Schema.Schema}
		for _, ref := range r.Schema.References {
			s.References = append(s.References, &pb.RegistrySchemaReference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version})
		}
		return &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_Register{Register: &pb.RegisterSchemaOp{
			Subject: r.Subject, Schema: s, Version: r.Version, ExpectLatest: r.ExpectLatest}}}, nil
	case op.DeleteSubject != nil:
		return &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteSubject{DeleteSubject: &pb.DeleteSubjectOp{
			Subject: op.DeleteSubject.Subject, Permanent: op.DeleteSubject.Permanent}}}, nil
	case op.DeleteVersion != nil:
		return &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteVersion{DeleteVersion: &pb.DeleteVersionOp{
			Subject: op.DeleteVersion.Subject, Version: op.DeleteVersion.Version, Permanent: op.DeleteVersion.Permanent}}}, nil
	case op.SetConfig != nil:
		return &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_SetConfig{SetConfig: cfg(op.SetConfig)}}, nil
	case op.DeleteConfig != nil:
		return &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteConfig{DeleteConfig: cfg(op.DeleteConfig)}}, nil
	}
	return nil, errors.New("empty schema registry operation")
}

func registryNextID(r *metadata.SchemaRegistry) int32 {
	if r == nil {
		return 0
	}
	return r.NextID
}
