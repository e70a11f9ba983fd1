package registry

import (
	"reflect"
	"strings"
	"testing"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestMetaForValidationAsTheLibrary compares the metadata errors of unstructured objects
// validated through the quick managedFields view with those through the object itself,
// on well-formed and odd managedFields, and the view's entries with GetManagedFields'.
func TestMetaForValidationAsTheLibrary(t *testing.T) {
	entry := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	good := func() map[string]any {
		return entry("manager", "kubectl", "operation", "Update", "apiVersion", "example.com/v1", "time", "2026-12-06T20:00:00Z",
			"fieldsType", "FieldsV1", "fieldsV1", map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:a": map[string]any{}}})
	}
	cases := []struct {
		name    string
		managed any
		absent  bool
		quick   bool
	}{
		{name: "absent", absent: true, quick: true},
		{name: "empty", managed: []any{}, quick: true},
		{name: "one entry", managed: []any{good()}, quick: true},
		{name: "apply and a subresource", managed: []any{good(), entry("manager", "m", "operation", "Apply", "subresource", "status", "fieldsType", "FieldsV1")}, quick: true},
		{name: "no operation", managed: []any{entry("manager", "m")}, quick: true},
		{name: "bad operation", managed: []any{entry("manager", "m", "operation", "Patch")}, quick: true},
		{name: "bad fieldsType", managed: []any{entry("manager", "m", "operation", "Update", "fieldsType", "FieldsV2")}, quick: true},
		{name: "long manager", managed: []any{entry("manager", strings.Repeat("m", 200), "operation", "Update")}, quick: true},
		{name: "long subresource", managed: []any{entry("manager", "m", "operation", "Update", "subresource", strings.Repeat("s", 300))}, quick: true},
		{name: "no manager", managed: []any{entry("operation", "Update")}, quick: true},
		{name: "manager not a string", managed: []any{entry("manager", int64(1), "operation", "Patch")}},
		{name: "time does not parse", managed: []any{entry("manager", "m", "operation", "Patch", "time", "yesterday")}},
		{name: "time null", managed: []any{entry("manager", "m", "operation", "Patch", "time", nil)}},
		{name: "fieldsV1 a string", managed: []any{entry("manager", "m", "operation", "Patch", "fieldsV1", "x")}},
		{name: "fieldsV1 with a number", managed: []any{entry("manager", "m", "operation", "Patch", "fieldsV1", map[string]any{"f:a": int64(1)})}},
		{name: "unknown field", managed: []any{entry("manager", "m", "operation", "Patch", "extra", "x")}},
		{name: "entry not an object", managed: []any{"x"}},
		{name: "not a list", managed: "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := map[string]any{"name": "w", "namespace": "default"}
			if !tc.absent {
				md["managedFields"] = tc.managed
			}
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": md}}
			view := metaForValidation(u)
			if _, isView := view.(unstructuredMeta); isView != tc.quick {
				t.Fatalf("quick view %v, want %v", isView, tc.quick)
			}
			if tc.quick {
				lib := u.GetManagedFields()
				got := view.GetManagedFields()
				if len(got) != len(lib) {
					t.Fatalf("%d entries, the library reads %d", len(got), len(lib))
				}
				for i := range lib {
					if got[i].Manager != lib[i].Manager || got[i].Operation != lib[i].Operation ||
						got[i].FieldsType != lib[i].FieldsType || got[i].Subresource != lib[i].Subresource {
						t.Fatalf("entry %d: %+v, the library reads %+v", i, got[i], lib[i])
					}
				}
			}
			path := field.NewPath("metadata")
			want := apimachineryvalidation.ValidateObjectMetaAccessor(u, true, apimachineryvalidation.NameIsDNSSubdomain, path)
			got := apimachineryvalidation.ValidateObjectMetaAccessor(view, true, apimachineryvalidation.NameIsDNSSubdomain, path)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("errors %v, the library's %v", got, want)
			}
			want = apimachineryvalidation.ValidateObjectMetaAccessorUpdate(u, u, path)
			got = apimachineryvalidation.ValidateObjectMetaAccessorUpdate(view, u, path)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("update errors %v, the library's %v", got, want)
			}
		})
	}
}

func BenchmarkValidateMetaUnstructured(b *testing.B) {
	fields := map[string]any{".": map[string]any{}}
	for _, f := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"} {
		fields["f:"+f] = map[string]any{}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{
		"name": "w", "namespace": "default", "managedFields": []any{map[string]any{"manager": "bench", "operation": "Update",
			"apiVersion": "example.com/v1", "time": "2026-12-06T20:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": fields}}},
	}}}
	path := field.NewPath("metadata")
	for _, quick := range []bool{false, true} {
		name := "library"
		if quick {
			name = "quick"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if quick {
					apimachineryvalidation.ValidateObjectMetaAccessor(metaForValidation(u), true, apimachineryvalidation.NameIsDNSSubdomain, path)
				} else {
					apimachineryvalidation.ValidateObjectMetaAccessor(u, true, apimachineryvalidation.NameIsDNSSubdomain, path)
				}
			}
		})
	}
}
