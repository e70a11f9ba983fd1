package apiserver

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// Objects stored before their CRD's schema gained a default are served with it on every
// read (get, list, watch), and without it once the default is gone, as kube-apiserver's
// storage decoder does.
func TestDefaultingOnRead(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	crd := simpleCRD("gadgets", "Gadget", "defaults.example.com", apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"a": {Type: "string"}, "b": {Type: "string"}}})
	e.establish(t, crd)
	gvr := schema.GroupVersionResource{Group: "defaults.example.com", Version: "v1", Resource: "gadgets"}
	client := e.dyn.Resource(gvr)
	gadget := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "defaults.example.com/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{}}}
	}
	if _, err := client.Create(ctx, gadget("old"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patchCRD := func(patch string) {
		t.Helper()
		if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	specOf := func(u *unstructured.Unstructured) map[string]any {
		s, _, _ := unstructured.NestedMap(u.Object, "spec")
		return s
	}
	// waitGet polls until a get of name serves spec field f as want ("" = absent).
	waitGet := func(name, f, want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got, _, _ := unstructured.NestedString(u.Object, "spec", f)
			return got == want, nil
		})
		if err != nil {
			t.Fatalf("%s: spec.%s never read back as %q: %v", name, f, want, err)
		}
	}

	patchCRD(`[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/a/default","value":"A"}]`)
	waitGet("old", "a", "A")
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || specOf(&list.Items[0])["a"] != "A" {
		t.Fatalf("list: %v", list.Items)
	}
	w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if u, ok := ev.Object.(*unstructured.Unstructured); !ok || ev.Type != watch.Added || specOf(u)["a"] != "A" {
			t.Fatalf("watch event %s %v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	w.Stop()
	// Written while a had its default: a is stored.
	if _, err := client.Create(ctx, gadget("new"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	patchCRD(`[{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/a/default"},
		{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/b/default","value":"B"}]`)
	waitGet("old", "b", "B")
	for name, want := range map[string]string{"old": "", "new": "A"} {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(u.Object, "spec", "a"); got != want || specOf(u)["b"] != "B" {
			t.Errorf("%s: spec %v, want a=%q b=B", name, specOf(u), want)
		}
	}
}
