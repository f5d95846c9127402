package schemaregistry

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"github.com/jhump/protoreflect/v2/protoprint"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/shalelog/shale/metadata"
)

// The two forms of a Protobuf schema, as in Confluent's registry. A client may send .proto
// source or a base64-encoded FileDescriptorProto (confluent-kafka-python's
// ProtobufSerializer does the latter). Confluent stores and serves its canonical .proto
// text either way, and serves the descriptor form on request (?format=serialized), so a
// client that reads the text (kafkajs's protobufjs, for one) can decode what another
// registered as a descriptor.
//
// Shale stores source as written (so schemas registered before keep their stored form
// and id) and a descriptor converted to source. Two Protobuf schemas are the same schema
// when they compile, with the same references, to the same descriptor once what does not
// change the schema is set aside (see protoCanonical): whitespace, comments, the file's
// name, and json_name left implicit or spelled out. So a schema sent
// as text and then as a descriptor, or the other way round, gets one id.

// serializedFormat is the value of ?format= that asks for a Protobuf schema as a base64
// FileDescriptorProto (Confluent's ProtobufSchema.Format.SERIALIZED).
const serializedFormat = "serialized"

// serializedFileName is the name the main file of a schema served as a descriptor has:
// Confluent's ProtobufSchema.DEFAULT_NAME. Its imports keep their reference names.
const serializedFileName = "default"

// protoText prints a compiled schema as .proto source, without comments (a descriptor
// carries none) and without blank lines between elements, elements in the descriptor's
// order, type names as short as their scope allows.
func protoText(fd protoreflect.FileDescriptor) (string, error) {
	var b bytes.Buffer
	if err := (&protoprint.Printer{Compact: true}).PrintProtoFile(fd, &b); err != nil {
		return "", fmt.Errorf("print %s as .proto source: %w", fd.Path(), err)
	}
	return b.String(), nil
}

// protoDescriptor is fd as a FileDescriptorProto, without source positions and comments.
func protoDescriptor(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
	p := protodesc.ToFileDescriptorProto(fd)
	p.SourceCodeInfo = nil
	return p
}

// protoSerialized is fd in Confluent's serialized form: a base64 FileDescriptorProto.
func protoSerialized(fd protoreflect.FileDescriptor) (string, error) {
	p := protoDescriptor(fd)
	p.Name = proto.String(serializedFileName)
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("marshal the descriptor of %s: %w", fd.Path(), err)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// protoCanonical returns bytes that are equal for two compiled schemas exactly when they
// define the same thing: fd's descriptor without its file name and source positions,
// with every field's JSON name spelled out (protoc leaves it out of the descriptors it
// embeds in generated code, protocompile fills it in), serialized deterministically.
func protoCanonical(fd protoreflect.FileDescriptor) ([]byte, error) {
	p := protoDescriptor(fd)
	p.Name = nil
	setJSONNames(p.MessageType, fd.Messages())
	for _, x := range p.Extension {
		// Meaningless on extensions; older protoc versions set it anyway.
		x.JsonName = nil
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("marshal the descriptor of %s: %w", fd.Path(), err)
	}
	return raw, nil
}

// setJSONNames spells out the JSON name of the fields of ms, which are the messages of mds
// in the same order.
func setJSONNames(ms []*descriptorpb.DescriptorProto, mds protoreflect.MessageDescriptors) {
	for i, m := range ms {
		md := mds.Get(i)
		for j, f := range m.Field {
			f.JsonName = proto.String(md.Fields().Get(j).JSONName())
		}
		for _, x := range m.Extension {
			x.JsonName = nil
		}
		setJSONNames(m.NestedType, md.Messages())
	}
}

// storedForm returns the text a Protobuf schema is stored as: source as sent, a
// descriptor printed as source. The printed source must compile, with the same
// dependencies, to the same schema; if the printer ever fails that, the descriptor is
// kept as sent, which Shale still reads, rather than storing a different schema.
func protoStoredForm(text string, deps []dependency, p *parsed, canon []byte) (string, error) {
	if descriptorFromBase64(text) == nil {
		return text, nil
	}
	src, err := protoText(p.proto)
	if err != nil {
		return text, err
	}
	again, err := parseSchema(TypeProtobuf, src, deps)
	if err != nil {
		return text, fmt.Errorf("the descriptor printed as source does not compile: %w", err)
	}
	c, err := protoCanonical(again.proto)
	if err != nil {
		return text, err
	}
	if !bytes.Equal(c, canon) {
		return text, fmt.Errorf("the descriptor printed as source compiles to a different schema")
	}
	return src, nil
}

// canonCache remembers the canonical descriptors of stored Protobuf schemas, keyed by a
// hash of their text and their dependencies' names and texts, so that comparing a new
// schema with every stored one does not compile them all each time.
type canonCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte][]byte
}

// canonCacheMax bounds the cache; past it the cache starts again empty.
const canonCacheMax = 8192

func canonKey(text string, deps []dependency) [sha256.Size]byte {
	h := sha256.New()
	for _, d := range deps {
		fmt.Fprintf(h, "%d:%s%d:%s", len(d.name), d.name, len(d.schema), d.schema)
	}
	fmt.Fprintf(h, "%d:%s", len(text), text)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// canonOf returns the canonical descriptor of a stored Protobuf schema.
func (c *canonCache) canonOf(reg *metadata.SchemaRegistry, sc *metadata.RegistrySchema) ([]byte, error) {
	var deps []dependency
	if err := dependencies(reg, sc.References, map[string]bool{}, &deps); err != nil {
		return nil, err
	}
	k := canonKey(sc.Schema, deps)
	c.mu.Lock()
	canon, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return canon, nil
	}
	p, err := parseSchema(sc.Type, sc.Schema, deps)
	if err != nil {
		return nil, err
	}
	if canon, err = protoCanonical(p.proto); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= canonCacheMax {
		c.m = map[[sha256.Size]byte][]byte{}
	}
	c.m[k] = canon
	c.mu.Unlock()
	return canon, nil
}

// formatted returns a stored schema's text in the requested format. For Protobuf,
// "serialized" is the base64 FileDescriptorProto of the compiled schema, and the default
// is .proto source (a descriptor stored before Shale converted them is printed as source).
// Other formats and types are served as stored: Confluent too answers an unknown format
// with the schema's default form.
func formatted(reg *metadata.SchemaRegistry, sc *metadata.RegistrySchema, format string) (string, error) {
	if sc.Type != TypeProtobuf {
		return sc.Schema, nil
	}
	// Confluent matches the format's name exactly.
	serialized := strings.TrimSpace(format) == serializedFormat
	if !serialized && descriptorFromBase64(sc.Schema) == nil {
		return sc.Schema, nil
	}
	p, err := parseStored(reg, sc)
	if err != nil {
		return "", errorf(metadata.RegistryInternalError, "stored schema %d no longer parses: %v", sc.ID, err)
	}
	if serialized {
		out, err := protoSerialized(p.proto)
		if err != nil {
			return "", errorf(metadata.RegistryInternalError, "schema %d: %v", sc.ID, err)
		}
		return out, nil
	}
	out, err := protoText(p.proto)
	if err != nil {
		return "", errorf(metadata.RegistryInternalError, "schema %d: %v", sc.ID, err)
	}
	return out, nil
}
