package schemaregistry

import (
	"fmt"

	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf compatibility follows the rules of Confluent's ProtobufSchema checker: a
// changed package, a removed message, a field whose kind, scalar type, named type or
// label changed, a required field added or removed, a field removed from a oneof, or
// several existing fields moved into one new oneof break compatibility. Added or removed
// (optional) fields, messages, enums and enum values, renamed fields and new oneofs do
// not. The check is symmetric, so it is the same in both directions.

func protocompileReporter(msgs *[]string) reporter.Reporter {
	return reporter.NewReporter(func(err reporter.ErrorWithPos) error {
		*msgs = append(*msgs, err.Error())
		return nil
	}, nil)
}

func protoCompatible(reader, writer protoreflect.FileDescriptor) []string {
	var out []string
	if reader.Package() != writer.Package() {
		out = append(out, fmt.Sprintf("package changed from %q to %q", writer.Package(), reader.Package()))
	}
	// Messages are matched by name relative to the package, so a package change is
	// reported once above rather than as every message removed.
	rm := map[string]protoreflect.MessageDescriptor{}
	collectMessages(reader.Messages(), reader.Package(), rm)
	wm := map[string]protoreflect.MessageDescriptor{}
	collectMessages(writer.Messages(), writer.Package(), wm)
	for _, name := range sortedKeys(wm) {
		r, ok := rm[name]
		if !ok {
			out = append(out, fmt.Sprintf("message %s removed", name))
			continue
		}
		out = append(out, protoMessageCompatible(r, wm[name], name)...)
	}
	return out
}

func collectMessages(ms protoreflect.MessageDescriptors, pkg protoreflect.FullName, into map[string]protoreflect.MessageDescriptor) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		name := string(m.FullName())
		if pkg != "" {
			name = name[len(pkg)+1:]
		}
		into[name] = m
		collectMessages(m.Messages(), pkg, into)
	}
}

func relName(d protoreflect.Descriptor) string {
	name := string(d.FullName())
	if pkg := d.ParentFile().Package(); pkg != "" {
		name = name[len(pkg)+1:]
	}
	return name
}

func fieldKind(f protoreflect.FieldDescriptor) (kind, named string) {
	switch {
	case f.IsMap():
		k, _ := fieldKind(f.MapKey())
		v, vn := fieldKind(f.MapValue())
		return "map<" + k + "," + v + vn + ">", ""
	case f.Message() != nil:
		return "message", relName(f.Message())
	case f.Enum() != nil:
		return "enum", relName(f.Enum())
	}
	return f.Kind().String(), ""
}

func protoMessageCompatible(r, w protoreflect.MessageDescriptor, name string) []string {
	var out []string
	rf, wf := r.Fields(), w.Fields()
	movedToNewOneof := map[string]int{}
	for i := 0; i < wf.Len(); i++ {
		f := wf.Get(i)
		g := rf.ByNumber(f.Number())
		where := fmt.Sprintf("%s field %d (%s)", name, f.Number(), f.Name())
		if g == nil {
			switch {
			case f.Cardinality() == protoreflect.Required:
				out = append(out, where+": required field removed")
			case f.ContainingOneof() != nil && !f.ContainingOneof().IsSynthetic():
				out = append(out, where+": field removed from oneof")
			}
			continue
		}
		fk, fn := fieldKind(f)
		gk, gn := fieldKind(g)
		switch {
		case (f.Message() == nil) != (g.Message() == nil) || (f.Enum() == nil) != (g.Enum() == nil) || f.IsMap() != g.IsMap():
			out = append(out, fmt.Sprintf("%s: kind changed from %s to %s", where, fk, gk))
		case fk != gk:
			out = append(out, fmt.Sprintf("%s: scalar type changed from %s to %s", where, fk, gk))
		case fn != gn:
			out = append(out, fmt.Sprintf("%s: type changed from %s to %s", where, fn, gn))
		}
		if f.IsList() != g.IsList() {
			out = append(out, where+": label changed between repeated and singular")
		}
		if (f.Cardinality() == protoreflect.Required) != (g.Cardinality() == protoreflect.Required) {
			out = append(out, where+": required changed")
		}
		fo, go_ := realOneof(f), realOneof(g)
		if fo == "" && go_ != "" && r.Oneofs().ByName(protoreflect.Name(go_)) != nil && w.Oneofs().ByName(protoreflect.Name(go_)) == nil {
			movedToNewOneof[go_]++
		}
	}
	for i := 0; i < rf.Len(); i++ {
		g := rf.Get(i)
		if wf.ByNumber(g.Number()) == nil && g.Cardinality() == protoreflect.Required {
			out = append(out, fmt.Sprintf("%s field %d (%s): required field added", name, g.Number(), g.Name()))
		}
	}
	for _, o := range sortedKeys(movedToNewOneof) {
		if movedToNewOneof[o] > 1 {
			out = append(out, fmt.Sprintf("%s: several existing fields moved into new oneof %s", name, o))
		}
	}
	return out
}

func realOneof(f protoreflect.FieldDescriptor) string {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return string(o.Name())
	}
	return ""
}
