package customresource

import (
	"context"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func testCRD() *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"replicas": {Type: "integer", Minimum: ptr.To(0.0)},
			"color":    {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}},
		}, XValidations: apiextensionsv1.ValidationRules{{Rule: "!has(self.replicas) || self.replicas < 10", Message: "too many"}}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
	}}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped, Names: names,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
						Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}}},
				{Name: "v1beta1", Served: true, Deprecated: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema}},
				{Name: "v0", Served: false},
			}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names},
	}
}

func thing(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "t", "namespace": "ns"}, "spec": spec}}
}

func TestBuild(t *testing.T) {
	versions, err := Build(testCRD())
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 2 {
		t.Fatalf("%d versions built, want v1 and v1beta1 (v0 is neither served nor stored)", len(versions))
	}
	v1, beta := versions[0], versions[1]
	if v1.Status == nil || v1.Scale == nil || beta.Status != nil {
		t.Fatalf("subresources: v1 status %v scale %v, v1beta1 status %v", v1.Status != nil, v1.Scale != nil, beta.Status != nil)
	}
	if beta.Deprecation != "example.com/v1beta1 Thing is deprecated" || v1.Deprecation != "" || beta.StorageVersion != "v1" {
		t.Fatalf("deprecation %q / %q, storage version %q", v1.Deprecation, beta.Deprecation, beta.StorageVersion)
	}
	if _, err := Build(&apiextensionsv1.CustomResourceDefinition{}); err == nil {
		t.Fatal("a CRD without accepted names was built")
	}
}

func TestCoerceAndValidate(t *testing.T) {
	versions, err := Build(testCRD())
	if err != nil {
		t.Fatal(err)
	}
	v1 := versions[0]
	cases := []struct {
		name    string
		obj     *unstructured.Unstructured
		unknown []string
		errs    []string
	}{
		{"valid, defaulted", thing(map[string]any{"replicas": int64(1)}), nil, nil},
		{"unknown field pruned", thing(map[string]any{"bogus": true}), []string{"spec.bogus"}, nil},
		// The scale check reports the replicas path as written in the CRD, as Kubernetes does.
		{"schema", thing(map[string]any{"replicas": int64(-1)}), nil, []string{"spec.replicas", ".spec.replicas"}},
		{"CEL", thing(map[string]any{"replicas": int64(12)}), nil, []string{"spec"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unknown, err := v1.Coerce(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(unknown, c.unknown) {
				t.Errorf("unknown fields %v, want %v", unknown, c.unknown)
			}
			v1.Resource.Strategy.Default(c.obj)
			if color, _, _ := unstructured.NestedString(c.obj.Object, "spec", "color"); color != "blue" {
				t.Errorf("spec.color not defaulted: %v", c.obj.Object["spec"])
			}
			var got []string
			for _, e := range v1.Resource.Strategy.Validate(context.Background(), c.obj) {
				got = append(got, e.Field)
			}
			if !slices.Equal(got, c.errs) {
				t.Errorf("errors on %v, want %v", got, c.errs)
			}
		})
	}
}

func TestScale(t *testing.T) {
	spec := &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.selector")}
	obj := thing(map[string]any{"replicas": int64(2)})
	obj.Object["status"] = map[string]any{"replicas": int64(1), "selector": "a=b"}
	s, err := ToScale(spec, obj)
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.Replicas != 2 || s.Status.Replicas != 1 || s.Status.Selector != "a=b" || s.Name != "t" {
		t.Fatalf("scale %+v", s)
	}
	SetReplicas(spec, obj, 5)
	if r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); r != 5 {
		t.Fatalf("replicas %d", r)
	}
	empty, err := ToScale(spec, thing(map[string]any{}))
	if err != nil || empty.Spec.Replicas != 0 {
		t.Fatalf("missing replicas: %+v %v", empty, err)
	}
}
