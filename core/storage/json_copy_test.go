package storage

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
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
			decoded := roundTrip(t, codec, obj)
			if !reflect.DeepEqual(copied.Object, decoded.Object) {
				t.Fatalf("copied %#v\ndecoded %#v", copied.Object, decoded.Object)
			}
			// In place (out is obj): the same content, without a copy.
			if !copyWritten(obj, obj) {
				t.Fatal("copyWritten in place declines what it copies")
			}
			if !reflect.DeepEqual(obj.Object, decoded.Object) {
				t.Fatalf("in place %#v\ndecoded %#v", obj.Object, decoded.Object)
			}
		})
	}
	for _, c := range cases {
		if c.ok {
			continue
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"list": []any{1.0, c.value}}}}
		if copyWritten(obj, obj) {
			t.Errorf("%s: copyWritten in place takes what it declines to copy", c.name)
		}
	}
	if copyWritten(&unstructured.Unstructured{}, &unstructured.Unstructured{}) != true {
		t.Error("copyWritten declines an empty object")
	}
	empty := &unstructured.Unstructured{}
	if copyWritten(empty, empty) {
		t.Error("copyWritten in place takes an object without content")
	}
	if copyWritten(&unstructured.Unstructured{}, &unstructured.UnstructuredList{}) {
		t.Fatal("copied into a list")
	}
}

// TestCopyWrittenRandomContent: on random content, both the copy and the in-place
// conversion give exactly what encoding and decoding give.
func TestCopyWrittenRandomContent(t *testing.T) {
	codec := NewCodec(runtime.NewScheme())
	rng := rand.New(rand.NewPCG(5, 6))
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(11); {
		case n == 0:
			return nil
		case n == 1:
			return rng.IntN(2) == 0
		case n == 2:
			return int64(rng.IntN(2000) - 1000)
		case n == 3:
			return float64(rng.IntN(2000) - 1000)
		case n == 4:
			return rng.Float64()*1e6 - 5e5
		case n == 5:
			return []string{"", "a", "é<&>", "x y"}[rng.IntN(4)]
		case n == 6 && depth < 4:
			if rng.IntN(5) == 0 {
				return []any(nil)
			}
			l := make([]any, rng.IntN(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		case depth < 4:
			if rng.IntN(5) == 0 {
				return map[string]any(nil)
			}
			m := map[string]any{}
			for range rng.IntN(5) {
				m[fmt.Sprintf("k%d", rng.IntN(10))] = value(depth + 1)
			}
			return m
		default:
			return "leaf"
		}
	}
	exacts := 0
	for i := range 500 {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprint("w", i)}, "spec": value(0), "status": value(0)}}
		decoded := roundTrip(t, codec, obj)
		// What Etcd.Create relies on to skip the in-place walk: content the codec found
		// exact while writing it is already what decoding gives.
		exact, err := encodeExact(codec, obj)
		if err != nil {
			t.Fatal(err)
		}
		if exact && gvkExact(obj) {
			exacts++
			if !reflect.DeepEqual(obj.Object, decoded.Object) {
				t.Fatalf("reported exact %#v\ndecoded %#v", obj.Object, decoded.Object)
			}
		}
		copied := &unstructured.Unstructured{}
		if !copyWritten(obj, copied) || !reflect.DeepEqual(copied.Object, decoded.Object) {
			t.Fatalf("copied %#v\ndecoded %#v", copied.Object, decoded.Object)
		}
		if !copyWritten(obj, obj) || !reflect.DeepEqual(obj.Object, decoded.Object) {
			t.Fatalf("in place %#v\ndecoded %#v", obj.Object, decoded.Object)
		}
	}
	if exacts == 0 {
		t.Fatal("no content was reported exact")
	}
	t.Logf("%d of 500 objects reported exact", exacts)
}

// encodeExact encodes obj with the storage codec c and returns what it reports of its
// content being exact.
func encodeExact(c runtime.Codec, obj runtime.Object) (bool, error) {
	return c.(*codec).encode(obj, &bytes.Buffer{})
}

// roundTrip is obj encoded with codec and decoded again, as Etcd.Create did for every
// create.
func roundTrip(t *testing.T, codec runtime.Codec, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	var buf bytes.Buffer
	if err := codec.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	decoded := &unstructured.Unstructured{}
	if _, _, err := codec.Decode(buf.Bytes(), nil, decoded); err != nil {
		t.Fatal(err)
	}
	return decoded
}

// BenchmarkCopyWritten times the answer of a custom create of the crd bench's object (20
// fields, and the managedFields of its creation): copied, as Etcd.Create does for a
// caller that keeps its object, and in place, as for the registry's store.
func BenchmarkCopyWritten(b *testing.B) {
	doc := []byte(`{"apiVersion":"bench.example.com/v1","kind":"Gizmo","metadata":{"name":"g","namespace":"default",
	  "uid":"0d5b6e5c-1f5e-4c1e-9d7e-5b7c3c1f2a10","generation":1,"creationTimestamp":"2026-12-06T23:30:00Z",
	  "managedFields":[{"manager":"crd","operation":"Update","apiVersion":"bench.example.com/v1","time":"2026-12-06T23:30:00Z",
	    "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:n01":{},"f:n02":{},"f:n03":{},"f:n04":{},"f:n05":{},"f:n06":{},
	    "f:n07":{},"f:n08":{},"f:n09":{},"f:n10":{},"f:s01":{},"f:s02":{},"f:s03":{},"f:s04":{},"f:s05":{},"f:s06":{},"f:s07":{},
	    "f:s08":{},"f:s09":{},"f:s10":{}}}}]},
	  "spec":{"n01":1,"n02":2,"n03":3,"n04":4,"n05":5,"n06":6,"n07":7,"n08":8,"n09":9,"n10":10,
	    "s01":"gadget-value","s02":"gadget-value","s03":"gadget-value","s04":"gadget-value","s05":"gadget-value",
	    "s06":"gadget-value","s07":"gadget-value","s08":"gadget-value","s09":"gadget-value","s10":"gadget-value"}}`)
	codec := NewCodec(runtime.NewScheme())
	decoded := &unstructured.Unstructured{}
	if _, _, err := codec.Decode(doc, nil, decoded); err != nil {
		b.Fatal(err)
	}
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !copyWritten(decoded, &unstructured.Unstructured{}) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("in place", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !copyWritten(decoded, decoded) {
				b.Fatal("declined")
			}
		}
	})
}
