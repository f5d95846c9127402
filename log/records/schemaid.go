package records

import (
	"encoding/binary"
	"fmt"
)

// Schema ids in records follow the wire format of Confluent's serializers: a magic byte
// 0, then the schema's registry id as a big-endian int32, then the serialized data
// (which for Protobuf starts with the message indexes).
const (
	schemaMagic        = 0
	schemaIDHeaderSize = 5
)

// SchemaField names the part of a record a schema id is read from.
type SchemaField uint8

const (
	SchemaKey SchemaField = iota
	SchemaValue
)

func (f SchemaField) String() string {
	if f == SchemaKey {
		return "key"
	}
	return "value"
}

// SchemaIDChecker decides whether a schema id may appear in a topic's keys or values:
// Confluent Server's broker-side schema ID validation. CheckSchemaID returns nil when
// id, read from the head of data (the whole key or value, wire-format header
// included), is registered under the subject the topic's strategy names, else why not.
// data is only valid during the call.
type SchemaIDChecker interface {
	CheckSchemaID(field SchemaField, id int32, data []byte) error
}

// SchemaIDs turns schema ID validation on for keys, values or both. The zero value
// checks nothing.
type SchemaIDs struct {
	Key, Value bool
	Checker    SchemaIDChecker
}

func (s SchemaIDs) on() bool { return (s.Key || s.Value) && s.Checker != nil }

// check returns why rec's key or value is refused, "" when both pass. Null keys and
// values pass, as in Confluent Server: a tombstone (null value) must stay writable to
// delete a key from a compacted topic, and a null key is how most producers say "no
// key".
func (s SchemaIDs) check(r *Record) string {
	if s.Key && r.Key != nil {
		if msg := s.checkField(SchemaKey, r.Key); msg != "" {
			return msg
		}
	}
	if s.Value && r.Value != nil {
		return s.checkField(SchemaValue, r.Value)
	}
	return ""
}

func (s SchemaIDs) checkField(f SchemaField, data []byte) string {
	if len(data) < schemaIDHeaderSize || data[0] != schemaMagic {
		return fmt.Sprintf("%s does not start with the schema registry's magic byte 0 and a 4-byte schema id", f)
	}
	id := int32(binary.BigEndian.Uint32(data[1:schemaIDHeaderSize]))
	if err := s.Checker.CheckSchemaID(f, id, data); err != nil {
		return err.Error()
	}
	return ""
}

// SubjectNameStrategy is how a topic's key or value subject is named, as Confluent's
// serializers' subject.name.strategy and Confluent Server's
// confluent.{key,value}.subject.name.strategy topic configs say.
type SubjectNameStrategy uint8

const (
	// TopicNameStrategy: the subject is <topic>-key or <topic>-value.
	TopicNameStrategy SubjectNameStrategy = iota
	// RecordNameStrategy: the subject is the fully qualified name of the record the
	// schema describes.
	RecordNameStrategy
	// TopicRecordNameStrategy: the subject is <topic>-<record name>.
	TopicRecordNameStrategy
)

// ParseSubjectNameStrategy reads a strategy by Confluent's class name
// (io.confluent.kafka.serializers.subject.TopicNameStrategy) or its short name
// (TopicNameStrategy); anything else is TopicNameStrategy, Confluent's default (topic
// config validation refuses other values before they get here).
func ParseSubjectNameStrategy(name string) SubjectNameStrategy {
	const pkg = "io.confluent.kafka.serializers.subject."
	if len(name) > len(pkg) && name[:len(pkg)] == pkg {
		name = name[len(pkg):]
	}
	switch name {
	case "RecordNameStrategy":
		return RecordNameStrategy
	case "TopicRecordNameStrategy":
		return TopicRecordNameStrategy
	}
	return TopicNameStrategy
}

func (s SubjectNameStrategy) String() string {
	switch s {
	case RecordNameStrategy:
		return "RecordNameStrategy"
	case TopicRecordNameStrategy:
		return "TopicRecordNameStrategy"
	}
	return "TopicNameStrategy"
}

// SchemaIDPolicy is a topic's schema ID validation settings: which of the key and value
// are checked (confluent.key.schema.validation, confluent.value.schema.validation) and
// how each one's subject is named.
type SchemaIDPolicy struct {
	Key, Value                 bool
	KeyStrategy, ValueStrategy SubjectNameStrategy
}

// On reports whether anything is checked.
func (p SchemaIDPolicy) On() bool { return p.Key || p.Value }

// Strategy returns the field's subject name strategy.
func (p SchemaIDPolicy) Strategy(f SchemaField) SubjectNameStrategy {
	if f == SchemaKey {
		return p.KeyStrategy
	}
	return p.ValueStrategy
}
