package apply

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// sameAsLibrary sets entries on a copy of obj through customObject and on another
// through Unstructured.SetManagedFields, and fails unless the two contents are equal
// value for value and type for type (reflect.DeepEqual: an int64 is not a float64, a
// nil slice is not an empty one). It reports whether customObject wrote them itself
// rather than leaving them to the library.
func sameAsLibrary(t *testing.T, obj map[string]any, entries []metav1.ManagedFieldsEntry) bool {
	t.Helper()
	ours := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	lib := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	customObject{Unstructured: ours}.SetManagedFields(entries)
	lib.SetManagedFields(entries)
	if !reflect.DeepEqual(ours.Object, lib.Object) {
		t.Fatalf("entries %+v:\ngot  %#v\nwant %#v", entries, ours.Object, lib.Object)
	}
	_, converted := managedFieldsContent(entries)
	md, isMap := obj["metadata"].(map[string]any)
	return entries != nil && isMap && md != nil && converted
}

func fieldsV1(raw string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(raw)} }

// TestCustomObjectSetManagedFields: the managedFields customObject writes are the
// library's, for the entries the field manager writes and for odd ones (which go to the
// library), on objects with and without metadata.
func TestCustomObjectSetManagedFields(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 6, 23, 30, 1, 500, time.FixedZone("x", 3600)))
	zero := metav1.Time{}
	widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec": map[string]any{"size": int64(1)}}
	full := metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1", Time: &now,
		FieldsType: "FieldsV1", FieldsV1: fieldsV1(`{"f:spec":{".":{},"f:size":{}}}`), Subresource: "status"}
	with := func(f func(e *metav1.ManagedFieldsEntry)) []metav1.ManagedFieldsEntry {
		e := full
		f(&e)
		return []metav1.ManagedFieldsEntry{e}
	}
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		entries []metav1.ManagedFieldsEntry
		quick   bool
	}{
		{"every field", widget, []metav1.ManagedFieldsEntry{full}, true},
		{"two entries", widget, append(with(func(e *metav1.ManagedFieldsEntry) { e.Subresource = "" }), with(func(e *metav1.ManagedFieldsEntry) {
			e.Manager, e.Operation = "ssa", metav1.ManagedFieldsOperationApply
		})...), true},
		{"empty fields left out", widget, []metav1.ManagedFieldsEntry{{Manager: "m"}}, true},
		{"an empty entry", widget, []metav1.ManagedFieldsEntry{{}}, true},
		{"no entries (empty, not nil)", widget, []metav1.ManagedFieldsEntry{}, true},
		{"nil entries remove the list", map[string]any{"metadata": map[string]any{"managedFields": []any{}}}, nil, false},
		{"keys with escapes", widget, with(func(e *metav1.ManagedFieldsEntry) {
			e.FieldsV1 = fieldsV1(`{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{}}},"v:\"a\\\\b\"":{}}}`)
		}), true},
		{"unicode and HTML escapes", widget, with(func(e *metav1.ManagedFieldsEntry) {
			e.FieldsV1 = fieldsV1(`{"f:metadata":{"f:labels":{"f:\u003ca\u003e":{},"f:é":{},"f:\u00e9\/":{}}}}`)
		}), true},
		{"whitespace", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1(" {\n\"f:a\" : { } }\t") }), false},
		{"leading whitespace, then an object", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1("{ \"f:a\" : { } }\n") }), true},
		{"an existing list replaced", map[string]any{"metadata": map[string]any{"managedFields": []any{"junk"}}}, []metav1.ManagedFieldsEntry{full}, true},
		{"zero time", widget, with(func(e *metav1.ManagedFieldsEntry) { e.Time = &zero }), false},
		{"nil fieldsV1", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = nil }), true},
		{"empty fieldsV1", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1("") }), false},
		{"null fieldsV1", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1("null") }), false},
		{"a number inside", widget, with(func(e *metav1.ManagedFieldsEntry) {
			e.FieldsV1 = fieldsV1(`{"f:a":1,"f:b":1.5,"f:c":12345678901234567890}`)
		}), false},
		{"a string inside", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1(`{"f:a":"x"}`) }), false},
		{"a list inside", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1(`{"f:a":[{}]}`) }), false},
		{"duplicate keys", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1(`{"f:a":{"f:x":{}},"f:a":{}}`) }), false},
		{"invalid UTF-8", widget, with(func(e *metav1.ManagedFieldsEntry) { e.FieldsV1 = fieldsV1("{\"f:\xff\":{}}") }), false},
		{"no metadata", map[string]any{"kind": "Widget"}, []metav1.ManagedFieldsEntry{full}, false},
		{"metadata not an object", map[string]any{"metadata": "x"}, []metav1.ManagedFieldsEntry{full}, false},
		{"no content at all", nil, []metav1.ManagedFieldsEntry{full}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameAsLibrary(t, tc.obj, tc.entries); got != tc.quick {
				t.Errorf("quick conversion %v, want %v", got, tc.quick)
			}
		})
	}
}

// TestCustomObjectSetManagedFieldsRandomSets: the entries of random field sets, written
// as the field manager writes them (fieldpath.Set.ToJSON), convert as the library
// converts them, every one of them quickly.
func TestCustomObjectSetManagedFieldsRandomSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		raw := randomFieldSet(t, rng)
		now := metav1.NewTime(time.Unix(int64(rng.IntN(1<<31)), 0))
		entries := []metav1.ManagedFieldsEntry{{Manager: fmt.Sprintf("m%d", i), Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1",
			Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}}
		if !sameAsLibrary(t, map[string]any{"metadata": map[string]any{"name": "w"}}, entries) {
			t.Fatalf("the entry of %s went to the library", raw)
		}
	}
}

// TestFieldsCache: with the trees of earlier entries kept, customObject still writes
// what the library writes, in trees of its own: changing the trees of one object changes
// neither the trees kept nor the next object's. Some of the sets repeat, more of them
// than the cache keeps.
func TestFieldsCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sets := make([][]byte, 3*fieldsCacheSize)
	for i := range sets {
		sets[i] = randomFieldSet(t, rng)
	}
	var cache fieldsCache
	for i := range 1000 {
		// Mostly the first few sets, now and then any of them.
		raw := sets[rng.IntN(fieldsCacheSize/2)]
		if rng.IntN(4) == 0 {
			raw = sets[rng.IntN(len(sets))]
		}
		entries := []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}}
		ours := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": fmt.Sprint(i)}}}
		lib := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": fmt.Sprint(i)}}}
		customObject{Unstructured: ours, fields: &cache}.SetManagedFields(entries)
		lib.SetManagedFields(entries)
		if !reflect.DeepEqual(ours.Object, lib.Object) {
			t.Fatalf("write %d, fieldsV1 %s:\ngot  %#v\nwant %#v", i, raw, ours.Object, lib.Object)
		}
		fields := ours.Object["metadata"].(map[string]any)["managedFields"].([]any)[0].(map[string]any)["fieldsV1"].(map[string]any)
		scribble(fields)
	}
	if kept := cache.last.Load(); kept == nil || len(*kept) != fieldsCacheSize {
		t.Fatalf("the cache knows %v fieldsV1, want %d", kept, fieldsCacheSize)
	}
	// A tree is kept only once its bytes come again.
	var fresh fieldsCache
	for i, wantTree := range []bool{false, true, true} {
		if _, ok := fresh.tree(sets[0]); !ok {
			t.Fatalf("fieldsV1 %s declined", sets[0])
		}
		if kept := *fresh.last.Load(); len(kept) != 1 || (kept[0].tree != nil) != wantTree {
			t.Fatalf("after %d writes the cache holds %+v; a tree kept: want %v", i+1, kept, wantTree)
		}
	}
}

// scribble adds a field to every map of a tree.
func scribble(m map[string]any) {
	for _, v := range m {
		scribble(v.(map[string]any))
	}
	m["f:scribbled"] = map[string]any{}
}

// randomFieldSet is a random field set as the field manager writes it
// (fieldpath.Set.ToJSON).
func randomFieldSet(t *testing.T, rng *rand.Rand) []byte {
	t.Helper()
	names := []string{"spec", "status", "metadata", "labels", "a", "b.c", `q"uote`, "<html>", "é", "x y"}
	element := func() fieldpath.PathElement {
		switch rng.IntN(4) {
		case 0:
			return fieldpath.PathElement{Index: ptrTo(rng.IntN(5))}
		case 1:
			return fieldpath.PathElement{Value: ptrTo(value.NewValueInterface(names[rng.IntN(len(names))]))}
		case 2:
			return fieldpath.PathElement{Key: &value.FieldList{{Name: "name", Value: value.NewValueInterface(names[rng.IntN(len(names))])},
				{Name: "port", Value: value.NewValueInterface(int64(rng.IntN(3)))}}}
		default:
			return fieldpath.PathElement{FieldName: ptrTo(names[rng.IntN(len(names))])}
		}
	}
	set := fieldpath.NewSet()
	for range 1 + rng.IntN(20) {
		path := fieldpath.Path{}
		for range 1 + rng.IntN(5) {
			path = append(path, element())
		}
		set.Insert(path)
	}
	raw, err := set.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// FuzzCustomObjectSetManagedFields: for any fieldsV1 bytes, customObject writes what the
// library writes.
func FuzzCustomObjectSetManagedFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"f:a":{}}`, `{"f:a":{".":{},"k:{\"x\":1}":{}}}`, `{"f:a":1}`, ` {"a":{}} `, `{"a":{"a":{}},"a":{}}`, "{\"\xff\":{}}", `{"\ud800":{}}`, `[]`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		entries := []metav1.ManagedFieldsEntry{{Manager: "m", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}}
		lib := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{}}}
		ours := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{}}}
		lib.SetManagedFields(entries)
		customObject{Unstructured: ours}.SetManagedFields(entries)
		if !reflect.DeepEqual(ours.Object, lib.Object) {
			t.Fatalf("fieldsV1 %q:\ngot  %#v\nwant %#v", raw, ours.Object, lib.Object)
		}
	})
}

// BenchmarkCustomCreateManagedFields times the managedFields of a custom create (the
// field manager's update from nothing to a 20-field object), through the package's field
// manager and through the library's as kube-apiserver builds it.
func BenchmarkCustomCreateManagedFields(b *testing.B) {
	gvk := schema.GroupVersionKind{Group: "bench.example.com", Version: "v1", Kind: "Gizmo"}
	tc := managedfields.NewDeducedTypeConverter()
	ours, err := NewManagers(Config{Kind: gvk, TypeConverter: tc, Custom: true})
	if err != nil {
		b.Fatal(err)
	}
	lib, err := managedfields.NewDefaultCRDFieldManager(tc, customConvertor{}, defaulter(nil), customCreater{}, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	object := func() *unstructured.Unstructured {
		spec := map[string]any{}
		for f := 1; f <= 10; f++ {
			spec[fmt.Sprintf("s%02d", f)] = "gadget-value"
			spec[fmt.Sprintf("n%02d", f)] = int64(f)
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": "g", "namespace": "default", "uid": "0d5b6e5c-1f5e-4c1e-9d7e-5b7c3c1f2a10",
				"creationTimestamp": "2026-12-06T23:30:00Z", "generation": int64(1)}, "spec": spec}}
	}
	for _, fm := range []struct {
		name string
		fm   fieldManager
	}{{"wasmplane", ours.For(Main)}, {"library", lib}} {
		b.Run(fm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				live, obj := &unstructured.Unstructured{Object: map[string]any{}}, object()
				b.StartTimer()
				fm.fm.UpdateNoErrors(live, obj, "bench")
			}
		})
	}
}
