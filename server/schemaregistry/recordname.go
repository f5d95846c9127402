package schemaregistry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shalelog/shale/metadata"
)

// RecordNames names the record a schema id's data carries, as Confluent's serializers
// name it for RecordNameStrategy and TopicRecordNameStrategy: an Avro record, enum or
// fixed schema's full name (other Avro schemas by their type, as Confluent's AvroSchema
// does), a JSON Schema's title, and for Protobuf the full name of the message the
// data's message indexes select. The broker's schema ID validation uses it
// (replication.RecordNamer).
//
// A schema id always names the same schema text, and the versions it references cannot
// be deleted while it does, so each id is parsed once and its outcome kept for the
// life of the RecordNames. Only ids of registered schemas are kept, so a producer
// cannot grow it with made-up ids.
type RecordNames struct {
	named sync.Map // schema id -> *namedSchema
}

// NewRecordNames returns an empty RecordNames.
func NewRecordNames() *RecordNames { return &RecordNames{} }

// namedSchema is what naming needs of one schema.
type namedSchema struct {
	name  string                      // Avro and JSON Schema
	proto protoreflect.FileDescriptor // Protobuf: the name depends on the data
	err   error
}

// errNoTitle: a JSON Schema names no record without a title.
var errNoTitle = errors.New("the JSON schema has no title to name its record")

// RecordName returns the name of the record that data, a key or value in the wire
// format of Confluent's serializers (magic byte, 4-byte schema id, then for Protobuf
// the message indexes), carries under schema id.
func (n *RecordNames) RecordName(reg *metadata.SchemaRegistry, id int32, data []byte) (string, error) {
	ns, err := n.lookup(reg, id)
	if err != nil {
		return "", err
	}
	if ns.proto == nil {
		return ns.name, nil
	}
	if len(data) < 5 {
		return "", errors.New("no message indexes after the schema id")
	}
	return protoMessageName(ns.proto, data[5:])
}

func (n *RecordNames) lookup(reg *metadata.SchemaRegistry, id int32) (*namedSchema, error) {
	if v, ok := n.named.Load(id); ok {
		ns := v.(*namedSchema)
		return ns, ns.err
	}
	sc := reg.Schema(id)
	if sc == nil {
		return nil, fmt.Errorf("schema id %d is not registered", id)
	}
	ns := &namedSchema{}
	p, err := parseStored(reg, sc)
	switch {
	case err != nil:
		ns.err = fmt.Errorf("parse schema %d: %w", id, err)
	case p.avro != nil:
		ns.name = avroRecordName(p.avro)
	case p.proto != nil:
		ns.proto = p.proto
	default:
		obj, _ := asObject(p.json)
		title, ok := obj["title"].(string)
		if !ok || title == "" {
			ns.err = errNoTitle
		}
		ns.name = title
	}
	v, _ := n.named.LoadOrStore(id, ns)
	ns = v.(*namedSchema)
	return ns, ns.err
}

// avroRecordName is Confluent's AvroSchema.name(): the full name of a named type, the
// type's name otherwise.
func avroRecordName(s avro.Schema) string {
	if named, ok := s.(avro.NamedSchema); ok {
		return named.FullName()
	}
	return string(s.Type())
}

// protoMessageName reads the message indexes Confluent's Protobuf serializer writes
// after the schema id (a zig-zag varint count, then that many zig-zag varint indexes, a
// count of 0 standing for the file's first message) and returns the full name of the
// message they select in file.
func protoMessageName(file protoreflect.FileDescriptor, b []byte) (string, error) {
	count, n := binary.Varint(b)
	if n <= 0 || count < 0 || count > int64(len(b)-n) {
		return "", errors.New("malformed message indexes after the schema id")
	}
	b = b[n:]
	if count == 0 {
		if file.Messages().Len() == 0 {
			return "", errors.New("the schema has no message")
		}
		return string(file.Messages().Get(0).FullName()), nil
	}
	var md protoreflect.MessageDescriptor
	msgs := file.Messages()
	for i := int64(0); i < count; i++ {
		idx, n := binary.Varint(b)
		if n <= 0 {
			return "", errors.New("malformed message indexes after the schema id")
		}
		b = b[n:]
		if idx < 0 || idx >= int64(msgs.Len()) {
			return "", fmt.Errorf("message index %d is out of range", idx)
		}
		md = msgs.Get(int(idx))
		msgs = md.Messages()
	}
	return string(md.FullName()), nil
}
