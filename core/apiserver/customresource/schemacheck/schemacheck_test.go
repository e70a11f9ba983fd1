package schemacheck

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// schemas reads a v1 OpenAPI schema written as JSON into the internal schema the
// library's validator is built from and the structural schema the checker is built from.
func schemas(t *testing.T, schemaJSON string) (*apiextensionsinternal.JSONSchemaProps, *structuralschema.Structural) {
	t.Helper()
	var v1 apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(schemaJSON), &v1); err != nil {
		t.Fatalf("schema: %v", err)
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, internal, nil); err != nil {
		t.Fatalf("converting the schema: %v", err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatalf("structural: %v", err)
	}
	return internal, s
}

const testSchema = `{"type":"object","properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},
  "metadata":{"type":"object","properties":{"name":{"type":"string","maxLength":10}}},
  "spec":{"type":"object","required":["count"],"minProperties":1,"maxProperties":12,"properties":{
    "count":{"type":"integer","minimum":0,"maximum":10,"exclusiveMaximum":true},
    "whole":{"type":"number","minimum":0.5},
    "ratio":{"type":"number","minimum":-1.5,"maximum":1.5,"exclusiveMinimum":true},
    "above":{"type":"number","minimum":-0.5,"exclusiveMinimum":true},
    "name":{"type":"string","minLength":2,"maxLength":5,"pattern":"^[a-zé]+$"},
    "mode":{"type":"string","enum":["on","off"]},
    "flag":{"type":"boolean"},
    "tags":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","maxLength":3}},
    "labels":{"type":"object","additionalProperties":{"type":"integer","maximum":5}},
    "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
    "any":{"x-kubernetes-preserve-unknown-fields":true},
    "maybe":{"type":"string","nullable":true},
    "template":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true,
      "properties":{"spec":{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}}}}}}}`

// TestPassesAgreesWithLibrary compares the checker's verdict with apiextensions-apiserver's
// schema validator (kube-openapi's) on the same objects: the checker must never pass an
// object the library rejects, and must pass the valid objects the test names.
func TestPassesAgreesWithLibrary(t *testing.T) {
	internal, s := schemas(t, testSchema)
	checker := New(s)
	if checker == nil {
		t.Fatal("no checker built for a schema it mirrors")
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, spec string
		valid      bool
		// decided is false where the checker leaves a valid object to the library.
		decided bool
	}{
		{"valid", `{"count":3,"ratio":0.5,"name":"abé","mode":"on","flag":true,"tags":["a"],"labels":{"x":5},"free":{"a":[1,{"b":null}]},
		  "any":[1,"x"],"maybe":"m","template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"n":1}}}`, true, true},
		{"minimal", `{"count":0}`, true, true},
		{"integer as number", `{"count":0,"ratio":1}`, true, true},
		{"integer on a number with a fractional bound", `{"count":0,"whole":1}`, true, true},
		// kube-openapi compares it with the bound truncated: valid there, left to it here.
		{"integer under a fractional bound", `{"count":0,"whole":0}`, true, false},
		{"null where nullable", `{"count":0,"maybe":null}`, true, false},
		{"integral float for integer", `{"count":1.0}`, true, false},
		// Truncated, the bound is 0, and 0 is not above it: the library rejects what a
		// comparison as numbers alone would pass.
		{"integer above a negative fractional bound", `{"count":0,"above":0}`, false, true},
		{"integer above a negative fractional bound, as a number", `{"count":0,"above":0.0}`, true, true},
		{"required", `{"ratio":0}`, false, true},
		{"minProperties", `{}`, false, true},
		{"maxProperties", `{"count":0,"whole":1,"ratio":0,"name":"ab","mode":"on","flag":true,"tags":["a"],"labels":{},"free":{},"any":1,"maybe":"a","template":{},"extra":1}`, false, true},
		{"exclusive maximum", `{"count":10}`, false, true},
		{"minimum", `{"count":-1}`, false, true},
		{"exclusive minimum", `{"count":0,"ratio":-1.5}`, false, true},
		{"maximum", `{"count":0,"ratio":1.6}`, false, true},
		{"integer type", `{"count":"3"}`, false, true},
		{"fraction for integer", `{"count":1.5}`, false, true},
		{"number type", `{"count":0,"ratio":"x"}`, false, true},
		{"minLength", `{"count":0,"name":"a"}`, false, true},
		{"maxLength counts runes", `{"count":0,"name":"ééééé"}`, true, true},
		{"maxLength", `{"count":0,"name":"abcdef"}`, false, true},
		{"pattern", `{"count":0,"name":"AB"}`, false, true},
		{"enum", `{"count":0,"mode":"auto"}`, false, true},
		{"boolean type", `{"count":0,"flag":"true"}`, false, true},
		{"minItems", `{"count":0,"tags":[]}`, false, true},
		{"maxItems", `{"count":0,"tags":["a","b","c","d"]}`, false, true},
		{"items", `{"count":0,"tags":["abcd"]}`, false, true},
		{"array type", `{"count":0,"tags":"a"}`, false, true},
		{"additional properties", `{"count":0,"labels":{"x":6}}`, false, true},
		{"object type", `{"count":0,"labels":[]}`, false, true},
		{"embedded resource", `{"count":0,"template":{"spec":{"n":0}}}`, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			body := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":` + c.spec + `}`
			if err := u.UnmarshalJSON([]byte(body)); err != nil {
				t.Fatalf("object: %v", err)
			}
			errs := apiservervalidation.ValidateCustomResource(nil, u.Object, validator)
			if (len(errs) == 0) != c.valid {
				t.Fatalf("the library's validator reports %v; the case says valid: %v", errs, c.valid)
			}
			got := checker.Passes(u.Object)
			if got && len(errs) > 0 {
				t.Fatalf("the checker passes an object the library rejects: %v", errs)
			}
			if c.valid && c.decided && !got {
				t.Fatal("the checker leaves a valid object to the library")
			}
		})
	}
	long := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": strings.Repeat("n", 11)}, "spec": map[string]any{"count": int64(0)}}}
	if checker.Passes(long.Object) || len(apiservervalidation.ValidateCustomResource(nil, long.Object, validator)) == 0 {
		t.Fatal("metadata.name over its maxLength passed")
	}
}

// TestNewDeclines checks that no checker is built where it would not mirror the
// library exactly.
func TestNewDeclines(t *testing.T) {
	for _, c := range []struct{ name, prop string }{
		{"format", `{"type":"string","format":"date-time"}`},
		{"multipleOf", `{"type":"integer","multipleOf":2}`},
		{"int-or-string", `{"x-kubernetes-int-or-string":true}`},
		{"anyOf", `{"type":"integer","anyOf":[{"minimum":1},{"maximum":-1}]}`},
		{"non-string enum", `{"type":"integer","enum":[1,2]}`},
		{"huge bound", `{"type":"integer","maximum":1e300}`},
		{"fractional bound on an integer", `{"type":"integer","minimum":0.5}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := schemas(t, `{"type":"object","properties":{"spec":{"type":"object","properties":{"x":`+c.prop+`}}}}`)
			if New(s) != nil {
				t.Fatal("a checker was built")
			}
		})
	}
}
