package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"time"
)

// TestListJSONFromStoredObjects checks JSON lists of custom objects, which the server
// writes from the stored bytes the watch cache keeps: every item is what a GET of it
// answers (resourceVersion included), whatever its content (a "metadata" key inside the
// spec, strings with braces, quotes and escapes), for lists from the cache, consistent
// lists, paged lists and selected lists.
func TestListJSONFromStoredObjects(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	e.establish(t, simpleCRD("gadgets", "Gadget", "lists.example.com", apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true)}))
	gadgets := e.dyn.Resource(schema.GroupVersionResource{Group: "lists.example.com", Version: "v1", Resource: "gadgets"})
	want := map[string]*unstructured.Unstructured{}
	for i := range 12 {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "lists.example.com/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": fmt.Sprintf("g%02d", i), "labels": map[string]any{"parity": []string{"even", "odd"}[i%2]}},
			"spec": map[string]any{
				"metadata": map[string]any{"name": "not-the-object's"},
				"text":     fmt.Sprintf(`quote " brace } bracket ] backslash \ unicode é %d`, i),
				"list":     []any{int64(i), 1.5, true, nil, map[string]any{"k": "{["}},
			}}}
		got, err := gadgets.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[got.GetName()] = got
	}
	// The last change reaches the watch cache; then it answers lists with resourceVersion=0.
	last := 0
	for _, w := range want {
		var rv int
		fmt.Sscan(w.GetResourceVersion(), &rv)
		last = max(last, rv)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := gadgets.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		var rv int
		fmt.Sscan(l.GetResourceVersion(), &rv)
		return rv >= last, nil
	}); err != nil {
		t.Fatal(err)
	}

	list := func(t *testing.T, query string) *unstructured.UnstructuredList {
		t.Helper()
		code, hdr, body := e.do(t, http.MethodGet, "/apis/lists.example.com/v1/gadgets"+query, "", "application/json", "")
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("list %s: %d %s %s", query, code, hdr.Get("Content-Type"), body)
		}
		if !json.Valid(body) {
			t.Fatalf("list %s: not JSON: %s", query, body)
		}
		out := &unstructured.UnstructuredList{}
		if err := out.UnmarshalJSON(body); err != nil {
			t.Fatalf("list %s: %v", query, err)
		}
		if out.GetAPIVersion() != "lists.example.com/v1" || out.GetKind() != "GadgetList" || out.GetResourceVersion() == "" {
			t.Fatalf("list %s: apiVersion %q kind %q resourceVersion %q", query, out.GetAPIVersion(), out.GetKind(), out.GetResourceVersion())
		}
		for _, it := range out.Items {
			w, ok := want[it.GetName()]
			if !ok || !equality.Semantic.DeepEqual(it.Object, w.Object) {
				t.Errorf("list %s: item %s\n%v\nwant\n%v", query, it.GetName(), it.Object, w.Object)
			}
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"?resourceVersion=0", 12},
		{"", 12},
		{"?labelSelector=parity%3Dodd", 6},
		{"?resourceVersion=0&labelSelector=parity%3Deven", 6},
	} {
		t.Run("query "+tc.query, func(t *testing.T) {
			if got := list(t, tc.query); len(got.Items) != tc.want {
				t.Fatalf("%d items, want %d", len(got.Items), tc.want)
			}
		})
	}
	t.Run("paged", func(t *testing.T) {
		seen := 0
		cont := ""
		for {
			page := list(t, "?limit=5&continue="+cont)
			seen += len(page.Items)
			if cont = page.GetContinue(); cont == "" {
				break
			}
			if rem := page.GetRemainingItemCount(); rem == nil || *rem != int64(12-seen) {
				t.Fatalf("remainingItemCount %v after %d items, want %d", rem, seen, 12-seen)
			}
		}
		if seen != 12 {
			t.Fatalf("%d items over the pages, want 12", seen)
		}
	})
}
