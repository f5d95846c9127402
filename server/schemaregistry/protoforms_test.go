package schemaregistry

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/metadata"
)

// compileProto compiles .proto sources with protocompile alone, not this package's
// resolver: main is the file compiled, srcs has it and its imports.
func compileProto(t *testing.T, main string, srcs map[string]string) linker.File {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs)})}
	files, err := c.Compile(context.Background(), main)
	if err != nil {
		t.Fatalf("protocompile %s: %v\n%s", main, err, srcs[main])
	}
	return files[0]
}

// pythonDescriptor is what confluent-kafka-python's ProtobufSerializer registers for a
// file: the base64 of the FileDescriptorProto protoc embeds in generated code, named as
// the file, with no source info and no json_name.
func pythonDescriptor(t *testing.T, name, text string, imports map[string]string) string {
	t.Helper()
	srcs := map[string]string{name: text}
	for k, v := range imports {
		srcs[k] = v
	}
	fd := protodesc.ToFileDescriptorProto(compileProto(t, name, srcs))
	fd.SourceCodeInfo = nil
	var strip func([]*descriptorpb.DescriptorProto)
	strip = func(ms []*descriptorpb.DescriptorProto) {
		for _, m := range ms {
			for _, f := range m.Field {
				f.JsonName = nil
			}
			strip(m.NestedType)
		}
	}
	strip(fd.MessageType)
	raw, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// canonicalOf compiles text (source or descriptor) with its imports by this package's
// parser and returns its canonical descriptor.
func canonicalOf(t *testing.T, text string, deps []dependency) []byte {
	t.Helper()
	p, err := parseSchema(TypeProtobuf, text, deps)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	c, err := protoCanonical(p.proto)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	protoCommon = `syntax = "proto3";
package common;
// Money in cents.
message Money { int64 cents = 1; string currency_code = 2; }
`
	protoOrder = `syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
message Order {
  common.Money total = 1;
  google.protobuf.Timestamp placed_at = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  oneof payment { string card_token = 5; bool cash = 6; }
  optional string note = 7;
  message Line { string sku = 1; uint32 quantity = 2; }
  enum Status { STATUS_UNSPECIFIED = 0; PLACED = 1; SHIPPED = 2; }
  Status status = 8;
}
`
	protoLegacy = `syntax = "proto2";
package legacy;
message Reading {
  required int64 at_ms = 1;
  optional double value = 2 [default = 1.5];
  repeated sint32 samples = 3 [packed = true];
  extensions 100 to 199;
}
extend Reading { optional string site_name = 100; }
`
)

// TestProtobufTextAndDescriptorForms: a Protobuf schema sent as .proto text and as the
// base64 FileDescriptorProto confluent-kafka-python sends is one schema with one id,
// whichever comes first and under whichever subject; the registry serves it as .proto
// text that protocompile compiles, and as a descriptor on ?format=serialized.
func TestProtobufTextAndDescriptorForms(t *testing.T) {
	commonRef := []map[string]any{{"name": "common.proto", "subject": "common", "version": 1}}
	cases := []struct {
		name string
		// file is the name the client's descriptor has; text the schema as source.
		file, text string
		// refs are the schema's references, to subject "common" (registered first).
		refs []map[string]any
		// descriptorFirst registers the descriptor form before the text form.
		descriptorFirst bool
		// sameSubject registers both under one subject; else each under its own.
		sameSubject bool
		// reformatted is a second text of the same schema: other whitespace and comments.
		reformatted string
	}{
		{name: "proto3 text first, one subject", file: "common2.proto", text: protoCommon, sameSubject: true,
			reformatted: "syntax=\"proto3\";package common;\n/* other words */ message Money{int64 cents=1;string currency_code=2;}"},
		{name: "proto3 descriptor first, two subjects", file: "money.proto", text: protoCommon, descriptorFirst: true},
		{name: "proto2 with extensions and defaults, descriptor first", file: "legacy/reading.proto", text: protoLegacy, descriptorFirst: true, sameSubject: true},
		{name: "references and well-known imports, text first", file: "order.proto", text: protoOrder, refs: commonRef},
		{name: "references and well-known imports, descriptor first", file: "order.proto", text: protoOrder, refs: commonRef, descriptorFirst: true, sameSubject: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRegistry(t)
			// The referenced file, itself registered as a descriptor, as the Python
			// serializer registers the files a schema imports.
			commonDesc := pythonDescriptor(t, "common.proto", protoCommon, nil)
			r.do("POST", "/subjects/common/versions", map[string]any{"schemaType": "PROTOBUF", "schema": commonDesc}, 200)
			imports := map[string]string{"common.proto": protoCommon}
			var deps []dependency
			if tc.refs != nil {
				deps = []dependency{{name: "common.proto", schema: protoCommon}}
			}
			desc := pythonDescriptor(t, tc.file, tc.text, imports)
			forms := []struct{ label, schema string }{{"text", tc.text}, {"descriptor", desc}}
			if tc.descriptorFirst {
				forms[0], forms[1] = forms[1], forms[0]
			}
			if tc.reformatted != "" {
				forms = append(forms, struct{ label, schema string }{"reformatted text", tc.reformatted})
			}
			var id float64
			subjects := map[string]bool{}
			for j, f := range forms {
				subject := fmt.Sprintf("case%d-value", i)
				if !tc.sameSubject {
					subject = fmt.Sprintf("case%d-%d-value", i, j)
				}
				subjects[subject] = true
				body := map[string]any{"schemaType": "PROTOBUF", "schema": f.schema, "references": tc.refs}
				got := r.do("POST", "/subjects/"+subject+"/versions", body, 200).(map[string]any)["id"].(float64)
				if j == 0 {
					id = got
				} else if got != id {
					t.Fatalf("the %s form got id %v, the %s form %v", f.label, got, forms[0].label, id)
				}
				// Lookup finds it in either form.
				for _, g := range forms[:j+1] {
					look := r.do("POST", "/subjects/"+subject, map[string]any{"schemaType": "PROTOBUF", "schema": g.schema, "references": tc.refs}, 200).(map[string]any)
					if look["id"].(float64) != id {
						t.Fatalf("lookup of the %s form under %s: %v, want id %v", g.label, subject, look, id)
					}
				}
			}
			for subject := range subjects {
				if vs := js(r.do("GET", "/subjects/"+subject+"/versions", nil, 200)); vs != "[1]" {
					t.Fatalf("%s has versions %s, want one", subject, vs)
				}
			}
			want := canonicalOf(t, tc.text, deps)

			// Served as .proto text that protocompile compiles to the same schema.
			byID := r.do("GET", fmt.Sprintf("/schemas/ids/%v", id), nil, 200).(map[string]any)
			text := byID["schema"].(string)
			if descriptorFromBase64(text) != nil || !strings.Contains(text, "syntax") {
				t.Fatalf("/schemas/ids/%v serves %q, want .proto text", id, text)
			}
			srcs := map[string]string{"main.proto": text, "common.proto": protoCommon}
			compiled := compileProto(t, "main.proto", srcs)
			got, err := protoCanonical(compiled)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("the served text compiles to another schema:\n%s", text)
			}
			if raw := r.do("GET", fmt.Sprintf("/schemas/ids/%v/schema", id), nil, 200); raw != text {
				t.Fatalf("/schema serves %v, /schemas/ids %q", raw, text)
			}

			// ?format=serialized: the base64 FileDescriptorProto, on every path that
			// serves a schema, which decodes to the same schema.
			ser := r.do("GET", fmt.Sprintf("/schemas/ids/%v?format=serialized", id), nil, 200).(map[string]any)
			b64 := ser["schema"].(string)
			fd := descriptorFromBase64(b64)
			if fd == nil || fd.GetName() != serializedFileName {
				t.Fatalf("format=serialized serves %q, want a FileDescriptorProto named %q", b64, serializedFileName)
			}
			if ser["schemaType"] != "PROTOBUF" || js(ser["references"]) != js(byID["references"]) {
				t.Fatalf("format=serialized answer %v", ser)
			}
			if got := canonicalOf(t, b64, deps); string(got) != string(want) {
				t.Fatalf("format=serialized decodes to another schema: %v", fd)
			}
			var subject string
			for subject = range subjects {
				break
			}
			for _, path := range []string{
				fmt.Sprintf("/schemas/ids/%v/schema?format=serialized", id),
				"/subjects/" + subject + "/versions/1/schema?format=serialized",
			} {
				if raw := r.do("GET", path, nil, 200); raw != b64 {
					t.Fatalf("%s: %v, want %s", path, raw, b64)
				}
			}
			if v := r.do("GET", "/subjects/"+subject+"/versions/latest?format=serialized", nil, 200).(map[string]any); v["schema"] != b64 {
				t.Fatalf("versions/latest?format=serialized: %v", v)
			}
			if v := r.do("GET", "/subjects/"+subject+"/versions/1", nil, 200).(map[string]any); v["schema"] != text {
				t.Fatalf("versions/1: %v, want the text", v)
			}
			// The referenced file, registered as a descriptor, is served as text too.
			if ct := r.do("GET", "/subjects/common/versions/1/schema", nil, 200).(string); descriptorFromBase64(ct) != nil {
				t.Fatalf("the reference is served as %q", ct)
			}
		})
	}
}

// TestSerializedFormatOtherTypes: ?format= does not change Avro and JSON schemas, and an
// unknown format serves a Protobuf schema as text, as Confluent answers formats it does
// not know with the default one.
func TestSerializedFormatOtherTypes(t *testing.T) {
	r := newRegistry(t)
	r.do("POST", "/subjects/a/versions", map[string]any{"schema": userV1}, 200)
	r.do("POST", "/subjects/j/versions", map[string]any{"schemaType": "JSON", "schema": `{"type":"object"}`}, 200)
	r.do("POST", "/subjects/p/versions", map[string]any{"schemaType": "PROTOBUF", "schema": protoCommon}, 200)
	for id, want := range map[int]string{1: userV1, 2: `{"type":"object"}`, 3: protoCommon} {
		for _, f := range []string{"serialized", "resolved", "bogus"} {
			if id == 3 && f == "serialized" {
				continue
			}
			got := r.do("GET", fmt.Sprintf("/schemas/ids/%d/schema?format=%s", id, f), nil, 200)
			if s, ok := got.(string); ok && s != want || !ok && js(got) != js(decoded(want)) {
				t.Fatalf("schema %d with format=%s: %v, want %s", id, f, got, want)
			}
		}
	}
}

// TestProtobufDifferentSchemasStayApart: schemas that differ in anything a descriptor
// carries get their own ids, whatever the form.
func TestProtobufDifferentSchemasStayApart(t *testing.T) {
	r := newRegistry(t)
	r.do("PUT", "/config", map[string]any{"compatibility": "NONE"}, 200)
	base := `syntax = "proto3"; package p; message M { string a_b = 1; }`
	ids := map[float64]string{}
	for _, s := range []string{
		base,
		`syntax = "proto3"; package p; message M { string a_b = 1 [json_name = "x"]; }`,
		`syntax = "proto3"; package p; message M { string a_b = 2; }`,
		`syntax = "proto3"; package q; message M { string a_b = 1; }`,
		`syntax = "proto2"; package p; message M { optional string a_b = 1; }`,
		pythonDescriptor(t, "m.proto", `syntax = "proto3"; package p; message M { bytes a_b = 1; }`, nil),
	} {
		id := r.do("POST", "/subjects/s/versions", map[string]any{"schemaType": "PROTOBUF", "schema": s}, 200).(map[string]any)["id"].(float64)
		if prev, ok := ids[id]; ok {
			t.Fatalf("%q got the id of %q", s, prev)
		}
		ids[id] = s
	}
}

// TestProtobufDescriptorStoredAsSent: a descriptor a Shale before this change stored as
// sent is served as .proto text, and the same schema sent again in either form gets its id.
func TestProtobufDescriptorStoredAsSent(t *testing.T) {
	n := controllertest.Start(t)
	srv := httptest.NewServer(New(Options{Images: n.Broker, Store: n.Broker}).Handler())
	t.Cleanup(srv.Close)
	r := &registry{t: t, url: srv.URL}
	desc := pythonDescriptor(t, "money.proto", protoCommon, nil)
	res, err := n.Broker.AlterSchemaRegistry(context.Background(), metadata.RegistryOp{Register: &metadata.RegisterSchemaOp{
		Subject: "old", Schema: metadata.RegistrySchema{Type: TypeProtobuf, Schema: desc}, ExpectLatest: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if im := n.Broker.Current(); im != nil && im.SchemaRegistry != nil {
			if _, ok := im.SchemaRegistry.Version("old", res.Version); ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the broker's image never showed the write")
		}
	}
	if got := r.do("GET", fmt.Sprintf("/schemas/ids/%d?format=serialized", res.ID), nil, 200).(map[string]any); descriptorFromBase64(got["schema"].(string)) == nil {
		t.Fatalf("format=serialized: %v", got)
	}
	for _, path := range []string{fmt.Sprintf("/schemas/ids/%d/schema", res.ID), "/subjects/old/versions/1/schema"} {
		text, _ := r.do("GET", path, nil, 200).(string)
		if descriptorFromBase64(text) != nil || !strings.Contains(text, "message Money") {
			t.Fatalf("%s serves %q, want .proto text", path, text)
		}
	}
	for _, s := range []string{protoCommon, desc} {
		look := r.do("POST", "/subjects/old", map[string]any{"schemaType": "PROTOBUF", "schema": s}, 200).(map[string]any)
		if int32(look["id"].(float64)) != res.ID || descriptorFromBase64(look["schema"].(string)) != nil {
			t.Fatalf("lookup: %v, want id %d as text", look, res.ID)
		}
		got := r.do("POST", "/subjects/new/versions", map[string]any{"schemaType": "PROTOBUF", "schema": s}, 200).(map[string]any)
		if int32(got["id"].(float64)) != res.ID {
			t.Fatalf("registered again: %v, want id %d", got, res.ID)
		}
	}
}
