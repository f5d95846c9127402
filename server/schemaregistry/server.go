package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/httpauth"
)

// Images is where the registry reads its state: the broker's metadata cache.
type Images interface {
	Current() *metadata.Image
	Watch(ctx context.Context) <-chan *metadata.Image
}

// Options configure a Server.
type Options struct {
	Images Images
	Store  metadata.SchemaRegistryStore
	Log    *slog.Logger
	// WriteTimeout bounds a write and the wait until this broker's image shows it
	// (read-your-writes for the client that wrote); 0 means 10s.
	WriteTimeout time.Duration
	// Authorizer decides requests with the image's ACLs (authorize.go); nil allows
	// everything, as a broker without authorizer.class.name.
	Authorizer *acl.Authorizer
	// Middleware wraps the API's handler in Serve: authentication (httpauth), which puts
	// the principal the Authorizer decides for in the request's context.
	Middleware func(http.Handler) http.Handler
	// Metrics, when not nil, count and time the requests (metrics.go).
	Metrics *Metrics
}

// Server serves Confluent Schema Registry's REST API.
type Server struct {
	images  Images
	store   metadata.SchemaRegistryStore
	log     *slog.Logger
	timeout time.Duration
	authz   *acl.Authorizer
	mux     *http.ServeMux
	handler http.Handler
	metrics *Metrics
	// subjectLocks serialize this broker's registrations per subject (striped by hash):
	// racing writers on one broker would otherwise mostly refuse each other at the
	// controller and check again; only writers on different brokers still race.
	subjectLocks [64]chan struct{}
	// canon caches the canonical descriptors of stored Protobuf schemas.
	canon canonCache
}

// Defaults of a registry nobody configured, as Confluent's.
const (
	defaultLevel = LevelBackward
	defaultMode  = "READWRITE"
)

// contentType is what every response carries, Confluent's preferred media type.
const contentType = "application/vnd.schemaregistry.v1+json"

// New returns a Server; it serves nothing until Serve or Handler is used.
func New(o Options) *Server {
	s := &Server{images: o.Images, store: o.Store, log: o.Log, timeout: o.WriteTimeout, authz: o.Authorizer, mux: http.NewServeMux(), metrics: o.Metrics}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	for i := range s.subjectLocks {
		s.subjectLocks[i] = make(chan struct{}, 1)
	}
	const (
		read            = kmsg.ACLOperationRead
		write           = kmsg.ACLOperationWrite
		del             = kmsg.ACLOperationDelete
		describe        = kmsg.ACLOperationDescribe
		describeConfigs = kmsg.ACLOperationDescribeConfigs
		alterConfigs    = kmsg.ACLOperationAlterConfigs
	)
	type route struct {
		h    func(http.ResponseWriter, *http.Request) error
		need rule
	}
	for pattern, rt := range map[string]route{
		"GET /{$}": {func(w http.ResponseWriter, r *http.Request) error { return reply(w, http.StatusOK, map[string]any{}) }, anyone},
		// Filtered to the subjects the principal may describe.
		"GET /subjects":                                           {s.listSubjects, anyone},
		"GET /subjects/{subject}/versions":                        {s.listVersions, onSubject(describe)},
		"POST /subjects/{subject}/versions":                       {s.register, onSubject(write)},
		"GET /subjects/{subject}/versions/{version}":              {s.getVersion, onSubject(read)},
		"GET /subjects/{subject}/versions/{version}/schema":       {s.getVersionSchema, onSubject(read)},
		"GET /subjects/{subject}/versions/{version}/referencedby": {s.referencedBy, onRegistry(describe)},
		"DELETE /subjects/{subject}/versions/{version}":           {s.deleteVersion, onSubject(del)},
		"DELETE /subjects/{subject}":                              {s.deleteSubject, onSubject(del)},
		"POST /subjects/{subject}":                                {s.lookup, onSubject(read)},
		// READ on one of the subjects that have the schema, decided in the handler;
		// .../versions and .../subjects list only the subjects the principal may describe.
		"GET /schemas/ids/{id}":          {s.getSchema, anyone},
		"GET /schemas/ids/{id}/schema":   {s.getRawSchema, anyone},
		"GET /schemas/ids/{id}/versions": {s.getSchemaVersions, anyone},
		"GET /schemas/ids/{id}/subjects": {s.getSchemaSubjects, anyone},
		"GET /schemas/types":             {s.types, anyone},
		"GET /config":                    {s.getConfig, onConfig(describeConfigs)},
		"PUT /config":                    {s.putConfig, onConfig(alterConfigs)},
		"DELETE /config":                 {s.deleteConfig, onConfig(alterConfigs)},
		"GET /config/{subject}":          {s.getConfig, onConfig(describeConfigs)},
		"PUT /config/{subject}":          {s.putConfig, onConfig(alterConfigs)},
		"DELETE /config/{subject}":       {s.deleteConfig, onConfig(alterConfigs)},
		"GET /mode":                      {s.getMode, onConfig(describeConfigs)},
		"PUT /mode":                      {s.putMode, onConfig(alterConfigs)},
		"GET /mode/{subject}":            {s.getMode, onConfig(describeConfigs)},
		"PUT /mode/{subject}":            {s.putMode, onConfig(alterConfigs)},
		"DELETE /mode/{subject}":         {s.deleteMode, onConfig(alterConfigs)},
		"POST /compatibility/subjects/{subject}/versions/{version}": {s.checkCompatibility, onSubject(read)},
		"POST /compatibility/subjects/{subject}/versions":           {s.checkCompatibility, onSubject(read)},
	} {
		s.mux.Handle(pattern, s.wrap(func(w http.ResponseWriter, r *http.Request) error {
			if err := rt.need(s, r); err != nil {
				return err
			}
			return rt.h(w, r)
		}))
	}
	var h http.Handler = s.mux
	if o.Middleware != nil {
		h = o.Middleware(s.mux)
	}
	s.handler = s.metrics.instrument(s.mux, h)
	return s
}

// Handler returns the API's handler: behind Options.Middleware, and counted by Metrics
// outside it, so that refused authentications are counted too.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves the API on ln until ctx is done, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return httpauth.Serve(ctx, ln, s.handler, s.log, "schema registry")
}

// apiError is an error answered with Confluent's error body.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// status maps a Confluent error code to its HTTP status: the first three digits of a
// five-digit code (40401 -> 404), else the code itself (409).
func status(code int) int {
	if code >= 10000 {
		return code / 100
	}
	return code
}

func reply(w http.ResponseWriter, code int, body any) error {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	return json.NewEncoder(w).Encode(body)
}

func (s *Server) wrap(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			// A bug in a handler must not take the broker down.
			if p := recover(); p != nil {
				s.log.Error("schema registry handler panicked", "path", r.URL.Path, "panic", p)
				_ = reply(w, 500, map[string]any{"error_code": metadata.RegistryInternalError, "message": "internal error"})
			}
		}()
		err := h(w, r)
		if err == nil {
			return
		}
		var ae *apiError
		var re *metadata.RegistryError
		switch {
		case errors.As(err, &ae):
		case errors.As(err, &re):
			ae = &apiError{code: re.Code, msg: re.Message}
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			ae = &apiError{code: metadata.RegistryRequestForwardingFailed, msg: "the controller did not answer in time: " + err.Error()}
		default:
			ae = &apiError{code: metadata.RegistryStoreError, msg: err.Error()}
		}
		if status(ae.code) >= 500 {
			s.log.Warn("schema registry request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		_ = reply(w, status(ae.code), map[string]any{"error_code": ae.code, "message": ae.msg})
	})
}

var mediaTypes = []string{contentType, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream"}

// decode reads a JSON body in one of the registry's media types.
func decode(r *http.Request, into any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !slices.Contains(mediaTypes, mt) {
			return errorf(415, "unsupported content type %q", ct)
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return errorf(400, "read body: %v", err)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return errorf(422, "unrecognized request body: %v", err)
	}
	return nil
}

func boolParam(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

func (s *Server) registry() *metadata.SchemaRegistry {
	if im := s.images.Current(); im != nil && im.SchemaRegistry != nil {
		return im.SchemaRegistry
	}
	return &metadata.SchemaRegistry{}
}

// waitFor waits until this broker's image satisfies ok, so that a client reads its own
// write from the broker it wrote through.
func (s *Server) waitFor(ctx context.Context, ok func(*metadata.SchemaRegistry) bool) error {
	if ok(s.registry()) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ch := s.images.Watch(ctx)
	for {
		if ok(s.registry()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for this broker's metadata to show the write: %w", ctx.Err())
		}
	}
}

func (s *Server) write(ctx context.Context, op metadata.RegistryOp) (metadata.RegistryResult, error) {
	if s.store == nil {
		return metadata.RegistryResult{}, errorf(metadata.RegistryStoreError, "this node cannot write to the registry")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := s.store.AlterSchemaRegistry(ctx, op)
	if err != nil {
		return res, fmt.Errorf("schema registry write: %w", err)
	}
	return res, nil
}

// lockSubject takes the subject's lock, or fails when ctx ends first.
func (s *Server) lockSubject(ctx context.Context, subject string) (unlock func(), err error) {
	h := fnv.New32a()
	h.Write([]byte(subject))
	l := s.subjectLocks[h.Sum32()%uint32(len(s.subjectLocks))]
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another registration under %q: %w", subject, ctx.Err())
	}
}

// parseVersion parses a version path parameter: a positive number, "latest" or -1.
// latest is returned as -1.
func parseVersion(v string) (int32, error) {
	if v == "latest" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n == 0 || n < -1 {
		return 0, errorf(metadata.RegistryInvalidVersion, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)
	}
	return int32(n), nil
}

// resolveVersion finds a subject's version; latest (-1) is its latest live version.
func resolveVersion(reg *metadata.SchemaRegistry, subject string, v int32, deleted bool) (metadata.SubjectVersion, error) {
	all := reg.Versions(subject, deleted)
	if len(all) == 0 {
		return metadata.SubjectVersion{}, errorf(metadata.RegistrySubjectNotFound, "Subject '%s' not found.", subject)
	}
	if v == -1 {
		return all[len(all)-1], nil
	}
	sv, ok := reg.Version(subject, v)
	if !ok || (sv.Deleted && !deleted) {
		return metadata.SubjectVersion{}, errorf(metadata.RegistryVersionNotFound, "Version %d not found.", v)
	}
	return sv, nil
}

// effective returns a subject's compatibility level and mode, falling back to the
// global ones and then to the defaults.
func effective(reg *metadata.SchemaRegistry, subject string) (level, mode string) {
	sc, _ := reg.Config(subject)
	gc, _ := reg.Config("")
	level = firstNonEmpty(sc.Compatibility, gc.Compatibility, defaultLevel)
	mode = firstNonEmpty(sc.Mode, gc.Mode, defaultMode)
	return level, mode
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// schemaJSON is a schema in responses.
type schemaJSON struct {
	Subject    string                     `json:"subject,omitempty"`
	Version    int32                      `json:"version,omitempty"`
	ID         int32                      `json:"id,omitempty"`
	SchemaType string                     `json:"schemaType,omitempty"`
	References []metadata.SchemaReference `json:"references,omitempty"`
	Schema     string                     `json:"schema"`
}

func describe(reg *metadata.SchemaRegistry, sv metadata.SubjectVersion) schemaJSON {
	sc := reg.Schema(sv.SchemaID)
	out := schemaJSON{Subject: sv.Subject, Version: sv.Version, ID: sv.SchemaID}
	if sc != nil {
		out.Schema, out.References = sc.Schema, sc.References
		// Confluent leaves schemaType out for Avro, the default.
		if sc.Type != TypeAvro {
			out.SchemaType = sc.Type
		}
	}
	return out
}

func (s *Server) listSubjects(w http.ResponseWriter, r *http.Request) error {
	names := s.registry().SubjectNames(boolParam(r, "deleted"))
	if prefix := r.URL.Query().Get("subjectPrefix"); prefix != "" {
		names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, prefix) })
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !s.permitted(r, kmsg.ACLOperationDescribe, acl.ResourceTypeSubject, n) })
	if names == nil {
		names = []string{}
	}
	return reply(w, 200, names)
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	vs := s.registry().Versions(subject, boolParam(r, "deleted"))
	if len(vs) == 0 {
		return errorf(metadata.RegistrySubjectNotFound, "Subject '%s' not found.", subject)
	}
	out := make([]int32, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return reply(w, 200, out)
}

func (s *Server) versionOf(r *http.Request) (*metadata.SchemaRegistry, metadata.SubjectVersion, error) {
	v, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return nil, metadata.SubjectVersion{}, err
	}
	reg := s.registry()
	sv, err := resolveVersion(reg, r.PathValue("subject"), v, boolParam(r, "deleted"))
	return reg, sv, err
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) error {
	reg, sv, err := s.versionOf(r)
	if err != nil {
		return err
	}
	out := describe(reg, sv)
	if sc := reg.Schema(sv.SchemaID); sc != nil {
		if out.Schema, err = formatted(reg, sc, r.URL.Query().Get("format")); err != nil {
			return err
		}
	}
	return reply(w, 200, out)
}

func (s *Server) getVersionSchema(w http.ResponseWriter, r *http.Request) error {
	reg, sv, err := s.versionOf(r)
	if err != nil {
		return err
	}
	return rawSchema(w, r, reg, reg.Schema(sv.SchemaID))
}

// rawSchema writes a schema's text itself as the body, as Confluent does, in the format
// the request asks for.
func rawSchema(w http.ResponseWriter, r *http.Request, reg *metadata.SchemaRegistry, sc *metadata.RegistrySchema) error {
	if sc == nil {
		return errorf(metadata.RegistrySchemaNotFound, "Schema not found")
	}
	text, err := formatted(reg, sc, r.URL.Query().Get("format"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(200)
	_, err = io.WriteString(w, text)
	return err
}

func (s *Server) referencedBy(w http.ResponseWriter, r *http.Request) error {
	reg, sv, err := s.versionOf(r)
	if err != nil {
		return err
	}
	out := []int32{}
	for _, name := range reg.SubjectNames(false) {
		for _, v := range reg.Versions(name, false) {
			for _, ref := range reg.Schema(v.SchemaID).References {
				if ref.Subject == sv.Subject && ref.Version == sv.Version && !slices.Contains(out, v.SchemaID) {
					out = append(out, v.SchemaID)
				}
			}
		}
	}
	slices.Sort(out)
	return reply(w, 200, out)
}

func (s *Server) checkWritable(reg *metadata.SchemaRegistry, subject string) error {
	if _, mode := effective(reg, subject); mode == "READONLY" {
		return errorf(metadata.RegistryOperationNotPermitted, "Subject %s is in read-only mode", subject)
	}
	return nil
}

func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	v, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return err
	}
	reg := s.registry()
	if err := s.checkWritable(reg, subject); err != nil {
		return err
	}
	permanent := boolParam(r, "permanent")
	// latest is resolved here; the FSM refuses the delete if that version is gone by then.
	// An explicit version is looked up among soft-deleted ones too, so that deleting it
	// twice gets 40406 from the controller, as in Confluent.
	sv, err := resolveVersion(reg, subject, v, permanent || v != -1)
	if err != nil {
		return err
	}
	if _, err := s.write(r.Context(), metadata.RegistryOp{DeleteVersion: &metadata.DeleteVersionOp{Subject: subject, Version: sv.Version, Permanent: permanent}}); err != nil {
		return err
	}
	if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
		now, ok := reg.Version(subject, sv.Version)
		return !ok || (now.Deleted && !permanent)
	}); err != nil {
		return err
	}
	return reply(w, 200, sv.Version)
}

func (s *Server) deleteSubject(w http.ResponseWriter, r *http.Request) error {
	subject := r.PathValue("subject")
	if err := s.checkWritable(s.registry(), subject); err != nil {
		return err
	}
	permanent := boolParam(r, "permanent")
	res, err := s.write(r.Context(), metadata.RegistryOp{DeleteSubject: &metadata.DeleteSubjectOp{Subject: subject, Permanent: permanent}})
	if err != nil {
		return err
	}
	if err := s.waitFor(r.Context(), func(reg *metadata.SchemaRegistry) bool {
		return len(reg.Versions(subject, permanent)) == 0
	}); err != nil {
		return err
	}
	out := res.Versions
	if out == nil {
		out = []int32{}
	}
	return reply(w, 200, out)
}

func (s *Server) schemaByID(r *http.Request) (*metadata.SchemaRegistry, *metadata.RegistrySchema, []metadata.SubjectVersion, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id <= 0 {
		return nil, nil, nil, errorf(metadata.RegistrySchemaNotFound, "Schema %s not found", r.PathValue("id"))
	}
	reg := s.registry()
	sc := reg.Schema(int32(id))
	var uses []metadata.SubjectVersion
	deleted := boolParam(r, "deleted")
	for _, name := range reg.SubjectNames(true) {
		for _, v := range reg.Versions(name, true) {
			if v.SchemaID == int32(id) && (deleted || !v.Deleted) {
				uses = append(uses, v)
			}
		}
	}
	// A schema no version uses any more (all permanently deleted) is not served, as in
	// Confluent; a soft-deleted one still is, since records may carry its id.
	if sc == nil || !slices.ContainsFunc(allVersions(reg), func(v metadata.SubjectVersion) bool { return v.SchemaID == int32(id) }) {
		return nil, nil, nil, errorf(metadata.RegistrySchemaNotFound, "Schema %d not found", id)
	}
	if err := s.authorizeSchema(r, reg, int32(id)); err != nil {
		return nil, nil, nil, err
	}
	// The subjects and versions answered are those the principal may describe.
	uses = slices.DeleteFunc(uses, func(v metadata.SubjectVersion) bool {
		return !s.permitted(r, kmsg.ACLOperationDescribe, acl.ResourceTypeSubject, v.Subject)
	})
	return reg, sc, uses, nil
}

// authorizeSchema needs READ on at least one subject with a version (soft-deleted
// ones too, since records still carry their ids) of the schema, as Confluent's
// SCHEMA_READ and Redpanda do.
func (s *Server) authorizeSchema(r *http.Request, reg *metadata.SchemaRegistry, id int32) error {
	if !s.authz.Enabled() {
		return nil
	}
	var first string
	for _, v := range allVersions(reg) {
		if v.SchemaID != id {
			continue
		}
		if s.permitted(r, kmsg.ACLOperationRead, acl.ResourceTypeSubject, v.Subject) {
			return nil
		}
		if first == "" {
			first = v.Subject
		}
	}
	return s.authorize(r, kmsg.ACLOperationRead, acl.ResourceTypeSubject, first)
}

func allVersions(reg *metadata.SchemaRegistry) []metadata.SubjectVersion {
	var out []metadata.SubjectVersion
	for _, name := range reg.SubjectNames(true) {
		out = append(out, reg.Versions(name, true)...)
	}
	return out
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	reg, sc, _, err := s.schemaByID(r)
	if err != nil {
		return err
	}
	text, err := formatted(reg, sc, r.URL.Query().Get("format"))
	if err != nil {
		return err
	}
	out := schemaJSON{Schema: text, References: sc.References}
	if sc.Type != TypeAvro {
		out.SchemaType = sc.Type
	}
	return reply(w, 200, out)
}

func (s *Server) getRawSchema(w http.ResponseWriter, r *http.Request) error {
	reg, sc, _, err := s.schemaByID(r)
	if err != nil {
		return err
	}
	return rawSchema(w, r, reg, sc)
}

func (s *Server) getSchemaVersions(w http.ResponseWriter, r *http.Request) error {
	_, _, uses, err := s.schemaByID(r)
	if err != nil {
		return err
	}
	type sv struct {
		Subject string `json:"subject"`
		Version int32  `json:"version"`
	}
	out := []sv{}
	for _, u := range uses {
		out = append(out, sv{u.Subject, u.Version})
	}
	return reply(w, 200, out)
}

func (s *Server) getSchemaSubjects(w http.ResponseWriter, r *http.Request) error {
	_, _, uses, err := s.schemaByID(r)
	if err != nil {
		return err
	}
	out := []string{}
	for _, u := range uses {
		if !slices.Contains(out, u.Subject) {
			out = append(out, u.Subject)
		}
	}
	return reply(w, 200, out)
}

func (s *Server) types(w http.ResponseWriter, _ *http.Request) error {
	return reply(w, 200, []string{TypeJSON, TypeProtobuf, TypeAvro})
}
