package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The interfaces apimachinery's hand-marshalled types implement so that openapi-gen can
// describe them; we honour the same contract instead of guessing from their Go layout.
type (
	openAPISchemaTyper  interface{ OpenAPISchemaType() []string }
	openAPISchemaFormat interface{ OpenAPISchemaFormat() string }
	openAPIV3OneOfTyper interface{ OpenAPIV3OneOfTypes() []string }
	swaggerDocer        interface{ SwaggerDoc() map[string]string }
)

const (
	extGVK           = "x-kubernetes-group-version-kind"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extIntOrString   = "x-kubernetes-int-or-string"
	extPreserve      = "x-kubernetes-preserve-unknown-fields"
	extAction        = "x-kubernetes-action"
)

// builtinDescriptions covers the apimachinery types that have no generated SwaggerDoc
// because they are hand-written wrappers; kubectl explain would otherwise print <empty>.
func builtinDescriptions() map[reflect.Type]string {
	return map[reflect.Type]string{
		reflect.TypeFor[resource.Quantity](): "Quantity is a fixed-point decimal number with an optional SI or binary suffix, serialized as a string such as \"100m\", \"1.5\", \"128Mi\" or \"2Gi\". " +
			"Binary suffixes are Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024); decimal suffixes are m, k, M, G, T, P, E (powers of 1000); exponents such as 1e3 are accepted too. " +
			"Values keep the suffix style they were parsed with, must fit in 63 bits and have at most three decimal places.",
		reflect.TypeFor[intstr.IntOrString]():   "IntOrString holds either an int32 or a string; in JSON and YAML it is written as whichever of the two it holds, so a field of this type accepts, for example, a port number or a port name.",
		reflect.TypeFor[metav1.Time]():          "Time is a timestamp serialized as an RFC 3339 string with second precision, e.g. \"2024-01-02T15:04:05Z\".",
		reflect.TypeFor[metav1.MicroTime]():     "MicroTime is a timestamp serialized as an RFC 3339 string with microsecond precision.",
		reflect.TypeFor[metav1.Duration]():      "Duration is a time span serialized as a Go duration string such as \"1h30m\" or \"250ms\".",
		reflect.TypeFor[runtime.RawExtension](): "RawExtension is used to hold extensions in external versions. It carries an arbitrary, complete serialized object (JSON, YAML or protobuf) whose kind is given by its own apiVersion and kind fields.",
		reflect.TypeFor[metav1.FieldsV1]():      "FieldsV1 is the JSON encoding of a set of field paths, as recorded in managedFields. Keys are '.' for the field itself, 'f:<name>' for a struct field or map key, 'v:<value>' for a list item by value, 'i:<index>' for a list item by position and 'k:<keys>' for a list item by its key fields; the format is defined by sigs.k8s.io/structured-merge-diff.",
	}
}

// schemaBuilder turns Go types into named OpenAPI definitions. One builder serves one
// OpenAPI flavour because v2 and v3 differ in ref prefix and in how a ref carries siblings.
type schemaBuilder struct {
	v3        bool
	refPrefix string
	gvks      map[reflect.Type][]schema.GroupVersionKind
	descs     map[reflect.Type]string

	names map[reflect.Type]string
	refs  map[string]spec.Ref
	defs  map[string]*spec.Schema
	// deps lets each OpenAPI v3 group-version document carry only the definitions it
	// reaches, as kube-apiserver's per-group documents do.
	deps    map[string][]string
	curDeps map[string]bool
}

func newSchemaBuilder(v3 bool, gvks map[reflect.Type][]schema.GroupVersionKind) *schemaBuilder {
	prefix := "#/definitions/"
	if v3 {
		prefix = "#/components/schemas/"
	}
	return &schemaBuilder{
		v3:        v3,
		refPrefix: prefix,
		gvks:      gvks,
		descs:     builtinDescriptions(),
		names:     map[reflect.Type]string{},
		refs:      map[string]spec.Ref{},
		defs:      map[string]*spec.Schema{},
		deps:      map[string][]string{},
	}
}

// gvksByType inverts the scheme so that definitions can be tagged with every GVK a Go
// type is served as (kubectl finds the schema for a kind through that tag).
func gvksByType(s *runtime.Scheme) map[reflect.Type][]schema.GroupVersionKind {
	out := map[reflect.Type][]schema.GroupVersionKind{}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		out[t] = append(out[t], gvk)
	}
	for t, list := range out {
		slices.SortFunc(list, func(a, b schema.GroupVersionKind) int {
			if c := strings.Compare(a.Group, b.Group); c != 0 {
				return c
			}
			if c := strings.Compare(a.Version, b.Version); c != 0 {
				return c
			}
			return strings.Compare(a.Kind, b.Kind)
		})
		out[t] = list
	}
	return out
}

// definitionName derives Kubernetes' friendly definition key from the Go package path:
// the leading domain is reversed (k8s.io → io.k8s) and slashes become dots.
func definitionName(t reflect.Type) string {
	p := t.PkgPath()
	if i := strings.LastIndex(p, "/vendor/"); i >= 0 {
		p = p[i+len("/vendor/"):]
	}
	parts := strings.Split(p, "/")
	if strings.Contains(parts[0], ".") {
		domain := strings.Split(parts[0], ".")
		slices.Reverse(domain)
		parts = append(domain, parts[1:]...)
	}
	return strings.Join(parts, ".") + "." + t.Name()
}

// isDefinition reports whether t is emitted as a named definition and referenced by
// $ref; everything else (primitives, slices, maps, named scalars) is inlined, as openapi-gen does.
func isDefinition(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t.Name() != "" && t.PkgPath() != ""
}

// implements checks both value and pointer method sets because apimachinery mixes them.
func implements[I any](t reflect.Type) (I, bool) {
	var zero I
	v := reflect.New(t)
	if i, ok := v.Elem().Interface().(I); ok {
		return i, true
	}
	if i, ok := v.Interface().(I); ok {
		return i, true
	}
	return zero, false
}

// isPlainObject separates real struct definitions from hand-marshalled ones (Time,
// Quantity, …): only the former get the `default: {}` kube-apiserver puts on v3 refs.
func isPlainObject(t reflect.Type) bool {
	if !isDefinition(t) {
		return false
	}
	if _, ok := implements[openAPISchemaTyper](t); ok {
		return false
	}
	if _, ok := implements[json.Marshaler](t); ok {
		return false
	}
	return true
}

// ref returns the $ref for t, building its definition on first use.
func (b *schemaBuilder) ref(t reflect.Type) spec.Ref {
	return b.refs[b.refName(t)]
}

// refName returns the definition name of t, building the definition on first use and
// recording it as a dependency of whatever is being built.
func (b *schemaBuilder) refName(t reflect.Type) string {
	name, ok := b.names[t]
	if !ok {
		name = definitionName(t)
		b.names[t] = name
		b.refs[name] = spec.MustCreateRef(b.refPrefix + name)
		outer := b.curDeps
		b.curDeps = map[string]bool{}
		def := b.definition(t)
		deps := make([]string, 0, len(b.curDeps))
		for d := range b.curDeps {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		b.deps[name] = deps
		b.defs[name] = def
		b.curDeps = outer
	}
	if b.curDeps != nil {
		b.curDeps[name] = true
	}
	return name
}

// definition builds the named schema of t.
func (b *schemaBuilder) definition(t reflect.Type) *spec.Schema {
	s := &spec.Schema{}
	docs := swaggerDoc(t)
	s.Description = docs[""]
	if d, ok := b.descs[t]; ok && s.Description == "" {
		s.Description = d
	}
	if gvks := b.gvks[t]; len(gvks) > 0 {
		list := make([]any, 0, len(gvks))
		for _, g := range gvks {
			list = append(list, map[string]any{"group": g.Group, "version": g.Version, "kind": g.Kind})
		}
		s.AddExtension(extGVK, list)
	}
	if typer, ok := implements[openAPISchemaTyper](t); ok {
		format := ""
		if f, ok := implements[openAPISchemaFormat](t); ok {
			format = f.OpenAPISchemaFormat()
		}
		s.Format = format
		oneOf, hasOneOf := implements[openAPIV3OneOfTyper](t)
		if b.v3 && hasOneOf {
			for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
				s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
			}
		} else {
			s.Type = typer.OpenAPISchemaType()
		}
		if t == reflect.TypeFor[intstr.IntOrString]() {
			s.AddExtension(extIntOrString, true)
		}
		return s
	}
	if _, ok := implements[json.Marshaler](t); ok {
		// Custom JSON with no declared schema (RawExtension, FieldsV1) is opaque to us.
		s.Type = spec.StringOrArray{"object"}
		return s
	}
	s.Type = spec.StringOrArray{"object"}
	b.addFields(s, t)
	return s
}

// swaggerDoc returns the generated field documentation of t, keyed by JSON name.
func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := implements[swaggerDocer](t); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// addFields adds t's JSON fields to s, flattening embedded structs the way encoding/json does.
func (b *schemaBuilder) addFields(s *spec.Schema, t reflect.Type) {
	docs := swaggerDoc(t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				b.addFields(s, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop := b.fieldSchema(f.Type, docs[name])
		if ps := f.Tag.Get("patchStrategy"); ps != "" {
			prop.AddExtension(extPatchStrategy, ps)
		}
		if mk := f.Tag.Get("patchMergeKey"); mk != "" {
			prop.AddExtension(extPatchMergeKey, mk)
		}
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[name] = prop
		// Approximation of the +optional/+required markers we cannot see at runtime:
		// Kubernetes omits empty optional fields, so a non-pointer field that is always
		// serialized is treated as required.
		optional := false
		for o := range strings.SplitSeq(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				optional = true
			}
		}
		if !optional && f.Type.Kind() != reflect.Pointer {
			s.Required = append(s.Required, name)
		}
	}
}

// fieldSchema is the schema of a struct field: like elemSchema but carrying the field's
// description, which v3 cannot put next to a bare $ref.
func (b *schemaBuilder) fieldSchema(t reflect.Type, desc string) spec.Schema {
	ptr := t.Kind() == reflect.Pointer
	if ptr {
		t = t.Elem()
	}
	if isDefinition(t) {
		ref := b.ref(t)
		if !b.v3 {
			return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref, Description: desc}}
		}
		withDefault := !ptr && isPlainObject(t)
		if desc == "" && !withDefault {
			return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref}}
		}
		s := spec.Schema{SchemaProps: spec.SchemaProps{
			AllOf:       []spec.Schema{{SchemaProps: spec.SchemaProps{Ref: ref}}},
			Description: desc,
		}}
		if withDefault {
			s.Default = map[string]any{}
		}
		return s
	}
	s := b.inline(t)
	s.Description = desc
	return s
}

// elemSchema is the schema of an array item or map value.
func (b *schemaBuilder) elemSchema(t reflect.Type) spec.Schema {
	ptr := t.Kind() == reflect.Pointer
	if ptr {
		t = t.Elem()
	}
	if isDefinition(t) {
		ref := spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(t)}}
		if b.v3 && !ptr && isPlainObject(t) {
			return spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{ref}, Default: map[string]any{}}}
		}
		return ref
	}
	return b.inline(t)
}

// inline builds the schema of a type that has no definition of its own.
func (b *schemaBuilder) inline(t reflect.Type) spec.Schema {
	var s spec.Schema
	switch t.Kind() {
	case reflect.Bool:
		s.Type = spec.StringOrArray{"boolean"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int, reflect.Uint8, reflect.Uint16:
		s.Type, s.Format = spec.StringOrArray{"integer"}, "int32"
	case reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Uint:
		s.Type, s.Format = spec.StringOrArray{"integer"}, "int64"
	case reflect.Float32:
		s.Type, s.Format = spec.StringOrArray{"number"}, "float"
	case reflect.Float64:
		s.Type, s.Format = spec.StringOrArray{"number"}, "double"
	case reflect.String:
		s.Type = spec.StringOrArray{"string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json writes []byte as base64.
			s.Type, s.Format = spec.StringOrArray{"string"}, "byte"
			break
		}
		item := b.elemSchema(t.Elem())
		s.Type = spec.StringOrArray{"array"}
		s.Items = &spec.SchemaOrArray{Schema: &item}
	case reflect.Map:
		val := b.elemSchema(t.Elem())
		s.Type = spec.StringOrArray{"object"}
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &val}
	case reflect.Struct:
		s.Type = spec.StringOrArray{"object"}
		b.addFields(&s, t)
	default:
		// interface{} and anything else encoding/json can carry: accept any JSON object.
		s.Type = spec.StringOrArray{"object"}
		s.AddExtension(extPreserve, true)
	}
	return s
}

// closure returns the names of the definitions reachable from roots, including the roots.
func (b *schemaBuilder) closure(roots []string) map[string]*spec.Schema {
	out := map[string]*spec.Schema{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, seen := out[n]; seen {
			continue
		}
		out[n] = b.defs[n]
		stack = append(stack, b.deps[n]...)
	}
	return out
}
