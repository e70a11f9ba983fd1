package openapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// jsonWriter emits JSON directly. The documents are a few MB and built at server start;
// kube-openapi's reflective marshaller spent most of the start-up budget on them, while
// the subset of OpenAPI we emit is small and fixed. Keys are written in sorted order so
// the bytes, and therefore the hashes and ETags, are stable.
type jsonWriter struct {
	b   []byte
	err error
}

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }

// str appends s as a JSON string.
func (w *jsonWriter) str(s string) {
	const hex = "0123456789abcdef"
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			w.b = append(w.b, s[start:i]...)
			switch c {
			case '"', '\\':
				w.b = append(w.b, '\\', c)
			case '\n':
				w.b = append(w.b, '\\', 'n')
			case '\r':
				w.b = append(w.b, '\\', 'r')
			case '\t':
				w.b = append(w.b, '\\', 't')
			default:
				w.b = append(w.b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			// Invalid UTF-8 becomes U+FFFD, and the JS line separators are escaped, as encoding/json does.
			w.b = append(w.b, s[start:i]...)
			if r == utf8.RuneError {
				w.b = append(w.b, `\ufffd`...)
			} else {
				w.b = append(w.b, `\u202`...)
				w.b = append(w.b, hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}

// key appends `,"k":` (or without the comma at the start of an object).
func (w *jsonWriter) key(k string) {
	if n := len(w.b); n > 0 && w.b[n-1] != '{' && w.b[n-1] != '[' {
		w.b = append(w.b, ',')
	}
	w.str(k)
	w.b = append(w.b, ':')
}

// sep appends a comma unless an array or object was just opened.
func (w *jsonWriter) sep() {
	if n := len(w.b); n > 0 && w.b[n-1] != '{' && w.b[n-1] != '[' {
		w.b = append(w.b, ',')
	}
}

func (w *jsonWriter) strings(list []string) {
	w.b = append(w.b, '[')
	for i, s := range list {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

// value appends an arbitrary value; only extensions and defaults take this path.
func (w *jsonWriter) value(v any) {
	switch v := v.(type) {
	case string:
		w.str(v)
	case bool:
		w.b = strconv.AppendBool(w.b, v)
	default:
		data, err := json.Marshal(v)
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("encoding %T: %w", v, err)
		}
		w.b = append(w.b, data...)
	}
}

func (w *jsonWriter) extensions(ext spec.Extensions) {
	for _, k := range slices.Sorted(maps.Keys(ext)) {
		w.key(k)
		w.value(ext[k])
	}
}

// schema appends s. It covers exactly the fields schemaBuilder and the operation
// renderers set; TestSchemaWriterMatchesKubeOpenAPI holds it to kube-openapi's marshaller.
func (w *jsonWriter) schema(s *spec.Schema) {
	w.raw("{")
	if ref := s.Ref.String(); ref != "" {
		w.key("$ref")
		w.str(ref)
	}
	if ap := s.AdditionalProperties; ap != nil {
		w.key("additionalProperties")
		if ap.Schema != nil {
			w.schema(ap.Schema)
		} else {
			w.value(ap.Allows)
		}
	}
	if len(s.AllOf) > 0 {
		w.key("allOf")
		w.schemas(s.AllOf)
	}
	if s.Default != nil {
		w.key("default")
		w.value(s.Default)
	}
	if s.Description != "" {
		w.key("description")
		w.str(s.Description)
	}
	if s.Format != "" {
		w.key("format")
		w.str(s.Format)
	}
	if s.Items != nil && s.Items.Schema != nil {
		w.key("items")
		w.schema(s.Items.Schema)
	}
	if len(s.OneOf) > 0 {
		w.key("oneOf")
		w.schemas(s.OneOf)
	}
	if len(s.Properties) > 0 {
		w.key("properties")
		w.raw("{")
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			w.key(name)
			p := s.Properties[name]
			w.schema(&p)
		}
		w.raw("}")
	}
	if len(s.Required) > 0 {
		w.key("required")
		w.strings(s.Required)
	}
	switch len(s.Type) {
	case 0:
	case 1:
		w.key("type")
		w.str(s.Type[0])
	default:
		w.key("type")
		w.strings(s.Type)
	}
	if s.UniqueItems {
		w.key("uniqueItems")
		w.raw("true")
	}
	w.extensions(s.Extensions)
	w.raw("}")
}

func (w *jsonWriter) schemas(list []spec.Schema) {
	w.raw("[")
	for i := range list {
		w.sep()
		w.schema(&list[i])
	}
	w.raw("]")
}

// definitionsJSON caches each definition's encoding: the per-group v3 documents share
// most of their schemas (PodSpec appears in core/v1 and apps/v1).
type definitionsJSON struct {
	b     *schemaBuilder
	cache map[string][]byte
}

func (d *definitionsJSON) write(w *jsonWriter, names []string) {
	w.raw("{")
	for _, name := range names {
		enc, ok := d.cache[name]
		if !ok {
			sub := jsonWriter{}
			sub.schema(d.b.defs[name])
			if sub.err != nil && w.err == nil {
				w.err = fmt.Errorf("definition %s: %w", name, sub.err)
			}
			enc = sub.b
			d.cache[name] = enc
		}
		w.key(name)
		w.b = append(w.b, enc...)
	}
	w.raw("}")
}
