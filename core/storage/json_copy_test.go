package storage

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestCopyWrittenMatchesDecoding compares copyWritten with encoding an object with the
// storage codec and decoding the bytes, as Etcd.Create did for every create.
func TestCopyWrittenMatchesDecoding(t *testing.T) {
	codec := NewCodec(runtime.NewScheme())
	cases := []struct {
		name  string
		value any
		ok    bool
	}{
		{"string", "héllo <&>", true},
		{"bool", true, true},
		{"int64", int64(-42), true},
		{"integral float", float64(3), true},
		{"negative zero", math.Copysign(0, -1), true},
		{"fraction", 1.25, true},
		{"tiny", 1e-7, true},
		{"integral float at 2^53 - 1", math.Exp2(53) - 1, true},
		{"integral float at 2^53", math.Exp2(53), false},
		{"large integral float", -1e20, false},
		{"null", nil, true},
		{"nested", map[string]any{"a": []any{int64(1), 2.0, map[string]any{"b": nil}}, "c": []any{}}, true},
		{"nil map", map[string]any(nil), true},
		{"nil list", []any(nil), true},
		{"int", 3, false},
		{"string slice", []string{"a"}, false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
				"metadata": map[string]any{"name": "w", "namespace": "ns"}, "spec": map[string]any{"v": c.value}}}
			copied := &unstructured.Unstructured{}
			if got := copyWritten(obj, copied); got != c.ok {
				t.Fatalf("copyWritten reports %v, want %v", got, c.ok)
			}
			if !c.ok {
				if copied.Object != nil {
					t.Fatal("copyWritten changed out while declining")
				}
				return
			}
			var buf bytes.Buffer
			if err := codec.Encode(obj, &buf); err != nil {
				t.Fatal(err)
			}
			decoded := &unstructured.Unstructured{}
			if _, _, err := codec.Decode(buf.Bytes(), nil, decoded); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(copied.Object, decoded.Object) {
				t.Fatalf("copied %#v\ndecoded %#v", copied.Object, decoded.Object)
			}
		})
	}
	if copyWritten(&unstructured.Unstructured{}, &unstructured.UnstructuredList{}) {
		t.Fatal("copied into a list")
	}
}
