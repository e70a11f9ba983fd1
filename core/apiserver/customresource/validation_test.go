package customresource

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// rulesCRD is a CRD whose spec has 20 fields (strings with a length limit, integers
// with a minimum) and 5 CEL rules, beside fields for the other schema checks: enum,
// pattern, maximum, required, maxItems, a map-list, an embedded resource and, when
// format is set, a date-time (which the schema checker leaves to the library).
func rulesCRD(format bool) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := 1; i <= 10; i++ {
		props[fmt.Sprintf("s%02d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To[int64](64)}
		props[fmt.Sprintf("n%02d", i)] = apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptr.To[float64](0)}
	}
	props["mode"] = apiextensionsv1.JSONSchemaProps{Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"a"`)}, {Raw: []byte(`"b"`)}}}
	props["code"] = apiextensionsv1.JSONSchemaProps{Type: "string", Pattern: "^[a-z]+$"}
	props["level"] = apiextensionsv1.JSONSchemaProps{Type: "number", Maximum: ptr.To(10.0), ExclusiveMaximum: true}
	props["when"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	if format {
		props["when"] = apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}
	}
	props["items"] = apiextensionsv1.JSONSchemaProps{Type: "array", MaxItems: ptr.To[int64](2), XListType: ptr.To("map"), XListMapKeys: []string{"name"},
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"name"},
			Properties:   map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}, "size": {Type: "integer"}},
			XValidations: apiextensionsv1.ValidationRules{{Rule: "!has(self.size) || self.size < 100", Message: "too big", FieldPath: ".size"}}}}}
	props["template"] = apiextensionsv1.JSONSchemaProps{Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr.To(true)}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props, Required: []string{"n01", "n02"},
		XValidations: apiextensionsv1.ValidationRules{
			{Rule: "self.n01 <= self.n02", Message: "n01 must not exceed n02"},
			{Rule: "self.s01 != 'forbidden'", Reason: ptr.To(apiextensionsv1.FieldValueForbidden)},
			{Rule: "!has(self.s02) || self.s02.startsWith('g')", MessageExpression: "'s02 is ' + self.s02"},
			{Rule: "self.n03 + self.n04 < 1000000"},
			{Rule: "size(self.s03) <= 32", FieldPath: ".s03"},
		}}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped, Names: names,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties:   map[string]apiextensionsv1.JSONSchemaProps{"spec": spec, "status": {Type: "object", XPreserveUnknownFields: ptr.To(true)}},
					XValidations: apiextensionsv1.ValidationRules{{Rule: "self.metadata.name != 'reserved'"}}}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names},
	}
}

// widget is a Widget named name with the given spec (JSON), read as the API server's
// decoder reads a request (integers as int64).
func widget(t testing.TB, name, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	body := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":%q,"namespace":"ns","generation":1},"spec":%s}`, name, spec)
	if err := u.UnmarshalJSON([]byte(body)); err != nil {
		t.Fatalf("widget: %v", err)
	}
	return u
}

const validSpec = `{"s01":"a","s02":"g","s03":"c","n01":1,"n02":2,"n03":3,"n04":4,"mode":"a","code":"abc","level":1.5,
  "when":"2024-01-01T00:00:00Z","items":[{"name":"x","size":1}],"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}`

// TestQuickValidationSameErrors compares the strategy's errors with those of
// apiextensions-apiserver's own strategy alone, on valid and invalid objects, on create
// and on update: same fields, types, values and details.
func TestQuickValidationSameErrors(t *testing.T) {
	for _, format := range []bool{false, true} {
		for _, walks := range []bool{true, false} {
			t.Run(fmt.Sprintf("format=%v,embedded-and-list-types=%v", format, walks), func(t *testing.T) { testQuickValidation(t, format, walks) })
		}
	}
}

// plainSpec drops the list type of spec.items and the embedded-resource mark of
// spec.template: a schema whose create checks need not walk the object.
func plainSpec(crd *apiextensionsv1.CustomResourceDefinition) {
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	items := spec.Properties["items"]
	items.XListType, items.XListMapKeys = nil, nil
	spec.Properties["items"] = items
	template := spec.Properties["template"]
	template.XEmbeddedResource = false
	spec.Properties["template"] = template
	root.Properties["spec"] = spec
}

func testQuickValidation(t *testing.T, format, walks bool) {
	crd := rulesCRD(format)
	if !walks {
		plainSpec(crd)
	}
	versions, err := Build(crd)
	if err != nil {
		t.Fatal(err)
	}
	quick := versions[0].Resource.Strategy.(*strategy)
	if quick.quick == nil || quick.quick.rules == nil || (quick.quick.schema == nil) != format {
		t.Fatalf("quick validation %+v: want a rule checker, and a schema checker unless the schema has a format", quick.quick)
	}
	plain := *quick
	plain.quick = nil
	cases := []struct {
		name, objName, spec string
		wantErrs            bool
	}{
		{"valid", "w", validSpec, false},
		{"valid, minimal", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":""}`, false},
		{"CEL message", "w", `{"n01":5,"n02":2,"n03":0,"n04":0,"s01":"","s03":""}`, true},
		{"CEL reason", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"forbidden","s03":""}`, true},
		{"CEL message expression", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s02":"x","s03":""}`, true},
		{"CEL field path", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"0123456789012345678901234567890123456789"}`, true},
		{"CEL no such key", "w", `{"n01":0,"n02":0}`, true},
		{"CEL on list items", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","items":[{"name":"x","size":500}]}`, true},
		{"CEL at the root", "reserved", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":""}`, true},
		{"minimum", "w", `{"n01":0,"n02":0,"n03":-1,"n04":0,"s01":"","s03":""}`, true},
		{"maxLength", "w", fmt.Sprintf(`{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","s04":%q}`, strings.Repeat("x", 65)), true},
		{"type", "w", `{"n01":"one","n02":0,"n03":0,"n04":0,"s01":"","s03":""}`, true},
		{"required", "w", `{"n02":0,"n03":0,"n04":0,"s01":"","s03":""}`, true},
		{"enum", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","mode":"c"}`, true},
		{"pattern", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","code":"ABC"}`, true},
		{"exclusive maximum", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","level":10}`, true},
		{"format", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","when":"yesterday"}`, format},
		{"maxItems", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","items":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, true},
		{"map-list duplicate", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","items":[{"name":"a"},{"name":"a"}]}`, walks},
		{"embedded resource", "w", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":"","template":{"apiVersion":"v1","metadata":{"name":"p"}}}`, walks},
		{"metadata only", "Bad_Name", `{"n01":0,"n02":0,"n03":0,"n04":0,"s01":"","s03":""}`, false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := quick.Validate(ctx, widget(t, c.objName, c.spec)), plain.Validate(ctx, widget(t, c.objName, c.spec))
			if (len(want) > 0) != c.wantErrs {
				t.Fatalf("the library's strategy reports %v; the case expects errors: %v", want, c.wantErrs)
			}
			sameErrors(t, "create", got, want)
			if c.objName == "w" && !c.wantErrs {
				obj := widget(t, c.objName, c.spec)
				if errs := quick.quick.lib.Validate(ctx, obj); len(errs) > 0 || !quick.quick.schema.Passes(obj.Object) || !quick.quick.rules.Passes(ctx, obj.Object, 1_000_000) {
					t.Fatalf("a valid object took the library's path (errors of the rest: %v)", errs)
				}
			}
			old := widget(t, "w", validSpec)
			old.SetResourceVersion("1")
			upd := widget(t, c.objName, c.spec)
			upd.SetResourceVersion("1")
			sameErrors(t, "update", quick.ValidateUpdate(ctx, upd, old), plain.ValidateUpdate(ctx, widget(t, c.objName, c.spec), old))
		})
	}
}

func sameErrors(t *testing.T, op string, got, want field.ErrorList) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("%s: errors\n%s\nwant (apiextensions-apiserver's strategy)\n%s", op, gj, wj)
	}
}

// BenchmarkValidateCreate times validating a valid custom object with 20 fields and 5
// CEL rules on create, with the quick path and with apiextensions-apiserver's strategy
// alone.
func BenchmarkValidateCreate(b *testing.B) {
	versions, err := Build(rulesCRD(false))
	if err != nil {
		b.Fatal(err)
	}
	quick := versions[0].Resource.Strategy.(*strategy)
	plain := *quick
	plain.quick = nil
	obj := widget(b, "w", validSpec)
	for _, c := range []struct {
		name string
		s    *strategy
	}{{"quick", quick}, {"library", &plain}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if errs := c.s.Validate(ctx, obj); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}

func TestHasEmbeddedOrListType(t *testing.T) {
	str := func(s structuralschema.Structural) *structuralschema.Structural { return &s }
	leaf := structuralschema.Structural{Generic: structuralschema.Generic{Type: "string"}}
	cases := []struct {
		name string
		s    *structuralschema.Structural
		want bool
	}{
		{"nil", nil, false},
		{"plain", str(structuralschema.Structural{Properties: map[string]structuralschema.Structural{"a": leaf, "b": {Items: &leaf}}}), false},
		{"list type at a property", str(structuralschema.Structural{Properties: map[string]structuralschema.Structural{"a": leaf,
			"b": {Items: &leaf, Extensions: structuralschema.Extensions{XListType: ptr.To("set")}}}}), true},
		{"atomic list type", str(structuralschema.Structural{Items: &leaf, Extensions: structuralschema.Extensions{XListType: ptr.To("atomic")}}), true},
		{"embedded under items", str(structuralschema.Structural{Items: str(structuralschema.Structural{Extensions: structuralschema.Extensions{XEmbeddedResource: true}})}), true},
		{"under additionalProperties", str(structuralschema.Structural{AdditionalProperties: &structuralschema.StructuralOrBool{Structural: str(structuralschema.Structural{
			Properties: map[string]structuralschema.Structural{"x": {Extensions: structuralschema.Extensions{XEmbeddedResource: true}}}})}}), true},
	}
	for _, c := range cases {
		if got := hasEmbeddedOrListType(c.s); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
