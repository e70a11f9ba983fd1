package endpoints

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmplane/wasmplane/core/api"
)

// TestWriteUnstructuredAsTheSerializer checks that a custom object's JSON response is
// what the JSON serializer writes, whether the quick writer takes its content or leaves
// it to the serializer, and that YAML is left to the serializer.
func TestWriteUnstructuredAsTheSerializer(t *testing.T) {
	c := NewCodecs(api.MustScheme())
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	for name, content := range map[string]map[string]any{
		"plain": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "annotations": map[string]any{"x": "<&>"}},
			"spec": map[string]any{"n": int64(3), "f": 0.5, "tiny": 1e-9, "s": "\t\u2029\xfe", "l": []any{nil, false, map[string]any{}}}},
		"left to the serializer": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
			"spec": map[string]any{"u": uint8(4), "m": map[string]int64{"a": 1}}},
	} {
		for _, mediaType := range []string{"application/json", "application/yaml"} {
			t.Run(name+" "+mediaType, func(t *testing.T) {
				info, ok := c.infoFor(mediaType)
				if !ok {
					t.Fatalf("no serializer for %s", mediaType)
				}
				var want bytes.Buffer
				if err := info.Serializer.Encode(&unstructured.Unstructured{Object: content}, &want); err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				c.writeObject(rec, info, gv, http.StatusCreated, &unstructured.Unstructured{Object: content})
				if rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != mediaType {
					t.Fatalf("code %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
				}
				if rec.Body.String() != want.String() {
					t.Fatalf("wrote %q, the serializer writes %q", rec.Body.String(), want.String())
				}
			})
		}
	}
}
