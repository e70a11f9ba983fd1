package customresource

import (
	"reflect"
	"testing"

	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apimachinery/pkg/runtime"
)

// The metadata kept as it is must be exactly what the library's round trip gives, and
// everything else must still go through the library.
func TestObjectMetaMatchesTheLibrary(t *testing.T) {
	for _, c := range []struct {
		name string
		md   any
		kept bool
	}{
		{"name only", map[string]any{"name": "a"}, true},
		{"what a create sends", map[string]any{"name": "a", "namespace": "ns", "creationTimestamp": nil, "labels": map[string]any{"x": "", "y": "z"}}, true},
		{"what storage holds", map[string]any{"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "5", "generation": int64(2),
			"creationTimestamp": "2026-12-06T16:00:00Z", "annotations": map[string]any{"k": "v"}, "finalizers": []any{"f"}}, true},
		{"fractional timestamp", map[string]any{"name": "a", "creationTimestamp": "2026-12-06T16:00:00.5Z"}, false},
		{"timestamp with an offset", map[string]any{"name": "a", "creationTimestamp": "2026-12-06T17:00:00+01:00"}, false},
		{"bad timestamp", map[string]any{"name": "a", "creationTimestamp": "yesterday"}, false},
		{"empty name", map[string]any{"name": ""}, false},
		{"empty labels", map[string]any{"name": "a", "labels": map[string]any{}}, false},
		{"label not a string", map[string]any{"name": "a", "labels": map[string]any{"x": int64(1)}}, false},
		{"invalid UTF-8", map[string]any{"name": "a\xff"}, false},
		{"generation zero", map[string]any{"name": "a", "generation": int64(0)}, false},
		{"generation float", map[string]any{"name": "a", "generation": 1.5}, false},
		{"unknown field", map[string]any{"name": "a", "color": "red"}, false},
		{"managedFields", map[string]any{"name": "a", "managedFields": []any{map[string]any{"manager": "m", "operation": "Update"}}}, false},
		{"name not a string", map[string]any{"name": int64(1)}, false},
		{"not an object", "metadata", false},
	} {
		for _, opts := range []schemaobjectmeta.ObjectMetaOptions{{ReturnUnknownFieldPaths: true}, {DropMalformedFields: true}} {
			t.Run(c.name, func(t *testing.T) {
				lib := map[string]any{"metadata": runtime.DeepCopyJSONValue(c.md)}
				ours := map[string]any{"metadata": runtime.DeepCopyJSONValue(c.md)}
				m, found, libUnknown, libErr := schemaobjectmeta.GetObjectMetaWithOptions(lib, opts)
				if libErr == nil && found {
					libErr = schemaobjectmeta.SetObjectMeta(lib, m)
				}
				om, unknown, err := getObjectMeta(ours, opts)
				if err == nil {
					err = om.put(ours)
				}
				if (om.kept != nil) != c.kept {
					t.Errorf("kept %v, want %v", om.kept != nil, c.kept)
				}
				if (err == nil) != (libErr == nil) || (err != nil && err.Error() != libErr.Error()) {
					t.Fatalf("error %v, the library's %v", err, libErr)
				}
				if err == nil && (!reflect.DeepEqual(ours, lib) || !reflect.DeepEqual(unknown, libUnknown)) {
					t.Errorf("metadata %#v unknown %v\nthe library's %#v unknown %v", ours, unknown, lib, libUnknown)
				}
			})
		}
	}
}
