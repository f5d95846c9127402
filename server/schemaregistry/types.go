package schemaregistry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Schema types, as Confluent names them.
const (
	TypeAvro     = "AVRO"
	TypeProtobuf = "PROTOBUF"
	TypeJSON     = "JSON"
)

// dependency is a referenced schema: the name it is imported as, and its text.
type dependency struct {
	name, schema string
}

// parsed is a schema parsed by its type's library, ready for compatibility checks.
type parsed struct {
	typ   string
	avro  avro.Schema
	proto protoreflect.FileDescriptor
	json  any // the decoded JSON document, after the library compiled it
}

// normalize returns the form a schema is stored in: JSON schemas (Avro and JSON Schema)
// are compacted, so whitespace does not make two schemas different; Protobuf text is kept
// as written (a descriptor is printed as text later, once compiled: protoStoredForm).
func normalize(typ, text string) string {
	if typ == TypeProtobuf {
		return text
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return text
	}
	return b.String()
}

// parseSchema parses text of type typ with its dependencies (in the order they must be
// loaded: a dependency's own dependencies first).
func parseSchema(typ, text string, deps []dependency) (*parsed, error) {
	switch typ {
	case TypeAvro:
		cache := &avro.SchemaCache{}
		for _, d := range deps {
			if _, err := avro.ParseWithCache(d.schema, "", cache); err != nil {
				return nil, fmt.Errorf("reference %q: %w", d.name, err)
			}
		}
		s, err := avro.ParseWithCache(text, "", cache)
		if err != nil {
			return nil, err
		}
		return &parsed{typ: typ, avro: s}, nil
	case TypeProtobuf:
		const main = "__shale_schema.proto"
		srcs := map[string]string{main: text}
		for _, d := range deps {
			srcs[d.name] = d.schema
		}
		var msgs []string
		c := protocompile.Compiler{
			Resolver: protocompile.WithStandardImports(protoResolver(srcs)),
			Reporter: protocompileReporter(&msgs),
		}
		files, err := c.Compile(context.Background(), main)
		if err != nil {
			if len(msgs) > 0 {
				return nil, errors.New(strings.Join(msgs, "; "))
			}
			return nil, err
		}
		return &parsed{typ: typ, proto: linker.File(files[0])}, nil
	case TypeJSON:
		c := jsonschema.NewCompiler()
		// No loader: a $ref resolves only to references and the standard metaschemas,
		// never to a file or URL the broker would fetch for a client.
		c.UseLoader(jsonschema.SchemeURLLoader{})
		for _, d := range deps {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(d.schema))
			if err != nil {
				return nil, fmt.Errorf("reference %q: %w", d.name, err)
			}
			if err := c.AddResource(d.name, doc); err != nil {
				return nil, fmt.Errorf("reference %q: %w", d.name, err)
			}
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return nil, err
		}
		const main = "urn:shale:schema.json"
		if err := c.AddResource(main, doc); err != nil {
			return nil, err
		}
		if _, err := c.Compile(main); err != nil {
			return nil, err
		}
		return &parsed{typ: typ, json: doc}, nil
	}
	return nil, fmt.Errorf("unknown schema type %q", typ)
}

// protoResolver finds the files of a Protobuf schema and its references in srcs. A file
// is .proto source or, as Confluent's registry also accepts and confluent-kafka-python's
// ProtobufSerializer sends, a base64-encoded FileDescriptorProto. Source cannot be mistaken
// for base64: every .proto file has spaces or punctuation outside base64's alphabet.
func protoResolver(srcs map[string]string) protocompile.Resolver {
	return protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		text, ok := srcs[path]
		if !ok {
			return protocompile.SearchResult{}, fmt.Errorf("file %q: %w", path, fs.ErrNotExist)
		}
		if fd := descriptorFromBase64(text); fd != nil {
			// The compiler wants the name it asked for; the client named the file its own way.
			fd.Name = proto.String(path)
			fillJSONNames(fd.MessageType)
			return protocompile.SearchResult{Proto: fd}, nil
		}
		return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
	})
}

// fillJSONNames gives the fields of ms that have no json_name their default one. protoc
// leaves json_name out of the descriptors it embeds in generated code (what
// confluent-kafka-python sends), and protocompile reads a missing json_name as a custom
// empty one, which then conflicts between any two fields.
func fillJSONNames(ms []*descriptorpb.DescriptorProto) {
	for _, m := range ms {
		for _, f := range m.Field {
			if f.JsonName == nil {
				f.JsonName = proto.String(defaultJSONName(f.GetName()))
			}
		}
		fillJSONNames(m.NestedType)
	}
}

// defaultJSONName is protoc's ToJsonName: underscores dropped, the letter after one
// upper-cased.
func defaultJSONName(name string) string {
	var b strings.Builder
	upper := false
	for _, r := range name {
		switch {
		case r == '_':
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(r)))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// descriptorFromBase64 decodes a base64 FileDescriptorProto, nil when text is not one.
func descriptorFromBase64(text string) *descriptorpb.FileDescriptorProto {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(raw) == 0 {
		return nil
	}
	var fd descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(raw, &fd); err != nil {
		return nil
	}
	return &fd
}

// compatible returns why data written with writer cannot be read with reader, nil when it
// can. Both are of the same type.
func compatible(reader, writer *parsed) []string {
	switch reader.typ {
	case TypeAvro:
		return avroCanRead(reader.avro, writer.avro, "/", map[[2]string]bool{})
	case TypeProtobuf:
		return protoCompatible(reader.proto, writer.proto)
	case TypeJSON:
		return jsonCanRead(reader.json, writer.json, "#")
	}
	return []string{"unknown schema type " + reader.typ}
}

// Compatibility levels.
const (
	LevelNone               = "NONE"
	LevelBackward           = "BACKWARD"
	LevelBackwardTransitive = "BACKWARD_TRANSITIVE"
	LevelForward            = "FORWARD"
	LevelForwardTransitive  = "FORWARD_TRANSITIVE"
	LevelFull               = "FULL"
	LevelFullTransitive     = "FULL_TRANSITIVE"
)

var levels = []string{LevelNone, LevelBackward, LevelBackwardTransitive, LevelForward, LevelForwardTransitive, LevelFull, LevelFullTransitive}

// checkLevel checks a new schema against the subject's live versions, oldest first, at
// a level, and returns the reasons it is incompatible.
func checkLevel(level string, next *parsed, previous []*parsed) []string {
	if level == LevelNone || len(previous) == 0 {
		return nil
	}
	against := previous[len(previous)-1:]
	if strings.HasSuffix(level, "_TRANSITIVE") {
		against = previous
	}
	backward := strings.HasPrefix(level, "BACKWARD") || strings.HasPrefix(level, "FULL")
	forward := strings.HasPrefix(level, "FORWARD") || strings.HasPrefix(level, "FULL")
	var out []string
	for _, old := range against {
		if backward {
			for _, m := range compatible(next, old) {
				out = append(out, "backward: "+m)
			}
		}
		if forward {
			for _, m := range compatible(old, next) {
				out = append(out, "forward: "+m)
			}
		}
	}
	return out
}
