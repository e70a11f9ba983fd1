package customresource

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/wasmplane/wasmplane/core/apiserver/registry"
)

// TestCoerceIsIdempotent checks what DefaultPruned relies on: an object the version's
// coercer has pruned comes out of Default (prune again, then default) exactly as out of
// DefaultPruned (default only), for objects the first pass changes in every way it can
// (unknown fields at the top, in spec, in metadata and in an embedded object's metadata,
// nulls in non-nullable fields, odd metadata) and objects it leaves alone.
func TestCoerceIsIdempotent(t *testing.T) {
	crd := testCRD()
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	spec := props["spec"]
	spec.Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	spec.Properties["maybe"] = apiextensionsv1.JSONSchemaProps{Type: "string", Nullable: true}
	spec.Properties["template"] = apiextensionsv1.JSONSchemaProps{Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr.To(true)}
	spec.Properties["free"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	spec.Properties["items"] = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"n": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte(`1`)}}}}}}
	props["spec"] = spec
	versions, err := Build(crd)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := versions[0].Resource.Strategy.(registry.PrunedDefaulter)
	if !ok {
		t.Fatal("the custom resource strategy does not default pruned objects")
	}
	objects := map[string]map[string]any{
		"valid": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t", "namespace": "ns"},
			"spec": map[string]any{"replicas": int64(2), "color": "red", "items": []any{map[string]any{}}}},
		"unknown fields": {"apiVersion": "example.com/v1", "kind": "Thing", "extra": true,
			"metadata": map[string]any{"name": "t", "namespace": "ns", "unknownMeta": "x", "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"replicas": int64(2), "nope": "x", "items": []any{map[string]any{"n": int64(3), "m": "x"}}}},
		"nulls": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t", "namespace": "ns", "creationTimestamp": nil},
			"spec": map[string]any{"size": nil, "maybe": nil, "color": nil}},
		"embedded": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t", "namespace": "ns"},
			"spec": map[string]any{"template": map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "junk": int64(1), "labels": map[string]any{"x": "y"}},
				"spec": map[string]any{"anything": []any{"goes"}}}, "free": map[string]any{"a": map[string]any{"b": nil}}}},
		"odd metadata": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t", "generateName": "t-", "generation": 3.0,
			"annotations": map[string]any{}, "finalizers": []any{"a/b"}, "creationTimestamp": "2026-12-06T20:00:00Z"}, "spec": map[string]any{}},
	}
	for name, content := range objects {
		t.Run(name, func(t *testing.T) {
			pruned := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(content)}
			if _, err := versions[0].Coerce(pruned); err != nil {
				t.Fatal(err)
			}
			full := pruned.DeepCopy()
			versions[0].Resource.Strategy.Default(full)
			quick := pruned.DeepCopy()
			st.DefaultPruned(quick)
			if !reflect.DeepEqual(full.Object, quick.Object) {
				t.Fatalf("Default gives %v, DefaultPruned %v", full.Object, quick.Object)
			}
		})
	}
}

// TestCoerceWithoutEmbeddedResources checks that leaving out the embedded-resource
// coercion walk for a schema without embedded resources changes neither the object nor
// the unknown fields reported.
func TestCoerceWithoutEmbeddedResources(t *testing.T) {
	versions, err := Build(testCRD())
	if err != nil {
		t.Fatal(err)
	}
	quick := versions[0].Resource.Strategy.(*strategy).coerce
	if quick.embedded {
		t.Fatal("testCRD has no embedded resource, yet its coercer walks for them")
	}
	full := *quick
	full.embedded = true
	for name, content := range map[string]map[string]any{
		"valid": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t", "namespace": "ns"},
			"spec": map[string]any{"replicas": int64(2)}},
		"unknown fields": {"apiVersion": "example.com/v1", "kind": "Thing", "extra": true,
			"metadata": map[string]any{"name": "t", "junk": "x"}, "spec": map[string]any{"nope": map[string]any{"metadata": map[string]any{"name": int64(1)}}}},
		"object-like spec": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t"},
			"spec": map[string]any{"apiVersion": int64(1), "kind": nil, "metadata": "x"}, "status": map[string]any{"replicas": nil}},
	} {
		t.Run(name, func(t *testing.T) {
			a := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(content)}
			b := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(content)}
			ua, erra := quick.apply(a)
			ub, errb := full.apply(b)
			if !reflect.DeepEqual(a.Object, b.Object) || !reflect.DeepEqual(ua, ub) || (erra == nil) != (errb == nil) {
				t.Fatalf("without the walk %v %v %v; with it %v %v %v", a.Object, ua, erra, b.Object, ub, errb)
			}
		})
	}
}
