package apiserver

import (
	"context"
	"slices"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestCustomResourceManagedFields checks that custom objects keep managedFields as
// built-in ones do: a create and an update record their managers, server-side apply
// merges by the CRD's schema (the map list spec.ports by name), conflicts with another
// manager are refused with 409 unless forced, and the status subresource has its own
// manager.
func TestCustomResourceManagedFields(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	e.establish(t, widgetsCRD())
	ctx := context.Background()
	ri := e.dyn.Resource(widgetsResource).Namespace("default")
	managers := func(t *testing.T, name string) []string {
		t.Helper()
		got, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mf := range got.GetManagedFields() {
			out = append(out, mf.Manager+"/"+string(mf.Operation)+"/"+mf.Subresource)
		}
		slices.Sort(out)
		return out
	}

	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "created"}, "spec": map[string]any{"immutableID": "a", "replicas": int64(2)}}}
	if _, err := ri.Create(ctx, w, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
		t.Fatal(err)
	}
	if got := managers(t, "created"); !slices.Equal(got, []string{"creator/Update/"}) {
		t.Fatalf("after a create: managers %v", got)
	}
	got, err := ri.Get(ctx, "created", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(got.Object, int64(3), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Update(ctx, got, metav1.UpdateOptions{FieldManager: "updater"}); err != nil {
		t.Fatal(err)
	}
	if got := managers(t, "created"); !slices.Equal(got, []string{"creator/Update/", "updater/Update/"}) {
		t.Fatalf("after an update: managers %v", got)
	}

	apply := func(manager string, force bool, body string, sub ...string) (*unstructured.Unstructured, error) {
		return ri.Patch(ctx, "applied", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: manager, Force: &force}, sub...)
	}
	if _, err := apply("alice", false, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},
		"spec":{"immutableID":"b","replicas":1,"ports":[{"name":"http","port":80}]}}`); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	// bob adds a port of the map list: merged by key, not replacing alice's.
	out, err := apply("bob", false, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},
		"spec":{"immutableID":"b","ports":[{"name":"metrics","port":9090}]}}`)
	if err != nil {
		t.Fatalf("second manager's apply: %v", err)
	}
	ports, _, _ := unstructured.NestedSlice(out.Object, "spec", "ports")
	if len(ports) != 2 {
		t.Fatalf("spec.ports after two managers applied one port each: %v (want both, merged by name)", ports)
	}
	// bob changing alice's replicas conflicts.
	_, err = apply("bob", false, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"spec":{"immutableID":"b","replicas":5}}`)
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply of a field another manager owns: %v, want 409 Conflict", err)
	}
	if _, err := apply("bob", true, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"spec":{"immutableID":"b","replicas":5}}`); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if _, err := apply("operator", false, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"status":{"phase":"Ready"}}`, "status"); err != nil {
		t.Fatalf("apply of status: %v", err)
	}
	if got := managers(t, "applied"); !slices.Equal(got, []string{"alice/Apply/", "bob/Apply/", "operator/Apply/status"}) {
		t.Fatalf("after the applies: managers %v", got)
	}
}
