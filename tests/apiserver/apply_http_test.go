// The apply tests check server-side apply and managedFields against an in-process
// wasmplane: raw HTTP for exact statuses, client-go apply configurations, and the
// ownership records every write leaves.

package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const applyCT = "application/apply-patch+yaml"

// ctxFor is a per-test context that ends with the test.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// do sends one raw request and returns the status and body.
func do(t *testing.T, srv *testserver.Server, method, path, contentType, body string) (int, []byte) {
	t.Helper()
	code, _, data := srv.Do(t, ctxFor(t), method, path, contentType, body)
	return code, data
}

func newNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestApplyHTTP drives apply over raw HTTP through create, conflict, force and the bad
// inputs, checking Kubernetes' status, reason and causes and what is stored after each.
func TestApplyHTTP(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, true)
	ctx := ctxFor(t)
	const ns = "apply-http"
	newNamespace(t, cs, ns)
	cm := "/api/v1/namespaces/" + ns + "/configmaps/"
	cmYAML := func(name, data string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n" + data
	}
	// stored returns the configmap's resourceVersion and data ("" when absent).
	stored := func(name string) (string, map[string]string) {
		got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return got.ResourceVersion, got.Data
	}

	type cause struct{ Type, Message, Field string }
	steps := []struct {
		name        string
		path        string
		contentType string
		body        string
		code        int
		reason      metav1.StatusReason
		causes      []cause
		// stores: the object changes (or is created); otherwise it must stay as it was.
		stores bool
		data   map[string]string // the data stored after the step
	}{
		{name: "apply creates", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: cmYAML("shared", "  a: \"1\"\n  b: \"2\"\n"),
			code: 201, stores: true, data: map[string]string{"a": "1", "b": "2"}},
		{name: "same apply again changes nothing", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: cmYAML("shared", "  a: \"1\"\n  b: \"2\"\n"),
			code: 200, data: map[string]string{"a": "1", "b": "2"}},
		{name: "a second manager adds its own field", path: cm + "shared?fieldManager=bob", contentType: applyCT, body: cmYAML("shared", "  c: \"3\"\n"),
			code: 200, stores: true, data: map[string]string{"a": "1", "b": "2", "c": "3"}},
		{name: "conflict on two of alice's fields", path: cm + "shared?fieldManager=bob", contentType: applyCT, body: cmYAML("shared", "  a: \"x\"\n  b: \"y\"\n  c: \"3\"\n"),
			code: 409, reason: metav1.StatusReasonConflict, causes: []cause{
				{Type: string(metav1.CauseTypeFieldManagerConflict), Message: `conflict with "alice"`, Field: ".data.a"},
				{Type: string(metav1.CauseTypeFieldManagerConflict), Message: `conflict with "alice"`, Field: ".data.b"},
			}, data: map[string]string{"a": "1", "b": "2", "c": "3"}},
		{name: "conflict with another applier", path: cm + "shared?fieldManager=carol", contentType: applyCT, body: cmYAML("shared", "  c: \"z\"\n"),
			code: 409, reason: metav1.StatusReasonConflict, causes: []cause{
				{Type: string(metav1.CauseTypeFieldManagerConflict), Message: `conflict with "bob"`, Field: ".data.c"},
			}, data: map[string]string{"a": "1", "b": "2", "c": "3"}},
		{name: "force takes ownership", path: cm + "shared?fieldManager=bob&force=true", contentType: applyCT, body: cmYAML("shared", "  a: \"x\"\n  c: \"3\"\n"),
			code: 200, stores: true, data: map[string]string{"a": "x", "b": "2", "c": "3"}},
		{name: "alice now conflicts on a", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: cmYAML("shared", "  a: \"1\"\n  b: \"2\"\n"),
			code: 409, reason: metav1.StatusReasonConflict, causes: []cause{
				{Type: string(metav1.CauseTypeFieldManagerConflict), Message: `conflict with "bob"`, Field: ".data.a"},
			}, data: map[string]string{"a": "x", "b": "2", "c": "3"}},
		{name: "dropping a field from one's apply removes it", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: cmYAML("shared", "  x: \"new\"\n"),
			code: 200, stores: true, data: map[string]string{"a": "x", "c": "3", "x": "new"}},
		{name: "JSON is YAML", path: cm + "shared?fieldManager=alice", contentType: applyCT,
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shared"},"data":{"x":"new","y":"json"}}`,
			code: 200, stores: true, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		// Bad input: nothing may be written.
		{name: "apply without fieldManager", path: cm + "shared", contentType: applyCT, body: cmYAML("shared", "  a: \"no\"\n"),
			code: 422, reason: metav1.StatusReasonInvalid, causes: []cause{
				{Type: string(metav1.CauseTypeFieldValueRequired), Message: "Required value: is required for apply patch", Field: "fieldManager"},
			}, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		{name: "apply patch that is not YAML", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: "data: [unclosed\n  a: {",
			code: 400, reason: metav1.StatusReasonBadRequest, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		{name: "apply patch that is a YAML scalar", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: "just words",
			code: 400, reason: metav1.StatusReasonBadRequest, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		{name: "force on a merge patch", path: cm + "shared?fieldManager=alice&force=true", contentType: "application/merge-patch+json", body: `{"data":{"a":"m"}}`,
			code: 422, reason: metav1.StatusReasonInvalid, causes: []cause{
				{Type: string(metav1.CauseTypeForbidden), Message: "Forbidden: may not be specified for non-apply patch", Field: "force"},
			}, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		{name: "apply of another version", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: "apiVersion: v2\nkind: ConfigMap\nmetadata:\n  name: shared\n",
			code: 400, reason: metav1.StatusReasonBadRequest, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		{name: "apply under another name", path: cm + "shared?fieldManager=alice", contentType: applyCT, body: cmYAML("other", "  x: new\n  y: json\n"),
			code: 400, reason: metav1.StatusReasonBadRequest, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
		{name: "CBOR apply is not served (kube-apiserver's default)", path: cm + "shared?fieldManager=alice", contentType: "application/apply-patch+cbor", body: "\xa0",
			code: 415, reason: metav1.StatusReasonUnsupportedMediaType, data: map[string]string{"a": "x", "c": "3", "x": "new", "y": "json"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			rvBefore, _ := stored("shared")
			code, body := do(t, srv, http.MethodPatch, st.path, st.contentType, st.body)
			if code != st.code {
				t.Fatalf("status %d, want %d; body %s", code, st.code, body)
			}
			if st.reason != "" {
				var status metav1.Status
				if err := json.Unmarshal(body, &status); err != nil {
					t.Fatalf("decoding Status: %v; body %s", err, body)
				}
				if status.Reason != st.reason || status.Code != int32(st.code) {
					t.Errorf("reason %q code %d, want %q %d; message %q", status.Reason, status.Code, st.reason, st.code, status.Message)
				}
				var got []cause
				if status.Details != nil {
					for _, c := range status.Details.Causes {
						got = append(got, cause{Type: string(c.Type), Message: c.Message, Field: c.Field})
					}
				}
				if st.causes != nil && !slices.Equal(got, st.causes) {
					t.Errorf("causes %+v, want %+v", got, st.causes)
				}
			}
			rvAfter, data := stored("shared")
			if changed := rvAfter != rvBefore; changed != st.stores {
				t.Errorf("resourceVersion %q -> %q: stored=%v, want %v", rvBefore, rvAfter, changed, st.stores)
			}
			if !mapsEqual(data, st.data) {
				t.Errorf("stored data %v, want %v", data, st.data)
			}
		})
	}

	t.Run("conflict with an updater names its version", func(t *testing.T) {
		if code, body := do(t, srv, http.MethodPatch, cm+"shared?fieldManager=editor", "application/merge-patch+json", `{"data":{"e":"5"}}`); code != 200 {
			t.Fatalf("merge patch: %d %s", code, body)
		}
		rv, _ := stored("shared")
		code, body := do(t, srv, http.MethodPatch, cm+"shared?fieldManager=alice", applyCT, cmYAML("shared", "  x: new\n  y: json\n  e: \"6\"\n"))
		var status metav1.Status
		if err := json.Unmarshal(body, &status); err != nil || code != 409 || status.Details == nil || len(status.Details.Causes) != 1 {
			t.Fatalf("apply over an updater's field: %d %s", code, body)
		}
		c := status.Details.Causes[0]
		if c.Field != ".data.e" || c.Message != `conflict with "editor" using v1` {
			t.Errorf("cause %+v", c)
		}
		if after, _ := stored("shared"); after != rv {
			t.Errorf("a conflicting apply wrote: %s -> %s", rv, after)
		}
	})

	t.Run("bad apply of a missing object creates nothing", func(t *testing.T) {
		for _, tc := range []struct {
			path, body string
			code       int
		}{
			{cm + "ghost", cmYAML("ghost", "  a: \"1\"\n"), 422},
			{cm + "ghost?fieldManager=alice", "{{{", 400},
			{cm + "ghost?fieldManager=alice", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ghost\n  uid: 0b4f7c1e-1111-2222-3333-444455556666\n", 409},
			{"/api/v1/namespaces/" + ns + "/configmaps/ghost/status?fieldManager=alice", cmYAML("ghost", "  a: \"1\"\n"), 404},
			// A dry run answers what it would create.
			{cm + "ghost?fieldManager=alice&dryRun=All", cmYAML("ghost", "  a: \"1\"\n"), 201},
		} {
			code, body := do(t, srv, http.MethodPatch, tc.path, applyCT, tc.body)
			if code != tc.code {
				t.Errorf("PATCH %s: status %d, want %d; body %s", tc.path, code, tc.code, body)
			}
			if rv, _ := stored("ghost"); rv != "" {
				t.Fatalf("PATCH %s (status %d) stored the object", tc.path, code)
			}
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
