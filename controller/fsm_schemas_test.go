package controller

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func regRec(r *pb.SchemaRegistryRecord) *pb.Record {
	return &pb.Record{Record: &pb.Record_SchemaRegistry{SchemaRegistry: r}}
}

func regRegister(subject, schema string, refs ...*pb.RegistrySchemaReference) *pb.Record {
	return regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_Register{Register: &pb.RegisterSchemaOp{
		Subject: subject, ExpectLatest: -1, Schema: &pb.RegistrySchema{SchemaType: "AVRO", Schema: schema, References: refs}}}})
}

func regCode(t *testing.T, res applyResult) int {
	t.Helper()
	if res.err == nil {
		return 0
	}
	var re *metadata.RegistryError
	if !errors.As(res.err, &re) {
		t.Fatalf("error %v is not a registry error", res.err)
	}
	return re.Code
}

func regResult(t *testing.T, res applyResult) metadata.RegistryResult {
	t.Helper()
	if res.err != nil {
		t.Fatalf("unexpected error %v", res.err)
	}
	r, _ := res.value.(metadata.RegistryResult)
	return r
}

// Ids are allocated by the FSM and never reused; an identical schema keeps its id, under
// the same subject (same version) or another (new version, same id).
func TestSchemaRegistryIDsAndVersions(t *testing.T) {
	h := newHarness(t)
	a := regResult(t, h.apply(regRegister("a-value", `"string"`)))
	if a.ID != 1 || a.Version != 1 {
		t.Fatalf("first schema %+v, want id 1 version 1", a)
	}
	if again := regResult(t, h.apply(regRegister("a-value", `"string"`))); !reflect.DeepEqual(again, a) {
		t.Fatalf("identical schema registered again: %+v, want %+v", again, a)
	}
	b := regResult(t, h.apply(regRegister("b-value", `"string"`)))
	if b.ID != 1 || b.Version != 1 {
		t.Fatalf("same schema under another subject %+v, want id 1 version 1", b)
	}
	c := regResult(t, h.apply(regRegister("a-value", `"long"`)))
	if c.ID != 2 || c.Version != 2 {
		t.Fatalf("second schema %+v, want id 2 version 2", c)
	}
	// Deleting every version of a subject permanently keeps the schema's id for it alone.
	h.apply(regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteSubject{DeleteSubject: &pb.DeleteSubjectOp{Subject: "a-value"}}}))
	h.apply(regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteSubject{DeleteSubject: &pb.DeleteSubjectOp{Subject: "a-value", Permanent: true}}}))
	if d := regResult(t, h.apply(regRegister("c-value", `"int"`))); d.ID != 3 {
		t.Fatalf("new schema after deletes got id %d, want 3", d.ID)
	}
	if e := regResult(t, h.apply(regRegister("c-value", `"long"`))); e.ID != 2 || e.Version != 2 {
		t.Fatalf("re-registered schema %+v, want its old id 2 at version 2", e)
	}
	reg := h.f.image().SchemaRegistry
	if reg.NextID != 4 || len(reg.Versions("a-value", true)) != 0 {
		t.Fatalf("registry %+v", reg)
	}
}

func TestSchemaRegistryDeletes(t *testing.T) {
	del := func(subject string, version int32, permanent bool) *pb.Record {
		if version == 0 {
			return regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteSubject{DeleteSubject: &pb.DeleteSubjectOp{Subject: subject, Permanent: permanent}}})
		}
		return regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteVersion{DeleteVersion: &pb.DeleteVersionOp{Subject: subject, Version: version, Permanent: permanent}}})
	}
	h := newHarness(t)
	h.apply(regRegister("s", `"int"`))
	h.apply(regRegister("s", `"long"`))
	h.apply(regRegister("r", `{"type":"record","name":"R","fields":[{"name":"x","type":"X"}]}`,
		&pb.RegistrySchemaReference{Name: "X", Subject: "s", Version: 2}))
	for _, tc := range []struct {
		name string
		rec  *pb.Record
		code int
	}{
		{"unknown subject", del("nope", 0, false), metadata.RegistrySubjectNotFound},
		{"unknown version", del("s", 9, false), metadata.RegistryVersionNotFound},
		{"permanent before soft", del("s", 1, true), metadata.RegistryVersionNotSoftDeleted},
		{"referenced version", del("s", 2, false), metadata.RegistryReferenceExists},
		{"referenced subject", del("s", 0, false), metadata.RegistryReferenceExists},
		{"soft delete", del("s", 1, false), 0},
		{"soft delete twice", del("s", 1, false), metadata.RegistryVersionSoftDeleted},
		{"permanent subject with live versions", del("r", 0, true), metadata.RegistrySubjectNotSoftDeleted},
		{"permanent version", del("s", 1, true), 0},
		{"gone", del("s", 1, false), metadata.RegistryVersionNotFound},
		{"referencing subject", del("r", 0, false), 0},
		{"referencing subject again", del("r", 0, false), metadata.RegistrySubjectSoftDeleted},
		{"now unreferenced", del("s", 2, false), 0},
		{"subject permanently", del("s", 0, true), 0},
		{"subject gone", del("s", 0, false), metadata.RegistrySubjectNotFound},
	} {
		if got := regCode(t, h.apply(tc.rec)); got != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.code)
		}
	}
	if got := h.f.image().SchemaRegistry.SubjectNames(true); !reflect.DeepEqual(got, []string{"r"}) {
		t.Fatalf("subjects %v, want [r]", got)
	}
	// A bad reference is refused.
	if got := regCode(t, h.apply(regRegister("t", `"x"`, &pb.RegistrySchemaReference{Name: "X", Subject: "s", Version: 1}))); got != metadata.RegistryInvalidSchema {
		t.Fatalf("dangling reference: code %d", got)
	}
}

func TestSchemaRegistryImportAndConflict(t *testing.T) {
	h := newHarness(t)
	imp := func(id, version int32, schema string) applyResult {
		return h.apply(regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_Register{Register: &pb.RegisterSchemaOp{
			Subject: "s", Version: version, ExpectLatest: -1, Schema: &pb.RegistrySchema{Id: id, SchemaType: "JSON", Schema: schema}}}}))
	}
	if r := regResult(t, imp(100, 5, `{}`)); r.ID != 100 || r.Version != 5 {
		t.Fatalf("import %+v", r)
	}
	if got := regCode(t, imp(100, 6, `{"type":"string"}`)); got != metadata.RegistryOperationNotPermitted {
		t.Fatalf("id reuse: code %d", got)
	}
	// Allocation continues past imported ids.
	if r := regResult(t, h.apply(regRegister("u", `"int"`))); r.ID != 101 {
		t.Fatalf("allocated id %d after import of 100, want 101", r.ID)
	}
	stale := regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_Register{Register: &pb.RegisterSchemaOp{
		Subject: "s", ExpectLatest: 4, Schema: &pb.RegistrySchema{SchemaType: "JSON", Schema: `{"type":"object"}`}}}})
	if got := regCode(t, h.apply(stale)); got != metadata.RegistryConflict {
		t.Fatalf("stale check: code %d", got)
	}
}

func TestSchemaRegistryConfigs(t *testing.T) {
	h := newHarness(t)
	set := func(subject, compat, mode string, clear bool) int {
		c := &pb.RegistryConfig{Subject: subject, Compatibility: compat, Mode: mode}
		r := &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_SetConfig{SetConfig: c}}
		if clear {
			r = &pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteConfig{DeleteConfig: c}}
		}
		return regCode(t, h.apply(regRec(r)))
	}
	for _, tc := range []struct {
		subject, compat, mode string
		clear                 bool
		code                  int
	}{
		{"", "FULL", "", false, 0},
		{"", "", "IMPORT", false, 0},
		{"s", "BOGUS", "", false, metadata.RegistryInvalidCompatibility},
		{"s", "", "BOGUS", false, metadata.RegistryInvalidMode},
		{"s", "FORWARD", "", true, metadata.RegistrySubjectConfigNotFound},
		{"s", "", "READONLY", true, metadata.RegistrySubjectModeNotFound},
		{"s", "NONE", "", false, 0},
		{"s", "", "READONLY", false, 0},
		{"s", "NONE", "", true, 0},
	} {
		if got := set(tc.subject, tc.compat, tc.mode, tc.clear); got != tc.code {
			t.Errorf("%+v: code %d", tc, got)
		}
	}
	reg := h.f.image().SchemaRegistry
	want := map[string]metadata.RegistryConfig{"": {Compatibility: "FULL", Mode: "IMPORT"}, "s": {Mode: "READONLY"}}
	if !reflect.DeepEqual(reg.Configs, want) {
		t.Fatalf("configs %+v, want %+v", reg.Configs, want)
	}
}

// The registry survives a snapshot, travels in image chunks, and a snapshot taken
// before a change is not changed by it.
func TestSchemaRegistrySnapshotAndChunks(t *testing.T) {
	h := newHarness(t)
	h.apply(regRegister("a", `"int"`))
	h.apply(regRegister("a", `"long"`))
	h.apply(regRegister("b", `{"type":"record","name":"B","fields":[{"name":"a","type":"A"}]}`, &pb.RegistrySchemaReference{Name: "A", Subject: "a", Version: 1}))
	h.apply(regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_DeleteVersion{DeleteVersion: &pb.DeleteVersionOp{Subject: "a", Version: 2}}}))
	h.apply(regRec(&pb.SchemaRegistryRecord{Op: &pb.SchemaRegistryRecord_SetConfig{SetConfig: &pb.RegistryConfig{Subject: "b", Compatibility: "NONE"}}}))
	want := h.f.image().SchemaRegistry
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.apply(regRegister("c", `"string"`))
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	g := newFSM(slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := g.image().SchemaRegistry; !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	var a imageAssembler
	var im *metadata.Image
	for _, c := range imageChunks(g.image(), nil, 100) {
		if im, err = a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	if im == nil || !reflect.DeepEqual(im.SchemaRegistry, want) {
		t.Fatalf("image from chunks %+v, want %+v", im, want)
	}
}
