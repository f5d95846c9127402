package schemaregistry

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/shalelog/shale/metadata"
)

// Serde turns JSON documents into keys and values in the wire format of Confluent's
// serializers (magic byte 0, the schema id as 4 big-endian bytes, then for Protobuf the
// message indexes, then the payload) and back, for a registered schema id. The REST
// proxy uses it to produce and read AVRO, PROTOBUF and JSONSCHEMA data.
//
// Avro data is in Avro's JSON encoding (a union value is {"type": value} or null, bytes
// and fixed are strings of code points 0-255), Protobuf data in protojson's mapping (the
// schema's first message), JSON Schema data is any JSON document the schema accepts.
//
// A schema id always names the same text, so each id is compiled once and kept for the
// life of the Serde; only registered ids are kept.
type Serde struct {
	compiled sync.Map // schema id -> *serdeSchema
}

// NewSerde returns an empty Serde.
func NewSerde() *Serde { return &Serde{} }

type serdeSchema struct {
	typ   string
	avro  avro.Schema
	proto protoreflect.FileDescriptor
	json  *jsonschema.Schema
	err   error
}

// ErrNotWireFormat is returned by Decode for data that does not start with the magic byte
// and a schema id.
var ErrNotWireFormat = errors.New("the data does not start with the magic byte 0 and a schema id")

// SchemaType returns the type (AVRO, PROTOBUF or JSON) of a registered schema id.
func (s *Serde) SchemaType(reg *metadata.SchemaRegistry, id int32) (string, error) {
	c, err := s.lookup(reg, id)
	if err != nil {
		return "", err
	}
	return c.typ, nil
}

// Encode serializes doc, a JSON document, with schema id in Confluent's wire format.
func (s *Serde) Encode(reg *metadata.SchemaRegistry, id int32, doc json.RawMessage) ([]byte, error) {
	c, err := s.lookup(reg, id)
	if err != nil {
		return nil, err
	}
	out := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(id))
	switch c.typ {
	case TypeAvro:
		v, err := decodeJSON(doc)
		if err != nil {
			return nil, err
		}
		native, err := avroFromJSON(c.avro, v, "")
		if err != nil {
			return nil, err
		}
		b, err := avro.Marshal(c.avro, native)
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		return append(out, b...), nil
	case TypeProtobuf:
		if c.proto.Messages().Len() == 0 {
			return nil, errors.New("the schema has no message")
		}
		msg := dynamicpb.NewMessage(c.proto.Messages().Get(0))
		if err := protojson.Unmarshal(doc, msg); err != nil {
			return nil, fmt.Errorf("protobuf: %w", err)
		}
		// Deterministic: a dynamic message's fields are otherwise written in the order of
		// a map's iteration, so one record would get different bytes from one request to
		// the next; this writes them by field number, as generated code does.
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			return nil, fmt.Errorf("protobuf: %w", err)
		}
		// Message indexes: a count of 0 stands for the file's first message.
		out = append(out, 0)
		return append(out, b...), nil
	default:
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		if err := c.json.Validate(v); err != nil {
			return nil, fmt.Errorf("the document does not match JSON schema %d: %w", id, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, doc); err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		return append(out, compact.Bytes()...), nil
	}
}

// Decode reads data in Confluent's wire format and returns its schema id, the schema's
// type and the data as a JSON document.
func (s *Serde) Decode(reg *metadata.SchemaRegistry, data []byte) (int32, string, json.RawMessage, error) {
	if len(data) < 5 || data[0] != 0 {
		return 0, "", nil, ErrNotWireFormat
	}
	id := int32(binary.BigEndian.Uint32(data[1:5]))
	c, err := s.lookup(reg, id)
	if err != nil {
		return id, "", nil, err
	}
	payload := data[5:]
	switch c.typ {
	case TypeAvro:
		var v any
		if err := avro.Unmarshal(c.avro, payload, &v); err != nil {
			return id, c.typ, nil, fmt.Errorf("avro: %w", err)
		}
		b, err := json.Marshal(avroToJSON(c.avro, v))
		return id, c.typ, b, err
	case TypeProtobuf:
		md, rest, err := protoMessage(c.proto, payload)
		if err != nil {
			return id, c.typ, nil, err
		}
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, msg); err != nil {
			return id, c.typ, nil, fmt.Errorf("protobuf: %w", err)
		}
		b, err := protojson.Marshal(msg)
		return id, c.typ, b, err
	default:
		if !json.Valid(payload) {
			return id, c.typ, nil, errors.New("the payload is not JSON")
		}
		return id, c.typ, json.RawMessage(payload), nil
	}
}

func (s *Serde) lookup(reg *metadata.SchemaRegistry, id int32) (*serdeSchema, error) {
	if v, ok := s.compiled.Load(id); ok {
		c := v.(*serdeSchema)
		return c, c.err
	}
	sc := reg.Schema(id)
	if sc == nil {
		return nil, metadata.RegistryErrorf(metadata.RegistrySchemaNotFound, "Schema %d not found", id)
	}
	c := &serdeSchema{typ: sc.Type}
	p, err := parseStored(reg, sc)
	switch {
	case err != nil:
		c.err = fmt.Errorf("parse schema %d: %w", id, err)
	case sc.Type == TypeAvro:
		c.avro = p.avro
	case sc.Type == TypeProtobuf:
		c.proto = p.proto
	default:
		c.json, c.err = compileJSONSchema(reg, sc)
	}
	v, _ := s.compiled.LoadOrStore(id, c)
	c = v.(*serdeSchema)
	return c, c.err
}

// compileJSONSchema compiles a stored JSON schema for validation, its references
// loaded as parseSchema loads them.
func compileJSONSchema(reg *metadata.SchemaRegistry, sc *metadata.RegistrySchema) (*jsonschema.Schema, error) {
	var deps []dependency
	if err := dependencies(reg, sc.References, map[string]bool{}, &deps); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	// The schema sits at a hierarchical URL nothing is fetched from, and a reference
	// named by a relative name ("address.json", as Confluent's clients name them) beside
	// it, so that a relative $ref resolves to the reference; an opaque base such as a URN
	// resolves no relative $ref (the library would take it for the schema itself).
	const base = "https://schema-registry.shale.invalid/"
	for _, d := range deps {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(d.schema))
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", d.name, err)
		}
		name := d.name
		if !strings.Contains(name, ":") {
			name = base + strings.TrimPrefix(name, "/")
		}
		if err := c.AddResource(name, doc); err != nil {
			return nil, fmt.Errorf("reference %q: %w", d.name, err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(sc.Schema))
	if err != nil {
		return nil, err
	}
	const main = base + "__shale_schema.json"
	if err := c.AddResource(main, doc); err != nil {
		return nil, err
	}
	return c.Compile(main)
}

// protoMessage reads the message indexes after the schema id and returns the message
// they select and the payload after them.
func protoMessage(file protoreflect.FileDescriptor, b []byte) (protoreflect.MessageDescriptor, []byte, error) {
	count, n := binary.Varint(b)
	if n <= 0 || count < 0 || count > int64(len(b)-n) {
		return nil, nil, errors.New("malformed message indexes after the schema id")
	}
	b = b[n:]
	msgs := file.Messages()
	if count == 0 {
		if msgs.Len() == 0 {
			return nil, nil, errors.New("the schema has no message")
		}
		return msgs.Get(0), b, nil
	}
	var md protoreflect.MessageDescriptor
	for i := int64(0); i < count; i++ {
		idx, n := binary.Varint(b)
		if n <= 0 || idx < 0 || idx >= int64(msgs.Len()) {
			return nil, nil, errors.New("malformed message indexes after the schema id")
		}
		b = b[n:]
		md = msgs.Get(int(idx))
		msgs = md.Messages()
	}
	return md, b, nil
}

func decodeJSON(doc json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	return v, nil
}

// unionName is the name hamba/avro knows a union branch by, and the name Avro's JSON
// encoding uses (without a logical type).
func unionName(s avro.Schema) (hamba, plain string) {
	s = deref(s)
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName(), n.FullName()
	}
	plain = string(s.Type())
	hamba = plain
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		hamba += "." + string(ls.Logical().Type())
	}
	return hamba, plain
}

// avroFromJSON converts a decoded JSON value in Avro's JSON encoding into the Go values
// hamba/avro encodes for schema s.
func avroFromJSON(s avro.Schema, v any, path string) (any, error) {
	s = deref(s)
	bad := func() error {
		return fmt.Errorf("avro: %s: %s cannot hold %s", orRoot(path), s.Type(), jsonKind(v))
	}
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return nil, bad()
		}
		return nil, nil
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, bad()
		}
		return b, nil
	case avro.Int, avro.Long:
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad()
		}
		i, err := n.Int64()
		if err != nil {
			return nil, bad()
		}
		if s.Type() == avro.Int {
			if i < math.MinInt32 || i > math.MaxInt32 {
				return nil, fmt.Errorf("avro: %s: %d is out of an int's range", orRoot(path), i)
			}
			return int(i), nil
		}
		return i, nil
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad()
		}
		f, err := n.Float64()
		if err != nil {
			return nil, bad()
		}
		if s.Type() == avro.Float {
			return float32(f), nil
		}
		return f, nil
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return nil, bad()
		}
		return str, nil
	case avro.Bytes, avro.Fixed:
		str, ok := v.(string)
		if !ok {
			return nil, bad()
		}
		b, err := latin1(str)
		if err != nil {
			return nil, fmt.Errorf("avro: %s: %w", orRoot(path), err)
		}
		if f, ok := s.(*avro.FixedSchema); ok {
			if len(b) != f.Size() {
				return nil, fmt.Errorf("avro: %s: fixed %s holds %d bytes, not %d", orRoot(path), f.FullName(), f.Size(), len(b))
			}
			arr := reflect.New(reflect.ArrayOf(f.Size(), reflect.TypeFor[byte]())).Elem()
			reflect.Copy(arr, reflect.ValueOf(b))
			return arr.Interface(), nil
		}
		return b, nil
	case avro.Enum:
		str, ok := v.(string)
		if !ok {
			return nil, bad()
		}
		e := s.(*avro.EnumSchema)
		for _, sym := range e.Symbols() {
			if sym == str {
				return str, nil
			}
		}
		return nil, fmt.Errorf("avro: %s: %q is not a symbol of enum %s", orRoot(path), str, e.FullName())
	case avro.Array:
		arr, ok := v.([]any)
		if !ok {
			return nil, bad()
		}
		out := make([]any, len(arr))
		for i, x := range arr {
			var err error
			if out[i], err = avroFromJSON(s.(*avro.ArraySchema).Items(), x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			var err error
			if out[k], err = avroFromJSON(s.(*avro.MapSchema).Values(), x, path+"."+k); err != nil {
				return nil, err
			}
		}
		return out, nil
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		rec := s.(*avro.RecordSchema)
		out := make(map[string]any, len(rec.Fields()))
		for _, f := range rec.Fields() {
			x, present := m[f.Name()]
			if !present {
				if f.HasDefault() {
					continue // hamba writes the field's default
				}
				return nil, fmt.Errorf("avro: %s: missing field %q of record %s", orRoot(path), f.Name(), rec.FullName())
			}
			var err error
			if out[f.Name()], err = avroFromJSON(f.Type(), x, path+"."+f.Name()); err != nil {
				return nil, err
			}
		}
		for k := range m {
			if _, ok := out[k]; !ok && !hasField(rec, k) {
				return nil, fmt.Errorf("avro: %s: record %s has no field %q", orRoot(path), rec.FullName(), k)
			}
		}
		return out, nil
	case avro.Union:
		u := s.(*avro.UnionSchema)
		if v == nil {
			if _, i := u.Types().Get("null"); i < 0 {
				return nil, bad()
			}
			return map[string]any(nil), nil
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf(`avro: %s: a union value is null or {"type": value}, not %s`, orRoot(path), jsonKind(v))
		}
		for k, x := range m {
			for _, t := range u.Types() {
				if hn, plain := unionName(t); k == hn || k == plain {
					nv, err := avroFromJSON(t, x, path+"."+k)
					if err != nil {
						return nil, err
					}
					return map[string]any{hn: nv}, nil
				}
			}
			return nil, fmt.Errorf("avro: %s: %q is not a branch of the union", orRoot(path), k)
		}
	}
	return nil, fmt.Errorf("avro: %s: unsupported type %s", orRoot(path), s.Type())
}

func hasField(rec *avro.RecordSchema, name string) bool {
	for _, f := range rec.Fields() {
		if f.Name() == name {
			return true
		}
	}
	return false
}

// avroToJSON turns what hamba/avro decoded for schema s into Avro's JSON encoding.
func avroToJSON(s avro.Schema, v any) any {
	s = deref(s)
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		if u, ok := logicalToJSON(s, ls.Logical(), v); ok {
			return u
		}
	}
	switch s.Type() {
	case avro.Bytes:
		if b, ok := v.([]byte); ok {
			return fromLatin1(b)
		}
	case avro.Fixed:
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Array {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return fromLatin1(b)
		}
	case avro.Array:
		if arr, ok := v.([]any); ok {
			out := make([]any, len(arr))
			for i, x := range arr {
				out[i] = avroToJSON(s.(*avro.ArraySchema).Items(), x)
			}
			return out
		}
	case avro.Map:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, x := range m {
				out[k] = avroToJSON(s.(*avro.MapSchema).Values(), x)
			}
			return out
		}
	case avro.Record:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for _, f := range s.(*avro.RecordSchema).Fields() {
				out[f.Name()] = avroToJSON(f.Type(), m[f.Name()])
			}
			return out
		}
	case avro.Union:
		if v == nil {
			return nil
		}
		u := s.(*avro.UnionSchema)
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for k, x := range m {
				for _, t := range u.Types() {
					if hn, plain := unionName(t); k == hn || k == plain {
						return map[string]any{plain: avroToJSON(t, x)}
					}
				}
			}
		}
		// hamba gives a nullable union's value bare: name its non-null branch.
		for _, t := range u.Types() {
			if deref(t).Type() != avro.Null {
				_, plain := unionName(t)
				return map[string]any{plain: avroToJSON(t, v)}
			}
		}
	}
	return v
}

// logicalToJSON turns what hamba/avro decodes for a logical type (times, durations,
// decimals) back into the underlying type's value, as Avro's JSON encoding has it.
func logicalToJSON(s avro.Schema, l avro.LogicalSchema, v any) (any, bool) {
	switch x := v.(type) {
	case time.Time:
		switch l.Type() {
		case avro.Date:
			return x.Unix() / 86400, true
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return x.UnixMilli(), true
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return x.UnixMicro(), true
		}
	case time.Duration:
		switch l.Type() {
		case avro.TimeMillis:
			return x.Milliseconds(), true
		case avro.TimeMicros:
			return x.Microseconds(), true
		}
	case *big.Rat:
		dec, ok := l.(*avro.DecimalLogicalSchema)
		if !ok {
			return nil, false
		}
		unscaled := new(big.Rat).Mul(x, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dec.Scale())), nil)))
		n := new(big.Int).Quo(unscaled.Num(), unscaled.Denom())
		b := twosComplement(n)
		if f, ok := s.(*avro.FixedSchema); ok && len(b) < f.Size() {
			pad := byte(0)
			if n.Sign() < 0 {
				pad = 0xff
			}
			b = append(bytes.Repeat([]byte{pad}, f.Size()-len(b)), b...)
		}
		return fromLatin1(b), true
	}
	return nil, false
}

// twosComplement is n in big-endian two's complement, as Avro's decimals store it.
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n-1 with every bit flipped.
	m := new(big.Int).Neg(n)
	m.Sub(m, big.NewInt(1))
	b := m.Bytes()
	if len(b) == 0 || b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	for i := range b {
		b[i] = ^b[i]
	}
	return b
}

func latin1(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 255 {
			return nil, fmt.Errorf("bytes are written as code points 0-255, not %q", r)
		}
		out = append(out, byte(r))
	}
	return out, nil
}

func fromLatin1(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return string(rs)
}

func orRoot(path string) string {
	if path == "" {
		return "the value"
	}
	return strings.TrimPrefix(path, ".")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
