package v1alpha1

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// TestDeepCopyRoundTrip fills every kind with random values, copies it, and checks that
// the copy equals the original and shares no memory with it: filling the copy anew must
// leave the original as it was. The deep copies are written by hand; this catches a
// field added to a type but not to its DeepCopyInto (it would alias or be dropped).
func TestDeepCopyRoundTrip(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		name string
		new  func() runtime.Object
	}{
		{"WasmPlugin", func() runtime.Object { return &WasmPlugin{} }},
		{"ClusterWasmPlugin", func() runtime.Object { return &ClusterWasmPlugin{} }},
		{"WasmModule", func() runtime.Object { return &WasmModule{} }},
		{"WasmPluginList", func() runtime.Object { return &WasmPluginList{} }},
		{"ClusterWasmPluginList", func() runtime.Object { return &ClusterWasmPluginList{} }},
		{"WasmModuleList", func() runtime.Object { return &WasmModuleList{} }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(1), serializer.NewCodecFactory(scheme)).NilChance(0.2).NumElements(1, 3)
			for i := range 200 {
				orig := k.new()
				f.Fill(orig)
				snapshot := orig.DeepCopyObject()
				cp := orig.DeepCopyObject()
				if !apiequality.Semantic.DeepEqual(orig, cp) {
					t.Fatalf("round %d: the copy differs from the original:\n%#v\n%#v", i, orig, cp)
				}
				if path := shared(reflect.ValueOf(orig), reflect.ValueOf(cp), k.name); path != "" {
					t.Fatalf("round %d: the copy shares %s with the original", i, path)
				}
				f.Fill(cp)
				if !apiequality.Semantic.DeepEqual(orig, snapshot) {
					t.Fatalf("round %d: filling the copy changed the original:\n%#v\n%#v", i, orig, snapshot)
				}
			}
		})
	}
}

// shared returns the path of the first slice, map or pointer that a and b share, or "".
// time.Time is a value whose location pointer is meant to be shared.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() && a.Elem().Type().Size() > 0 {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := range min(a.Len(), b.Len()) {
			if p := shared(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for _, key := range a.MapKeys() {
			if bv := b.MapIndex(key); bv.IsValid() {
				if p := shared(a.MapIndex(key), bv, fmt.Sprintf("%s[%v]", path, key)); p != "" {
					return p
				}
			}
		}
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return ""
		}
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}
