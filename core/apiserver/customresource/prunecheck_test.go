package customresource

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
)

// structuralFromJSON is the structural schema of version v1 of a CRD whose schema is
// schemaJSON, as the read path builds it.
func structuralFromJSON(t *testing.T, schemaJSON string) *structuralschema.Structural {
	t.Helper()
	var props apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(schemaJSON), &props); err != nil {
		t.Fatalf("schema: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &props}}}}}
	r, err := newReadSchemas(crd)
	if err != nil {
		t.Fatal(err)
	}
	return r.schemas["v1"]
}

// pruneSchema has what the two walks treat differently: nested objects, lists of
// scalars and of objects, additionalProperties, nullable fields, fields with defaults,
// a root that declares metadata's fields, and a list without an item schema.
const pruneSchema = `{"type":"object","properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},
  "metadata":{"type":"object","properties":{"name":{"type":"string"},"labels":{"type":"object","additionalProperties":{"type":"string"}}}},
  "spec":{"type":"object","properties":{
    "a":{"type":"string"},"n":{"type":"integer","nullable":true},"d":{"type":"integer","default":3},
    "o":{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"object","properties":{"z":{"type":"boolean"}}}}},
    "l":{"type":"array","items":{"type":"string"}},
    "lo":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"},"v":{"type":"integer","nullable":true}}}},
    "m":{"type":"object","additionalProperties":{"type":"object","properties":{"q":{"type":"string"}}}}}},
  "status":{"type":"object","nullable":true,"properties":{"phase":{"type":"string"}}}}}`

// TestPruneIndexAgreesWithTheWalks: on random objects, some written by the schema and
// some with unknown fields and nulls in every place, unchanged answers true only for
// objects the library's walks leave exactly as they are and report nothing for, and it
// answers true for most of those.
func TestPruneIndexAgreesWithTheWalks(t *testing.T) {
	s := structuralFromJSON(t, pruneSchema)
	ix := newPruneIndex(s)
	if ix == nil {
		t.Fatal("no index for a schema it follows")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	odd := func() bool { return rng.IntN(12) == 0 }
	scalar := func() any {
		if odd() {
			return nil
		}
		return []any{"s", int64(1), true, 1.5}[rng.IntN(4)]
	}
	var junk func(depth int) any
	junk = func(depth int) any {
		if depth > 2 || rng.IntN(2) == 0 {
			return scalar()
		}
		if rng.IntN(2) == 0 {
			return []any{junk(depth + 1)}
		}
		return map[string]any{"j": junk(depth + 1)}
	}
	field := func(m map[string]any, k string, v func() any) {
		if rng.IntN(3) == 0 {
			return
		}
		if odd() {
			m[k] = nil
			return
		}
		m[k] = v()
	}
	object := func() map[string]any {
		spec := map[string]any{}
		field(spec, "a", func() any { return "x" })
		field(spec, "n", func() any { return int64(2) })
		field(spec, "d", func() any { return int64(4) })
		field(spec, "o", func() any {
			o := map[string]any{}
			field(o, "x", func() any { return "x" })
			field(o, "y", func() any {
				y := map[string]any{}
				field(y, "z", func() any { return true })
				return y
			})
			return o
		})
		field(spec, "l", func() any { return []any{"a", scalar()} })
		field(spec, "lo", func() any {
			e := map[string]any{}
			field(e, "k", func() any { return "k" })
			field(e, "v", func() any { return int64(1) })
			if odd() {
				e["unknown"] = junk(0)
			}
			return []any{e, map[string]any{}}
		})
		field(spec, "m", func() any {
			e := map[string]any{}
			field(e, "q", func() any { return "q" })
			return map[string]any{"one": e}
		})
		if odd() {
			spec["unknown"] = junk(0)
		}
		meta := map[string]any{"name": "w"}
		field(meta, "labels", func() any { return map[string]any{"a": "b"} })
		field(meta, "creationTimestamp", func() any { return "2026-12-06T00:00:00Z" })
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta}
		field(obj, "spec", func() any { return spec })
		field(obj, "status", func() any { return map[string]any{"phase": "Ready"} })
		if odd() {
			obj["unknown"] = junk(0)
		}
		return obj
	}
	var quick, untouched int
	for i := range 5000 {
		obj := object()
		walked := runtime.DeepCopyJSON(obj)
		unknown := structuralpruning.PruneWithOptions(walked, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(walked, s)
		same := len(unknown) == 0 && reflect.DeepEqual(walked, obj)
		got := ix.unchanged(obj)
		if got && !same {
			t.Fatalf("object %d: unchanged, but the walks give %#v (unknown %v) from %#v", i, walked, unknown, obj)
		}
		if same {
			untouched++
		}
		if got {
			quick++
		}
	}
	t.Logf("%d of 5000 objects left as they were by the walks, %d of them told by the index", untouched, quick)
	if quick < untouched*9/10 || untouched < 1000 {
		t.Errorf("the index told %d of the %d objects the walks leave alone", quick, untouched)
	}
}

// TestPruneIndexDeclines: no index for the schemas whose walks it does not follow.
func TestPruneIndexDeclines(t *testing.T) {
	for name, schema := range map[string]string{
		"preserves unknown fields": `{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`,
		"embedded resource":        `{"type":"object","properties":{"spec":{"type":"object","properties":{"t":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"a":{"type":"string"}}}}}}}`,
		"root preserves":           `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			if ix := newPruneIndex(structuralFromJSON(t, schema)); ix != nil {
				t.Errorf("an index for %s", schema)
			}
		})
	}
	if (*pruneIndex)(nil).unchanged(map[string]any{}) {
		t.Error("no index says unchanged")
	}
}

// BenchmarkPruneWalks times the check on the crd bench's object beside the library's two
// walks.
func BenchmarkPruneWalks(b *testing.B) {
	props := map[string]any{}
	schema := `{"type":"object","properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},"spec":{"type":"object","properties":{`
	for f := 1; f <= 10; f++ {
		props[fmt.Sprintf("s%02d", f)] = "gadget-value"
		props[fmt.Sprintf("n%02d", f)] = int64(f)
		if f > 1 {
			schema += ","
		}
		schema += fmt.Sprintf(`"s%02d":{"type":"string","maxLength":64},"n%02d":{"type":"integer","minimum":0}`, f, f)
	}
	schema += `}}}}`
	s := structuralFromJSON(&testing.T{}, schema)
	obj := map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "g", "namespace": "default"}, "spec": props}
	ix := newPruneIndex(s)
	b.Run("index", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !ix.unchanged(obj) {
				b.Fatal("changed")
			}
		}
	})
	b.Run("walks", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			structuralpruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
		}
	})
}

// TestHasDefaults: a default anywhere the defaulting walk goes is found, and without
// one the walk leaves objects (nulls of non-nullable fields included) as they are.
func TestHasDefaults(t *testing.T) {
	for schema, want := range map[string]bool{
		`{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"}}}}}`:                                                          false,
		`{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string","default":"x"}}}}}`:                                            true,
		`{"type":"object","properties":{"spec":{"type":"array","items":{"type":"object","properties":{"a":{"type":"integer","default":1}}}}}}`:                    true,
		`{"type":"object","properties":{"spec":{"type":"object","additionalProperties":{"type":"object","properties":{"a":{"type":"boolean","default":true}}}}}}`: true,
		`{"type":"object","properties":{"spec":{"type":"object","default":{}}}}`:                                                                                  true,
	} {
		if got := hasDefaults(structuralFromJSON(t, schema)); got != want {
			t.Errorf("hasDefaults(%s) = %v, want %v", schema, got, want)
		}
	}
	s := structuralFromJSON(t, `{"type":"object","properties":{"spec":{"type":"object","properties":{
	  "a":{"type":"string"},"l":{"type":"array","items":{"type":"string"}},
	  "m":{"type":"object","additionalProperties":{"type":"object","properties":{"q":{"type":"string"}}}}}}}}`)
	obj := map[string]any{"spec": map[string]any{"a": nil, "l": []any{nil, "x"}, "m": map[string]any{"k": nil, "j": map[string]any{"q": nil}}}, "extra": nil}
	before := runtime.DeepCopyJSON(obj)
	structuraldefaulting.Default(obj, s)
	if !reflect.DeepEqual(obj, before) {
		t.Errorf("Default without defaults changed %#v into %#v", before, obj)
	}
}
