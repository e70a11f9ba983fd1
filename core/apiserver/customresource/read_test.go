package customresource

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/storagetest"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// narrowedCRD is testCRD after a schema change: v1 no longer knows spec.replicas, and
// v1beta1 has its own default for spec.size.
func narrowedCRD() *apiextensionsv1.CustomResourceDefinition {
	crd := testCRD()
	v1 := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.DeepCopy()
	delete(v1.Properties["spec"].Properties, "replicas")
	v1.Properties["spec"].Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	crd.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: v1}
	beta := crd.Spec.Versions[1].Schema.OpenAPIV3Schema.DeepCopy()
	beta.Properties["spec"].Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"M"`)}}
	crd.Spec.Versions[1].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: beta}
	return crd
}

func TestReadSchemas(t *testing.T) {
	versions, err := Build(narrowedCRD())
	if err != nil {
		t.Fatal(err)
	}
	read := versions[0].Read
	if read == nil || versions[1].Read != read {
		t.Fatalf("versions do not share one ReadSchemas: %p %p", read, versions[1].Read)
	}
	stored := func(meta, spec map[string]any) *unstructured.Unstructured {
		m := map[string]any{"name": "t", "namespace": "ns"}
		for k, v := range meta {
			m[k] = v
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": m, "spec": spec, "junk": true}}
	}
	for _, c := range []struct {
		name   string
		in     *unstructured.Unstructured
		served string
		want   map[string]any // spec
		gen    int64
	}{
		{"unknown fields pruned, stored version's default", stored(map[string]any{"generation": int64(3)}, map[string]any{"replicas": int64(2), "size": "S"}), "v1",
			map[string]any{"size": "S", "color": "blue"}, 3},
		{"a missing generation repaired", stored(nil, map[string]any{}), "v1", map[string]any{"color": "blue"}, 1},
		// The version read gets no defaults of its own, as in kube-apiserver: only the
		// stored version's, then a prune by the version read's schema.
		{"read in another version", stored(map[string]any{"generation": int64(1)}, map[string]any{"replicas": int64(2)}), "v1beta1",
			map[string]any{"color": "blue"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := &Versioned{Served: schema.GroupVersion{Group: "example.com", Version: c.served},
				Stored: schema.GroupVersion{Group: "example.com", Version: "v1"}, Read: read}
			u := c.in.DeepCopy()
			if err := v.served(u); err != nil {
				t.Fatal(err)
			}
			if _, ok := u.Object["junk"]; ok {
				t.Errorf("top-level unknown field served: %v", u.Object)
			}
			if got := u.Object["spec"]; !reflect.DeepEqual(got, c.want) {
				t.Errorf("spec %v, want %v", got, c.want)
			}
			if u.GetGeneration() != c.gen || u.GetAPIVersion() != "example.com/"+c.served {
				t.Errorf("generation %d apiVersion %s", u.GetGeneration(), u.GetAPIVersion())
			}
			// Reading the normalized object again changes nothing: StoredView serves it as it is.
			if c.served == "v1" && read.StoredView(u) != nil {
				t.Errorf("a normalized object is normalized again")
			}
		})
	}
	if read.StoredView(stored(map[string]any{"generation": int64(1)}, map[string]any{"color": "red"})) == nil {
		t.Error("StoredView serves an object with an unknown field as it is")
	}
}

// Through a real watch cache: an object normalized under the current schema is listed and
// watched as the cache shares it (its bytes spliced, encoded once for all watchers), one
// stored before the schema changed is rewritten once and the rewrite remembered, and a
// new schema state normalizes again.
func TestCachedObjectsNormalizedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := "/registry/example.com/things"
	etcd := storage.NewEtcd(storagetest.Client(t), storage.ResourceConfig{
		GroupResource: schema.GroupResource{Group: "example.com", Resource: "things"}, Prefix: prefix,
		NewFunc:     func() runtime.Object { return &unstructured.Unstructured{} },
		NewListFunc: func() runtime.Object { return &unstructured.UnstructuredList{} },
		Codec:       storage.NewCodec(runtime.NewScheme()),
	})
	cacher := storage.NewCacher(etcd, storage.CacherConfig{})
	defer cacher.Stop()
	if err := cacher.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	// The lists below read at the last create's revision (the creates run one after the
	// other) or later, so that the cache has seen both.
	var lastRV string
	for name, spec := range map[string]map[string]any{"clean": {"color": "red"}, "stale": {"color": "red", "replicas": int64(1)}} {
		u := thing(spec)
		u.SetName(name)
		u.SetGeneration(1)
		out := &unstructured.Unstructured{}
		if err := cacher.Create(ctx, prefix+"/ns/"+name, u, out); err != nil {
			t.Fatal(err)
		}
		lastRV = out.GetResourceVersion()
	}
	versions, err := Build(narrowedCRD())
	if err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	v := &Versioned{Inner: cacher, Served: gv, Stored: gv, Read: versions[0].Read}
	list := func(v *Versioned) []*storage.CachingObject {
		t.Helper()
		ci := &storage.CachedItems{}
		if err := v.GetList(storage.WithCachedItems(ctx, ci), prefix, storage.ListOptions{ResourceVersion: lastRV, Recursive: true}, &unstructured.UnstructuredList{}); err != nil {
			t.Fatal(err)
		}
		if !ci.Served || len(ci.Items) != 2 {
			t.Fatalf("the cache did not answer with both objects: %+v", ci)
		}
		return ci.Items
	}
	first := list(v)
	if data, _, ok := first[1].StoredJSON(); !ok || strings.Contains(string(data), "replicas") {
		t.Errorf("the stale object is not served pruned as stored bytes: %s %v", data, ok)
	}
	second := list(v)
	if first[0] != second[0] || first[1] != second[1] {
		t.Errorf("the views are not remembered across lists")
	}
	w, err := v.Watch(ctx, prefix, storage.ListOptions{ResourceVersion: "0", Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range 2 {
		ev := <-w.ResultChan()
		co, ok := ev.Object.(*storage.CachingObject)
		if !ok || (co != first[0] && co != first[1]) {
			t.Errorf("a watch event does not share the listed object: %T", ev.Object)
		}
	}
	// The CRD changed again: its new state normalizes every object once more.
	again, err := Build(narrowedCRD())
	if err != nil {
		t.Fatal(err)
	}
	third := list(&Versioned{Inner: cacher, Served: gv, Stored: gv, Read: again[0].Read})
	if third[1] == first[1] {
		t.Errorf("a new schema state reused the old one's view")
	}
}
