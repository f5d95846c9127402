package schemaregistry

import (
	"fmt"
	"slices"

	"github.com/hamba/avro/v2"
)

// Avro compatibility is Avro's schema resolution (the specification's "Schema
// Resolution"), as Confluent applies it: data written with the writer schema must be
// readable with the reader schema.

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// promotable says which writer primitives a reader primitive accepts besides its own.
var promotable = map[avro.Type][]avro.Type{
	avro.Long:   {avro.Int},
	avro.Float:  {avro.Int, avro.Long},
	avro.Double: {avro.Int, avro.Long, avro.Float},
	avro.String: {avro.Bytes},
	avro.Bytes:  {avro.String},
}

// namesMatch follows the specification: the reader's full name, or one of its aliases,
// is the writer's full name (Confluent also accepts the same unqualified name).
func namesMatch(reader, writer avro.NamedSchema) bool {
	if reader.FullName() == writer.FullName() || reader.Name() == writer.Name() {
		return true
	}
	return slices.Contains(reader.Aliases(), writer.FullName())
}

// avroCanRead returns why reader cannot read what writer wrote; seen stops recursion on
// recursive named types.
func avroCanRead(reader, writer avro.Schema, path string, seen map[[2]string]bool) []string {
	reader, writer = deref(reader), deref(writer)
	if wu, ok := writer.(*avro.UnionSchema); ok {
		// Every branch the writer may have written must be readable.
		var out []string
		for _, b := range wu.Types() {
			out = append(out, avroCanRead(reader, b, path, seen)...)
		}
		return out
	}
	if ru, ok := reader.(*avro.UnionSchema); ok {
		for _, b := range ru.Types() {
			if len(avroCanRead(b, writer, path, seen)) == 0 {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: reader union lacks a branch for the writer's %s", path, writer.Type())}
	}
	if reader.Type() != writer.Type() {
		if slices.Contains(promotable[reader.Type()], writer.Type()) {
			return nil
		}
		return []string{fmt.Sprintf("%s: type %s cannot be read as %s", path, writer.Type(), reader.Type())}
	}
	switch r := reader.(type) {
	case *avro.RecordSchema:
		w := writer.(*avro.RecordSchema)
		if !namesMatch(r, w) {
			return []string{fmt.Sprintf("%s: record name %s does not match %s", path, w.FullName(), r.FullName())}
		}
		key := [2]string{r.FullName() + r.String(), w.FullName() + w.String()}
		if seen[key] {
			return nil
		}
		seen[key] = true
		var out []string
		for _, rf := range r.Fields() {
			wf := writerField(w, rf)
			if wf == nil {
				if !rf.HasDefault() {
					out = append(out, fmt.Sprintf("%s%s: reader field has no default and the writer has no such field", path, rf.Name()))
				}
				continue
			}
			out = append(out, avroCanRead(rf.Type(), wf.Type(), path+rf.Name()+"/", seen)...)
		}
		return out
	case *avro.EnumSchema:
		w := writer.(*avro.EnumSchema)
		if !namesMatch(r, w) {
			return []string{fmt.Sprintf("%s: enum name %s does not match %s", path, w.FullName(), r.FullName())}
		}
		if r.HasDefault() {
			return nil
		}
		var out []string
		for _, s := range w.Symbols() {
			if !slices.Contains(r.Symbols(), s) {
				out = append(out, fmt.Sprintf("%s: reader enum %s lacks symbol %s and has no default", path, r.FullName(), s))
			}
		}
		return out
	case *avro.FixedSchema:
		w := writer.(*avro.FixedSchema)
		if !namesMatch(r, w) || r.Size() != w.Size() {
			return []string{fmt.Sprintf("%s: fixed %s(%d) cannot be read as %s(%d)", path, w.FullName(), w.Size(), r.FullName(), r.Size())}
		}
		return nil
	case *avro.ArraySchema:
		return avroCanRead(r.Items(), writer.(*avro.ArraySchema).Items(), path+"items/", seen)
	case *avro.MapSchema:
		return avroCanRead(r.Values(), writer.(*avro.MapSchema).Values(), path+"values/", seen)
	}
	return nil
}

// writerField finds the writer's field for a reader field, by name or by the reader
// field's aliases.
func writerField(w *avro.RecordSchema, rf *avro.Field) *avro.Field {
	for _, wf := range w.Fields() {
		if wf.Name() == rf.Name() || slices.Contains(rf.Aliases(), wf.Name()) {
			return wf
		}
	}
	return nil
}
