package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCustomResourceWrites: what Helm v4 and controller-runtime send for custom objects.
// Server-side apply creates and updates them and records an Apply entry (Helm v4
// installs a chart's custom objects so); an update records an Update entry; a DELETE
// whose DeleteOptions body names the resource's own group version is accepted
// (controller-runtime's client sends it so); apply to the status subresource is served.
func TestCustomResourceWrites(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	e.establish(t, widgetsCRD())
	const path = "/apis/example.com/v1/namespaces/default/widgets/applied"
	const applied = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"spec":{"immutableID":"a","replicas":2,"ports":[{"name":"http","port":80}]}}`

	managers := func(body []byte) map[string]metav1.ManagedFieldsOperationType {
		t.Helper()
		var obj metav1.PartialObjectMetadata
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("decoding %s: %v", body, err)
		}
		out := map[string]metav1.ManagedFieldsOperationType{}
		for _, m := range obj.ManagedFields {
			out[m.Manager] = m.Operation
		}
		return out
	}

	code, _, body := e.do(t, http.MethodPatch, path+"?fieldManager=helm", "application/apply-patch+yaml", "application/json", applied)
	if code != http.StatusCreated {
		t.Fatalf("apply creating a custom object: %d %s", code, body)
	}
	if m := managers(body); m["helm"] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managers after apply: %v, want helm by Apply", m)
	}

	// Another manager setting an owned field conflicts; forcing takes it over.
	other := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"spec":{"immutableID":"a","replicas":3}}`
	if code, _, body := e.do(t, http.MethodPatch, path+"?fieldManager=other", "application/apply-patch+yaml", "application/json", other); code != http.StatusConflict {
		t.Fatalf("a conflicting apply: %d %s, want 409", code, body)
	}
	if code, _, body := e.do(t, http.MethodPatch, path+"?fieldManager=other&force=true", "application/apply-patch+yaml", "application/json", other); code != http.StatusOK {
		t.Fatalf("a forced apply: %d %s", code, body)
	}

	u, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, "applied", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(4), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	u, err = e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, u, metav1.UpdateOptions{FieldManager: "editor"})
	if err != nil {
		t.Fatalf("updating the applied object: %v", err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if m := managers(raw); m["editor"] != metav1.ManagedFieldsOperationUpdate || m["helm"] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managers after an update: %v, want editor by Update beside helm by Apply", m)
	}

	// Apply to the status subresource owns status only (controller-runtime's
	// Status().Apply).
	statusApply := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"status":{"phase":"Ready","replicas":4}}`
	code, _, body = e.do(t, http.MethodPatch, path+"/status?fieldManager=ctrl", "application/apply-patch+yaml", "application/json", statusApply)
	if code != http.StatusOK {
		t.Fatalf("apply to status: %d %s", code, body)
	}
	if m := managers(body); m["ctrl"] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managers after applying status: %v, want ctrl by Apply", m)
	}
	if !strings.Contains(string(body), `"phase":"Ready"`) {
		t.Fatalf("the applied status is not stored: %s", body)
	}

	code, _, body = e.do(t, http.MethodDelete, path, "application/json", "application/json",
		`{"kind":"DeleteOptions","apiVersion":"example.com/v1","propagationPolicy":"Background"}`)
	if code != http.StatusOK {
		t.Fatalf("deleting with DeleteOptions of the resource's group version: %d %s", code, body)
	}
	if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, "applied", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the object is still there after delete: %v", err)
	}
	code, _, body = e.do(t, http.MethodDelete, path, "application/json", "application/json", `{"kind":"Widget","apiVersion":"example.com/v1"}`)
	if code != http.StatusBadRequest {
		t.Fatalf("deleting with a body that is no DeleteOptions: %d %s, want 400", code, body)
	}
}
