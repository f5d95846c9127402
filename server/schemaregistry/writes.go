package schemaregistry

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/shalelog/shale/metadata"
)

// schemaRequest is the body of POST /subjects/{s}/versions, POST /subjects/{s} and the
// compatibility checks.
type schemaRequest struct {
	Schema     string                     `json:"schema"`
	SchemaType string                     `json:"schemaType"`
	References []metadata.SchemaReference `json:"references"`
	// ID and Version are honoured in IMPORT mode only.
	ID      int32 `json:"id"`
	Version int32 `json:"version"`
}

// candidate is a request's schema, normalized and parsed with its references.
type candidate struct {
	schema metadata.RegistrySchema
	parsed *parsed
	// canon is a Protobuf schema's canonical descriptor (protoCanonical), what decides
	// whether it is a schema already stored.
	canon []byte
}

// dependencies resolves references, depth first, each once, a dependency's own
// dependencies before it.
func dependencies(reg *metadata.SchemaRegistry, refs []metadata.SchemaReference, seen map[string]bool, out *[]dependency) error {
	for _, ref := range refs {
		v := ref.Version
		sv, err := resolveVersion(reg, ref.Subject, v, false)
		if err != nil {
			return fmt.Errorf("reference %q to %s version %d: %w", ref.Name, ref.Subject, ref.Version, err)
		}
		key := fmt.Sprintf("%s\x00%d", ref.Subject, sv.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		sc := reg.Schema(sv.SchemaID)
		if sc == nil {
			return fmt.Errorf("reference %q: schema %d of %s version %d is missing", ref.Name, sv.SchemaID, ref.Subject, sv.Version)
		}
		if err := dependencies(reg, sc.References, seen, out); err != nil {
			return err
		}
		*out = append(*out, dependency{name: ref.Name, schema: sc.Schema})
	}
	return nil
}

func parseStored(reg *metadata.SchemaRegistry, sc *metadata.RegistrySchema) (*parsed, error) {
	var deps []dependency
	if err := dependencies(reg, sc.References, map[string]bool{}, &deps); err != nil {
		return nil, err
	}
	return parseSchema(sc.Type, sc.Schema, deps)
}

func (s *Server) candidate(r *http.Request, reg *metadata.SchemaRegistry) (*schemaRequest, *candidate, error) {
	var req schemaRequest
	if err := decode(r, &req); err != nil {
		return nil, nil, err
	}
	typ := strings.ToUpper(firstNonEmpty(req.SchemaType, TypeAvro))
	if !slices.Contains([]string{TypeAvro, TypeProtobuf, TypeJSON}, typ) {
		return nil, nil, errorf(metadata.RegistryInvalidSchema, "Invalid schema type %q", req.SchemaType)
	}
	if strings.TrimSpace(req.Schema) == "" {
		return nil, nil, errorf(metadata.RegistryInvalidSchema, "Empty schema")
	}
	c := &candidate{schema: metadata.RegistrySchema{Type: typ, Schema: normalize(typ, req.Schema), References: req.References}}
	var deps []dependency
	if err := dependencies(reg, req.References, map[string]bool{}, &deps); err != nil {
		return nil, nil, errorf(metadata.RegistryInvalidSchema, "Invalid schema: %v", err)
	}
	p, err := parseSchema(typ, req.Schema, deps)
	if err != nil {
		return nil, nil, errorf(metadata.RegistryInvalidSchema, "Invalid schema %s: %v", typ, err)
	}
	c.parsed = p
	if typ == TypeProtobuf {
		if c.canon, err = protoCanonical(p.proto); err != nil {
			return nil, nil, errorf(metadata.RegistryInvalidSchema, "Invalid schema %s: %v", typ, err)
		}
		text, err := protoStoredForm(req.Schema, deps, p, c.canon)
		if err != nil {
			s.log.Warn("a Protobuf descriptor is stored as sent, not as .proto source", "err", err)
		}
		c.schema.Schema = text
	}
	return &req, c, nil
}

// sameAs reports whether a subject's version has the candidate's schema: the same type,
// references and text or, for Protobuf, the same canonical descriptor (protoforms.go).
func (s *Server) sameAs(reg *metadata.SchemaRegistry, sv metadata.SubjectVersion, c *candidate) bool {
	return s.sameSchema(reg, reg.Schema(sv.SchemaID), c)
}

func (s *Server) sameSchema(reg *metadata.SchemaRegistry, sc *metadata.RegistrySchema, c *candidate) bool {
	if sc == nil || sc.Type != c.schema.Type || !slices.Equal(sc.References, c.schema.References) {
		return false
	}
	if sc.Schema == c.schema.Schema {
		return true
	}
	if sc.Type != TypeProtobuf || c.canon == nil {
		return false
	}
	canon, err := s.canon.canonOf(reg, sc)
	if err != nil {
		s.log.Warn("stored Protobuf schema no longer parses", "id", sc.ID, "err", err)
		return false
	}
	return bytes.Equal(canon, c.canon)
}

// adoptStoredText makes a Protobuf candidate that is the same schema as a stored one
// (sameSchema) carry that schema's stored text, the lowest id's if several, so that the
// controller, which compares text, gives it that schema's id rather than a new one. An
// import with an explicit id (IMPORT mode) only takes the text of the schema with that id.
func (s *Server) adoptStoredText(reg *metadata.SchemaRegistry, c *candidate, importID int32) {
	if c.schema.Type != TypeProtobuf {
		return
	}
	ids := reg.SchemaIDs()
	if importID != 0 {
		ids = []int32{importID}
	}
	for _, id := range ids {
		if sc := reg.Schema(id); s.sameSchema(reg, sc, c) {
			c.schema.Schema = sc.Schema
			return
		}
	}
}

// previous parses a subject's live versions, oldest first.
func previous(reg *metadata.SchemaRegistry, vs []metadata.SubjectVersion) ([]*parsed, error) {
	var out []*parsed
	for _, v := range vs {
		p, err := parseStored(reg, reg.Schema(v.SchemaID))
		if err != nil {
			return nil, errorf(metadata.RegistryInternalError, "stored schema %d no longer parses: %v", v.SchemaID, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// incompatible builds Confluent's 409 answer.
func incompatible(subject string, msgs []string) error {
	return errorf(metadata.RegistryIncompatibleSchema, "Schema being registered is incompatible with an earlier schema for subject %q, details: [%s]", subject, strings.Join(msgs, ", "))
}

// maxConflictRetries bounds how often a registration is checked again when another
// writer changed the subject between the check and the commit.
const maxConflictRetries = 10

func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	unlock, err := s.lockSubject(r.Context(), subject)
	if err != nil {
		return err
	}
	defer unlock()
	var req *schemaRequest
	var c *candidate
	for attempt := 0; ; attempt++ {
		reg := s.registry()
		var err error
		if req == nil {
			if req, c, err = s.candidate(r, reg); err != nil {
				return err
			}
		}
		s.adoptStoredText(reg, c, req.ID)
		level, mode := effective(reg, subject)
		switch {
		case mode == "READONLY":
			return errorf(metadata.RegistryOperationNotPermitted, "Subject %s is in read-only mode", subject)
		case (req.ID != 0 || req.Version != 0) && mode != "IMPORT":
			return errorf(metadata.RegistryOperationNotPermitted, "Overwrite new schema with id %d is not permitted outside IMPORT mode", req.ID)
		case req.ID < 0 || req.Version < 0:
			return errorf(metadata.RegistryInvalidSchema, "negative id or version")
		}
		live := reg.Versions(subject, false)
		for _, v := range live {
			if s.sameAs(reg, v, c) && (req.ID == 0 || req.ID == v.SchemaID) {
				return reply(w, 200, map[string]any{"id": v.SchemaID})
			}
		}
		op := &metadata.RegisterSchemaOp{Subject: subject, Schema: c.schema, Version: req.Version, ExpectLatest: -1}
		op.Schema.ID = req.ID
		// IMPORT mode copies another registry's history as it is: no checks.
		if mode != "IMPORT" {
			prev, err := previous(reg, live)
			if err != nil {
				return err
			}
			if msgs := checkLevel(level, c.parsed, prev); len(msgs) > 0 {
				return incompatible(subject, msgs)
			}
			op.ExpectLatest = 0
			if len(live) > 0 {
				op.ExpectLatest = live[len(live)-1].Version
			}
		}
		res, err := s.write(r.Context(), metadata.RegistryOp{Register: op})
		var re *metadata.RegistryError
		if errors.As(err, &re) && re.Code == metadata.RegistryConflict && attempt < maxConflictRetries {
			// Check again once this broker has seen what changed the subject.
			_ = s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
				vs := reg.Versions(subject, false)
				return len(vs) == 0 && op.ExpectLatest != 0 || len(vs) > 0 && vs[len(vs)-1].Version != op.ExpectLatest
			})
			continue
		}
		if errors.As(err, &re) && re.Code == metadata.RegistryConflict {
			// Not an incompatibility: the subject kept changing under the check.
			return errorf(metadata.RegistryStoreError, "subject %q kept changing during %d compatibility checks; retry", subject, attempt+1)
		}
		if err != nil {
			return err
		}
		if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
			v, ok := reg.Version(subject, res.Version)
			return ok && v.SchemaID == res.ID
		}); err != nil {
			return err
		}
		return reply(w, 200, map[string]any{"id": res.ID})
	}
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	reg := s.registry()
	deleted := boolParam(r, "deleted")
	vs := reg.Versions(subject, deleted)
	if len(vs) == 0 {
		return errorf(metadata.RegistrySubjectNotFound, "Subject '%s' not found.", subject)
	}
	_, c, err := s.candidate(r, reg)
	if err != nil {
		return err
	}
	for _, v := range slices.Backward(vs) {
		if s.sameAs(reg, v, c) {
			out := describe(reg, v)
			// A descriptor stored before Shale printed them is answered as text too.
			if out.Schema, err = formatted(reg, reg.Schema(v.SchemaID), ""); err != nil {
				return err
			}
			return reply(w, 200, out)
		}
	}
	return errorf(metadata.RegistrySchemaNotFound, "Schema not found")
}

func (s *Server) checkCompatibility(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	reg := s.registry()
	_, c, err := s.candidate(r, reg)
	if err != nil {
		return err
	}
	level, _ := effective(reg, subject)
	var msgs []string
	if vstr := r.PathValue("version"); vstr != "" {
		v, err := parseVersion(vstr)
		if err != nil {
			return err
		}
		sv, err := resolveVersion(reg, subject, v, false)
		if err != nil {
			return err
		}
		prev, err := previous(reg, []metadata.SubjectVersion{sv})
		if err != nil {
			return err
		}
		// Against one version, the transitive levels mean their direct ones.
		msgs = checkLevel(strings.TrimSuffix(level, "_TRANSITIVE"), c.parsed, prev)
	} else {
		prev, err := previous(reg, reg.Versions(subject, false))
		if err != nil {
			return err
		}
		msgs = checkLevel(level, c.parsed, prev)
	}
	out := map[string]any{"is_compatible": len(msgs) == 0}
	if boolParam(r, "verbose") {
		if msgs == nil {
			msgs = []string{}
		}
		out["messages"] = msgs
	}
	return reply(w, 200, out)
}

// configRequest is the body of PUT /config and PUT /mode.
type configRequest struct {
	Compatibility string `json:"compatibility"`
	Mode          string `json:"mode"`
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	reg := s.registry()
	c, _ := reg.Config(subject)
	level := c.Compatibility
	if level == "" {
		switch {
		case subject == "":
			level = defaultLevel
		case boolParam(r, "defaultToGlobal"):
			level, _ = effective(reg, "")
		default:
			return errorf(metadata.RegistrySubjectConfigNotFound, "Subject '%s' does not have subject-level compatibility configured", subject)
		}
	}
	return reply(w, 200, map[string]any{"compatibilityLevel": level})
}

func (s *Server) putConfig(w http.ResponseWriter, r *http.Request) error {
	var req configRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	level := strings.ToUpper(req.Compatibility)
	if !slices.Contains(levels, level) {
		return errorf(metadata.RegistryInvalidCompatibility, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
	}
	subject := r.PathValue("subject")
	if _, err := s.write(r.Context(), metadata.RegistryOp{SetConfig: &metadata.RegistryConfigOp{Subject: subject, Config: metadata.RegistryConfig{Compatibility: level}}}); err != nil {
		return err
	}
	if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
		c, _ := reg.Config(subject)
		return c.Compatibility == level
	}); err != nil {
		return err
	}
	return reply(w, 200, map[string]any{"compatibility": level})
}

func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	reg := s.registry()
	c, _ := reg.Config(subject)
	if subject != "" && c.Compatibility == "" && len(reg.Versions(subject, true)) == 0 {
		return errorf(metadata.RegistrySubjectNotFound, "Subject '%s' not found.", subject)
	}
	prev := firstNonEmpty(c.Compatibility, defaultLevel)
	if c.Compatibility != "" {
		if _, err := s.write(r.Context(), metadata.RegistryOp{DeleteConfig: &metadata.RegistryConfigOp{Subject: subject, Config: metadata.RegistryConfig{Compatibility: c.Compatibility}}}); err != nil {
			return err
		}
		if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
			c, _ := reg.Config(subject)
			return c.Compatibility == ""
		}); err != nil {
			return err
		}
	}
	return reply(w, 200, map[string]any{"compatibilityLevel": prev})
}

var modes = []string{"READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"}

func (s *Server) getMode(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	reg := s.registry()
	c, _ := reg.Config(subject)
	mode := c.Mode
	if mode == "" {
		switch {
		case subject == "":
			mode = defaultMode
		case boolParam(r, "defaultToGlobal"):
			_, mode = effective(reg, "")
		default:
			return errorf(metadata.RegistrySubjectModeNotFound, "Subject '%s' does not have subject-level mode configured", subject)
		}
	}
	return reply(w, 200, map[string]any{"mode": mode})
}

func (s *Server) putMode(w http.ResponseWriter, r *http.Request) error {
	var req configRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	mode := strings.ToUpper(req.Mode)
	if !slices.Contains(modes, mode) {
		return errorf(metadata.RegistryInvalidMode, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT.")
	}
	subject := r.PathValue("subject")
	reg := s.registry()
	// As Confluent: importing into a registry that has schemas could clash with the
	// imported ids, so it needs force=true.
	if mode == "IMPORT" && !boolParam(r, "force") {
		if subject == "" && len(reg.SubjectNames(true)) > 0 || subject != "" && len(reg.Versions(subject, true)) > 0 {
			return errorf(metadata.RegistryOperationNotPermitted, "Cannot import since found existing subjects")
		}
	}
	if _, err := s.write(r.Context(), metadata.RegistryOp{SetConfig: &metadata.RegistryConfigOp{Subject: subject, Config: metadata.RegistryConfig{Mode: mode}}}); err != nil {
		return err
	}
	if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
		c, _ := reg.Config(subject)
		return c.Mode == mode
	}); err != nil {
		return err
	}
	return reply(w, 200, map[string]any{"mode": mode})
}

func (s *Server) deleteMode(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	c, _ := s.registry().Config(subject)
	if c.Mode == "" {
		return errorf(metadata.RegistrySubjectModeNotFound, "Subject '%s' does not have subject-level mode configured", subject)
	}
	if _, err := s.write(r.Context(), metadata.RegistryOp{DeleteConfig: &metadata.RegistryConfigOp{Subject: subject, Config: metadata.RegistryConfig{Mode: c.Mode}}}); err != nil {
		return err
	}
	if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
		c, _ := reg.Config(subject)
		return c.Mode == ""
	}); err != nil {
		return err
	}
	return reply(w, 200, map[string]any{"mode": c.Mode})
}
