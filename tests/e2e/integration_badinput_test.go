package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestBadInput sends what a broken or careless client sends, over raw HTTP, and checks
// the Status Kubernetes would answer with — and that nothing was written.
func TestBadInput(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, true)
	ctx := ctxFor(t)
	const ns = "bad"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	existing, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	staleRV := existing.ResourceVersion
	existing.Data["k"] = "v2"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cms := "/api/v1/namespaces/" + ns + "/configmaps"
	pods := "/api/v1/namespaces/" + ns + "/pods"
	cm := func(extra string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"` + extra + `},"data":{"k":"v"}}`
	}
	// bigTemplate is a PodTemplate of about size bytes: no validation bounds its size, so
	// only the storage's limit on one write (etcd's 1.5 MiB) stops it.
	bigTemplate := func(size int) string {
		var env []string
		for i := range size / (100 << 10) {
			env = append(env, fmt.Sprintf(`{"name":"E%d","value":"%s"}`, i, strings.Repeat("y", 100<<10)))
		}
		return `{"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"big"},"template":{"spec":{"containers":[{"name":"c","image":"i","env":[` +
			strings.Join(env, ",") + `]}]}}}`
	}
	const jsonCT, yamlCT = "application/json", "application/yaml"
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		code        int
		reason      metav1.StatusReason
		causes      []string // field paths of the Status details' causes
		message     string   // a substring of the message
	}{
		{name: "malformed JSON", method: "POST", path: cms, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"`,
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed YAML", method: "POST", path: cms, contentType: yamlCT, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [new\n",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "wrong kind for the URL", method: "POST", path: cms, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"new"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "wrong apiVersion", method: "POST", path: cms, contentType: jsonCT, body: `{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"new"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "name mismatch between body and URL", method: "PUT", path: cms + "/existing", contentType: jsonCT, body: cm(""),
			code: 400, reason: metav1.StatusReasonBadRequest, message: "does not match"},
		{name: "namespace mismatch between body and URL", method: "POST", path: cms, contentType: jsonCT, body: cm(`,"namespace":"default"`),
			code: 400, reason: metav1.StatusReasonBadRequest, message: "namespace"},
		{name: "uppercase name", method: "POST", path: cms, contentType: jsonCT, body: strings.Replace(cm(""), `"new"`, `"New"`, 1),
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}},
		{name: "name too long", method: "POST", path: cms, contentType: jsonCT, body: strings.Replace(cm(""), `"new"`, `"`+strings.Repeat("a", 254)+`"`, 1),
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}},
		{name: "pod without containers", method: "POST", path: pods, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"new"},"spec":{}}`,
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"spec.containers"}},
		{name: "oversize body", method: "POST", path: cms, contentType: jsonCT, body: cm("") + strings.Repeat(" ", 3<<20),
			code: 413, reason: metav1.StatusReasonRequestEntityTooLarge},
		{name: "object over the storage's limit", method: "POST", path: "/api/v1/namespaces/" + ns + "/podtemplates", contentType: jsonCT, body: bigTemplate(1700 << 10),
			code: 413, reason: metav1.StatusReasonRequestEntityTooLarge, message: "more than the storage accepts in one write"},
		{name: "ConfigMap data over 1 MiB", method: "POST", path: cms, contentType: jsonCT,
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"},"data":{"k":"` + strings.Repeat("x", 1100<<10) + `"}}`,
			code: 422, reason: metav1.StatusReasonInvalid},
		{name: "unknown resource", method: "GET", path: "/api/v1/namespaces/" + ns + "/widgets",
			code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown group", method: "POST", path: "/apis/widgets.example.com/v1/namespaces/" + ns + "/widgets", contentType: jsonCT, body: cm(""),
			code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unsupported media type", method: "POST", path: cms, contentType: "text/plain", body: cm(""),
			code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "stale resourceVersion on update", method: "PUT", path: cms + "/existing", contentType: jsonCT,
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"` + staleRV + `"},"data":{"k":"stale"}}`,
			code: 409, reason: metav1.StatusReasonConflict},
		{name: "update of a missing ConfigMap (no create on update)", method: "PUT", path: cms + "/new", contentType: jsonCT, body: cm(""),
			code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown field, fieldValidation=Strict", method: "POST", path: cms + "?fieldValidation=Strict", contentType: jsonCT,
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"},"bogus":1}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `unknown field "bogus"`},
		{name: "duplicate field, fieldValidation=Strict", method: "POST", path: cms + "?fieldValidation=Strict", contentType: jsonCT,
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"},"data":{"k":"v"},"data":{"k":"w"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `duplicate field "data"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, cs)
			code, header, body := do(t, srv, tc.method, tc.path, tc.contentType, tc.body)
			if code != tc.code {
				t.Errorf("status code %d, want %d; body %s", code, tc.code, body)
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want a JSON Status", ct)
			}
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
				t.Fatalf("body is not a Status (%v): %s", err, body)
			}
			if st.Status != metav1.StatusFailure || st.Code != int32(tc.code) || st.Reason != tc.reason {
				t.Errorf("Status status=%q code=%d reason=%q, want Failure %d %q; message %q", st.Status, st.Code, st.Reason, tc.code, tc.reason, st.Message)
			}
			if tc.message != "" && !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q does not mention %q", st.Message, tc.message)
			}
			for _, field := range tc.causes {
				if !hasCause(st, field) {
					t.Errorf("no cause for field %s in %+v", field, st.Details)
				}
			}
			if after := snapshot(t, cs); !maps.Equal(before, after) {
				t.Errorf("storage changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}

	t.Run("unknown field, fieldValidation=Warn", func(t *testing.T) {
		code, header, body := do(t, srv, "POST", cms+"?fieldValidation=Warn", jsonCT,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"warned"},"bogus":1}`)
		if code != http.StatusCreated {
			t.Fatalf("status code %d, want 201; body %s", code, body)
		}
		if w := strings.Join(header.Values("Warning"), "; "); !strings.Contains(w, `unknown field \"bogus\"`) && !strings.Contains(w, `unknown field "bogus"`) {
			t.Errorf("Warning header %q does not name the unknown field", w)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "warned", metav1.GetOptions{}); err != nil {
			t.Errorf("the warned object was not stored: %v", err)
		}
	})
}

// do sends one raw request and returns the status, header and body.
func do(t *testing.T, srv *testserver.Server, method, path, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	return srv.Do(t, context.Background(), method, path, contentType, body)
}

func hasCause(st metav1.Status, field string) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == field || strings.HasPrefix(c.Field, field+"[") || strings.HasPrefix(c.Field, field+".") {
			return true
		}
	}
	return false
}

// snapshot is every configmap and pod in the cluster with its resourceVersion.
func snapshot(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	cml, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing configmaps: %v", err)
	}
	for _, o := range cml.Items {
		out[fmt.Sprintf("configmaps/%s/%s", o.Namespace, o.Name)] = o.ResourceVersion
	}
	pl, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	for _, o := range pl.Items {
		out[fmt.Sprintf("pods/%s/%s", o.Namespace, o.Name)] = o.ResourceVersion
	}
	return out
}
