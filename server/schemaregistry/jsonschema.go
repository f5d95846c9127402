package schemaregistry

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// JSON Schema compatibility follows the rules of Confluent's JSON schema diff: the
// reader must accept every document the writer accepts. Types may be extended (and
// integer read as number) but not narrowed; a closed content model
// (additionalProperties false) may gain optional properties but not lose them; an open
// one may lose properties but not gain constrained ones; required may shrink but not
// grow; enums may grow but not shrink; bounds (minimum, maximum, minLength, maxLength,
// minItems, maxItems, minProperties, maxProperties) may loosen but not tighten; and
// additionalProperties may only be widened.

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }

func asObject(s any) (map[string]any, bool) {
	switch v := s.(type) {
	case map[string]any:
		return v, true
	case bool:
		if v {
			return map[string]any{}, true
		}
		return map[string]any{"not": map[string]any{}}, true
	}
	return nil, false
}

// types returns a schema's types; nil means any.
func jsonTypes(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

func isFalse(s any) bool {
	if b, ok := s.(bool); ok {
		return !b
	}
	if m, ok := s.(map[string]any); ok {
		_, not := m["not"]
		return not && len(m) == 1
	}
	return false
}

// open reports whether an object schema accepts properties it does not list.
func open(s map[string]any) bool {
	ap, ok := s["additionalProperties"]
	return !ok || !isFalse(ap)
}

func jsonCanRead(reader, writer any, path string) []string {
	r, ok1 := asObject(reader)
	w, ok2 := asObject(writer)
	if !ok1 || !ok2 {
		return []string{path + ": not a schema"}
	}
	if isFalse(w) {
		return nil
	}
	if isFalse(r) {
		return []string{path + ": reader accepts nothing"}
	}
	var out []string
	rt, wt := jsonTypes(r), jsonTypes(w)
	if rt != nil {
		if wt == nil {
			out = append(out, fmt.Sprintf("%s: type narrowed from any to %v", path, rt))
		}
		for _, t := range wt {
			if !slices.Contains(rt, t) && !(t == "integer" && slices.Contains(rt, "number")) {
				out = append(out, fmt.Sprintf("%s: type narrowed: %s no longer accepted", path, t))
			}
		}
	}
	// Enum: every writer value must still be allowed.
	if re, ok := r["enum"].([]any); ok {
		we, _ := w["enum"].([]any)
		if we == nil {
			out = append(out, path+": enum added")
		}
		for _, v := range we {
			if !slices.ContainsFunc(re, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
				out = append(out, fmt.Sprintf("%s: enum narrowed: %v removed", path, v))
			}
		}
	}
	// Lower bounds may only decrease, upper bounds only increase.
	for _, k := range []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"} {
		if rv, ok := num(r[k]); ok {
			if wv, ok := num(w[k]); !ok || rv > wv {
				out = append(out, fmt.Sprintf("%s: %s tightened", path, k))
			}
		}
	}
	for _, k := range []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"} {
		if rv, ok := num(r[k]); ok {
			if wv, ok := num(w[k]); !ok || rv < wv {
				out = append(out, fmt.Sprintf("%s: %s tightened", path, k))
			}
		}
	}
	// Required may only shrink.
	wreq := map[string]bool{}
	for _, x := range asSlice(w["required"]) {
		wreq[fmt.Sprint(x)] = true
	}
	for _, x := range asSlice(r["required"]) {
		if !wreq[fmt.Sprint(x)] {
			out = append(out, fmt.Sprintf("%s: property %v became required", path, x))
		}
	}
	rp, _ := r["properties"].(map[string]any)
	wp, _ := w["properties"].(map[string]any)
	for _, name := range sortedKeys(wp) {
		p := path + "/properties/" + name
		if rs, ok := rp[name]; ok {
			out = append(out, jsonCanRead(rs, wp[name], p)...)
			continue
		}
		// Removed: a reader with a closed model rejects it, an open one reads it through
		// additionalProperties.
		if !open(r) {
			out = append(out, p+": property removed from a closed content model")
		} else if ap, ok := r["additionalProperties"]; ok {
			out = append(out, jsonCanRead(ap, wp[name], p)...)
		}
	}
	for _, name := range sortedKeys(rp) {
		if _, ok := wp[name]; ok {
			continue
		}
		p := path + "/properties/" + name
		// Added: a writer with an open model may have written anything under the name.
		if open(w) {
			ap := w["additionalProperties"]
			if ap == nil {
				ap = true
			}
			if msgs := jsonCanRead(rp[name], ap, p); len(msgs) > 0 {
				out = append(out, p+": property added to an open content model")
			}
		}
	}
	if rap, ok := r["additionalProperties"]; ok {
		wap, wok := w["additionalProperties"]
		if !wok {
			wap = true
		}
		for _, m := range jsonCanRead(rap, wap, path+"/additionalProperties") {
			out = append(out, "additionalProperties narrowed: "+m)
		}
	}
	if ri, ok := r["items"]; ok {
		wi, wok := w["items"]
		if !wok {
			wi = true
		}
		out = append(out, jsonCanRead(ri, wi, path+"/items")...)
	}
	return out
}

// num reads a number as the JSON decoder left it (the library decodes json.Number).
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
