package schemaregistry

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// compatCase is one rule: whether data written with writer reads with reader.
type compatCase struct {
	name           string
	reader, writer string
	ok             bool
}

func runCompat(t *testing.T, typ string, cases []compatCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseSchema(typ, tc.reader, nil)
			if err != nil {
				t.Fatalf("reader: %v", err)
			}
			w, err := parseSchema(typ, tc.writer, nil)
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			msgs := compatible(r, w)
			if (len(msgs) == 0) != tc.ok {
				t.Fatalf("compatible = %v (%v), want %v", len(msgs) == 0, msgs, tc.ok)
			}
		})
	}
}

func avroRecord(fields ...string) string {
	return `{"type":"record","name":"R","namespace":"n","fields":[` + strings.Join(fields, ",") + `]}`
}

func TestAvroCompatibility(t *testing.T) {
	a := `{"name":"a","type":"int"}`
	runCompat(t, TypeAvro, []compatCase{
		{"same", avroRecord(a), avroRecord(a), true},
		{"added field with default", avroRecord(a, `{"name":"b","type":"string","default":"x"}`), avroRecord(a), true},
		{"added field without default", avroRecord(a, `{"name":"b","type":"string"}`), avroRecord(a), false},
		{"removed field (reader ignores it)", avroRecord(a), avroRecord(a, `{"name":"b","type":"string"}`), true},
		{"int to long", avroRecord(`{"name":"a","type":"long"}`), avroRecord(a), true},
		{"int to float", avroRecord(`{"name":"a","type":"float"}`), avroRecord(a), true},
		{"int to double", avroRecord(`{"name":"a","type":"double"}`), avroRecord(a), true},
		{"long to float", `"float"`, `"long"`, true},
		{"float to double", `"double"`, `"float"`, true},
		{"long to int", avroRecord(a), avroRecord(`{"name":"a","type":"long"}`), false},
		{"double to float", `"float"`, `"double"`, false},
		{"string to bytes", `"bytes"`, `"string"`, true},
		{"bytes to string", `"string"`, `"bytes"`, true},
		{"string to int", `"int"`, `"string"`, false},
		{"renamed record", `{"type":"record","name":"S","fields":[]}`, `{"type":"record","name":"R","fields":[]}`, false},
		{"record alias", `{"type":"record","name":"S","aliases":["R"],"fields":[]}`, `{"type":"record","name":"R","fields":[]}`, true},
		{"field alias", avroRecord(`{"name":"z","aliases":["a"],"type":"int"}`), avroRecord(a), true},
		{"enum symbol added", `{"type":"enum","name":"E","symbols":["A","B","C"]}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, true},
		{"enum symbol removed", `{"type":"enum","name":"E","symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, false},
		{"enum symbol removed with default", `{"type":"enum","name":"E","symbols":["A"],"default":"A"}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, true},
		{"union branch added", `["null","int","string"]`, `["null","int"]`, true},
		{"union branch removed", `["null"]`, `["null","int"]`, false},
		{"type into union", `["null","int"]`, `"int"`, true},
		{"union into type", `"int"`, `["null","int"]`, false},
		{"union into promoted type", `"long"`, `["int","long"]`, true},
		{"array items promoted", `{"type":"array","items":"long"}`, `{"type":"array","items":"int"}`, true},
		{"array items narrowed", `{"type":"array","items":"int"}`, `{"type":"array","items":"long"}`, false},
		{"map values changed", `{"type":"map","values":"string"}`, `{"type":"map","values":"int"}`, false},
		{"fixed size changed", `{"type":"fixed","name":"F","size":4}`, `{"type":"fixed","name":"F","size":8}`, false},
		{"fixed same", `{"type":"fixed","name":"F","size":4}`, `{"type":"fixed","name":"F","size":4}`, true},
		{"nested field without default", avroRecord(`{"name":"n","type":{"type":"record","name":"N","fields":[{"name":"x","type":"int"}]}}`),
			avroRecord(`{"name":"n","type":{"type":"record","name":"N","fields":[]}}`), false},
		{"recursive record", `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"],"default":null}]}`,
			`{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"],"default":null}]}`, true},
	})
}

func TestProtobufCompatibility(t *testing.T) {
	msg := func(body string) string { return "syntax = \"proto3\";\npackage p;\n" + body }
	runCompat(t, TypeProtobuf, []compatCase{
		{"same", msg(`message M { string a = 1; }`), msg(`message M { string a = 1; }`), true},
		{"field added", msg(`message M { string a = 1; int32 b = 2; }`), msg(`message M { string a = 1; }`), true},
		{"field removed", msg(`message M { string a = 1; }`), msg(`message M { string a = 1; int32 b = 2; }`), true},
		{"field renamed", msg(`message M { string z = 1; }`), msg(`message M { string a = 1; }`), true},
		{"scalar type changed", msg(`message M { int32 a = 1; }`), msg(`message M { string a = 1; }`), false},
		{"kind changed", msg(`message M { N a = 1; } message N {}`), msg(`message M { string a = 1; } message N {}`), false},
		{"named type changed", msg(`message M { N a = 1; } message N {} message O {}`), msg(`message M { O a = 1; } message N {} message O {}`), false},
		{"label changed", msg(`message M { repeated string a = 1; }`), msg(`message M { string a = 1; }`), false},
		{"message removed", msg(`message M {}`), msg(`message M {} message N {}`), false},
		{"message added", msg(`message M {} message N {}`), msg(`message M {}`), true},
		{"package changed", "syntax = \"proto3\";\npackage q;\nmessage M {}", msg(`message M {}`), false},
		{"enum value added", msg(`enum E { A = 0; B = 1; } message M { E e = 1; }`), msg(`enum E { A = 0; } message M { E e = 1; }`), true},
		{"oneof added around a new field", msg(`message M { string a = 1; oneof o { int32 b = 2; } }`), msg(`message M { string a = 1; }`), true},
		{"field removed from oneof", msg(`message M { oneof o { int32 a = 1; } }`), msg(`message M { oneof o { int32 a = 1; string b = 2; } }`), false},
		{"one field moved into new oneof", msg(`message M { oneof o { int32 a = 1; } }`), msg(`message M { int32 a = 1; }`), true},
		{"two fields moved into new oneof", msg(`message M { oneof o { int32 a = 1; string b = 2; } }`), msg(`message M { int32 a = 1; string b = 2; }`), false},
		{"required field added", "syntax = \"proto2\";\npackage p;\nmessage M { optional string a = 1; required int32 b = 2; }", "syntax = \"proto2\";\npackage p;\nmessage M { optional string a = 1; }", false},
		{"nested message field changed", msg(`message M { message N { int32 x = 1; } N n = 1; }`), msg(`message M { message N { string x = 1; } N n = 1; }`), false},
	})
}

func TestJSONSchemaCompatibility(t *testing.T) {
	obj := func(props, extra string) string {
		return `{"type":"object","properties":{` + props + `}` + extra + `}`
	}
	runCompat(t, TypeJSON, []compatCase{
		{"same", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, ""), true},
		{"type changed", obj(`"a":{"type":"integer"}`, ""), obj(`"a":{"type":"string"}`, ""), false},
		{"type extended", obj(`"a":{"type":["string","null"]}`, ""), obj(`"a":{"type":"string"}`, ""), true},
		{"type narrowed", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":["string","null"]}`, ""), false},
		{"integer read as number", `{"type":"number"}`, `{"type":"integer"}`, true},
		{"number read as integer", `{"type":"integer"}`, `{"type":"number"}`, false},
		{"property added to open model", obj(`"a":{"type":"string"},"b":{"type":"integer"}`, ""), obj(`"a":{"type":"string"}`, ""), false},
		{"property added to closed model", obj(`"a":{"type":"string"},"b":{"type":"integer"}`, `,"additionalProperties":false`), obj(`"a":{"type":"string"}`, `,"additionalProperties":false`), true},
		{"property removed from open model", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, ""), true},
		{"property removed from closed model", obj(`"a":{"type":"string"}`, `,"additionalProperties":false`), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, `,"additionalProperties":false`), false},
		{"required added", obj(`"a":{"type":"string"}`, `,"required":["a"]`), obj(`"a":{"type":"string"}`, ""), false},
		{"required removed", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, `,"required":["a"]`), true},
		{"additionalProperties closed", obj(`"a":{"type":"string"}`, `,"additionalProperties":false`), obj(`"a":{"type":"string"}`, ""), false},
		{"additionalProperties opened", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, `,"additionalProperties":false`), true},
		{"enum extended", `{"enum":["A","B","C"]}`, `{"enum":["A","B"]}`, true},
		{"enum narrowed", `{"enum":["A"]}`, `{"enum":["A","B"]}`, false},
		{"maxLength decreased", `{"type":"string","maxLength":5}`, `{"type":"string","maxLength":10}`, false},
		{"maxLength increased", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, true},
		{"minimum increased", `{"type":"number","minimum":5}`, `{"type":"number","minimum":1}`, false},
		{"minimum added", `{"type":"number","minimum":5}`, `{"type":"number"}`, false},
		{"minimum removed", `{"type":"number"}`, `{"type":"number","minimum":5}`, true},
		{"array items changed", `{"type":"array","items":{"type":"integer"}}`, `{"type":"array","items":{"type":"string"}}`, false},
	})
}

func TestCheckLevel(t *testing.T) {
	p := func(s string) *parsed {
		x, err := parseSchema(TypeAvro, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	v1 := p(avroRecord(`{"name":"a","type":"int"}`))
	// v2 drops a (no default: old readers cannot read v2), v3 adds b with a default.
	v2 := p(avroRecord(`{"name":"b","type":"int","default":0}`))
	v3 := p(avroRecord(`{"name":"b","type":"int","default":0}`, `{"name":"c","type":"int","default":0}`))
	for _, tc := range []struct {
		level string
		ok    bool
	}{
		{LevelNone, true},
		{LevelBackward, true},
		{LevelBackwardTransitive, true},
		{LevelForward, true},
		// Against v1, v3 lacks a: a v1 reader has no default for a.
		{LevelForwardTransitive, false},
		{LevelFull, true},
		{LevelFullTransitive, false},
	} {
		if got := len(checkLevel(tc.level, v3, []*parsed{v1, v2})) == 0; got != tc.ok {
			t.Errorf("%s: compatible %v, want %v", tc.level, got, tc.ok)
		}
	}
}

func TestInvalidSchemas(t *testing.T) {
	for _, tc := range []struct{ typ, schema string }{
		{TypeAvro, `{"type":"record"}`},
		{TypeAvro, `not json`},
		{TypeProtobuf, `message M { string a = 1 }`},
		{TypeProtobuf, `syntax = "proto3"; message M { Unknown a = 1; }`},
		{TypeJSON, `{"type": 12}`},
		{TypeJSON, `{`},
		// The broker fetches nothing for a client.
		{TypeJSON, `{"$ref":"file:///etc/passwd"}`},
		{TypeJSON, `{"$ref":"http://127.0.0.1:1/x.json"}`},
		{TypeProtobuf, "syntax = \"proto3\";\nimport \"/etc/passwd\";\nmessage M {}"},
	} {
		if _, err := parseSchema(tc.typ, tc.schema, nil); err == nil {
			t.Errorf("%s %q parsed", tc.typ, tc.schema)
		}
	}
}

// A $ref to a local file that is a valid schema still does not load: the broker reads
// nothing on a client's behalf.
func TestJSONRefDoesNotReadFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseSchema(TypeJSON, `{"$ref":"file://`+path+`"}`, nil); err == nil {
		t.Fatal("a $ref to a local file was loaded")
	}
	if _, err := parseSchema(TypeJSON, `{"$ref":"s.json"}`, []dependency{{name: "s.json", schema: `{"type":"string"}`}}); err != nil {
		t.Fatalf("a $ref to a reference: %v", err)
	}
}

// TestProtobufBase64Descriptor: a schema sent as a base64 FileDescriptorProto (what
// confluent-kafka-python's ProtobufSerializer registers) is parsed, also as a reference,
// and checked against one written as source.
func TestProtobufBase64Descriptor(t *testing.T) {
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("user.proto"),
		Package: proto.String("shale.test"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("User"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name:     proto.String("name"),
				Number:   proto.Int32(1),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type:     descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
				JsonName: proto.String("name"),
			}},
		}},
	}
	raw, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	p, err := parseSchema(TypeProtobuf, b64, nil)
	if err != nil {
		t.Fatalf("base64 descriptor: %v", err)
	}
	if got := p.proto.Messages().ByName("User"); got == nil || got.Fields().ByName("name") == nil {
		t.Fatalf("parsed descriptor lacks shale.test.User.name: %v", p.proto)
	}
	same, err := parseSchema(TypeProtobuf, `syntax = "proto3"; package shale.test; message User { string name = 1; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := compatible(same, p); len(msgs) != 0 {
		t.Fatalf("source and descriptor of the same message: %v", msgs)
	}
	changed, err := parseSchema(TypeProtobuf, `syntax = "proto3"; package shale.test; message User { int64 name = 1; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := compatible(changed, p); len(msgs) == 0 {
		t.Fatal("string -> int64 passed against the descriptor")
	}
	// As a reference, imported by its reference name.
	user, err := parseSchema(TypeProtobuf, `syntax = "proto3"; import "user.proto"; message Team { shale.test.User lead = 1; }`,
		[]dependency{{name: "user.proto", schema: b64}})
	if err != nil {
		t.Fatalf("base64 descriptor as a reference: %v", err)
	}
	if user.proto.Messages().ByName("Team") == nil {
		t.Fatal("no Team")
	}
	if _, err := parseSchema(TypeProtobuf, "bm90IGEgZGVzY3JpcHRvcg", nil); err == nil {
		t.Fatal("base64 of garbage parsed")
	}
}
