package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"
)

func newTestService(t *testing.T) *Service {
	t.Helper()
	svc, err := New(testScheme(t), testResources(), "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func newTestServer(t *testing.T, svc *Service) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/openapi/v2", svc.V2())
	mux.Handle("/openapi/v3", svc.V3())
	mux.Handle("/openapi/v3/", svc.V3())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path with the given headers.
func get(t *testing.T, srv *httptest.Server, path string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestNewRejectsUnknownKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  Resource
	}{
		{"kind", Resource{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Plural: "widgets"}},
		{"list kind", Resource{GVK: core("Pod"), ListKind: "PodCollection", Plural: "pods"}},
		{"subresource kind", Resource{GVK: core("Pod"), Plural: "pods", Subresources: []Subresource{{Name: "x", Kind: core("Nope")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(testScheme(t), []Resource{tc.res}, "v1"); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
	if _, err := New(testScheme(t), []Resource{{GVK: core("Pod"), Plural: "pods"}, {GVK: core("Pod"), Plural: "pods"}}, "v1"); err == nil {
		t.Error("New accepted a resource twice")
	}
}

func TestV2Document(t *testing.T) {
	svc := newTestService(t)
	doc, err := openapiv2.ParseDocument(svc.v2JSON.data)
	if err != nil {
		t.Fatalf("gnostic rejects the v2 document: %v", err)
	}
	// kubectl builds its client-side models (validation, apply patch metadata) from this.
	resources, err := kubectlopenapi.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("kubectl cannot load the v2 document: %v", err)
	}
	for _, gvk := range []schema.GroupVersionKind{core("Pod"), apps("Deployment"), core("ConfigMap")} {
		if resources.LookupResource(gvk) == nil {
			t.Errorf("kubectl finds no v2 model for %v", gvk)
		}
	}
	// Client-side validation accepts a valid object and flags an unknown field.
	validator := validation.ValidateModel
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox",
			"ports":     []any{map[string]any{"containerPort": int64(80)}},
			"resources": map[string]any{"limits": map[string]any{"cpu": "100m"}}}}}}
	if errs := validator(pod, resources.LookupResource(core("Pod")), "Pod"); len(errs) != 0 {
		t.Errorf("valid pod rejected: %v", errs)
	}
	pod["spec"].(map[string]any)["bogus"] = true
	if errs := validator(pod, resources.LookupResource(core("Pod")), "Pod"); len(errs) == 0 {
		t.Error("unknown field accepted")
	}

	var sw spec.Swagger
	if err := json.Unmarshal(svc.v2JSON.data, &sw); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, "v2", svc.v2JSON.data, func(ref string) bool {
		if name, ok := strings.CutPrefix(ref, "#/parameters/"); ok {
			_, ok := sw.Parameters[name]
			return ok
		}
		_, ok := sw.Definitions[strings.TrimPrefix(ref, "#/definitions/")]
		return ok
	})
	item := sw.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
	if item.Patch == nil || item.Get == nil || item.Put == nil || item.Delete == nil {
		t.Fatalf("deployment item path = %+v", item)
	}
	if got := item.Patch.Extensions[extAction]; got != "patch" {
		t.Errorf("patch action = %v", got)
	}
	if !hasQueryParamV2(&sw, item.Patch, "fieldValidation") || !hasQueryParamV2(&sw, item.Patch, "dryRun") || !hasQueryParamV2(&sw, item.Patch, "fieldManager") {
		t.Errorf("patch parameters = %+v", item.Patch.Parameters)
	}
	coll := sw.Paths.Paths["/api/v1/namespaces/{namespace}/pods"]
	if coll.Get == nil || coll.Post == nil || coll.Delete == nil || coll.Get.ID != "listCoreV1NamespacedPod" {
		t.Errorf("pod collection = %+v", coll)
	}
	if !hasQueryParamV2(&sw, coll.Get, "labelSelector") || !hasQueryParamV2(&sw, coll.Get, "watch") || !hasQueryParamV2(&sw, coll.Post, "fieldValidation") {
		t.Errorf("pod collection parameters: list %+v create %+v", coll.Get.Parameters, coll.Post.Parameters)
	}
	scale := sw.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
	if scale.Patch == nil || scale.Patch.Extensions[extGVK].(map[string]any)["kind"] != "Scale" {
		t.Errorf("scale = %+v", scale)
	}
	if _, ok := sw.Definitions["io.k8s.api.autoscaling.v1.Scale"]; !ok {
		t.Error("Scale definition missing")
	}
	logOp := sw.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}/log"].Get
	if logOp == nil || !hasQueryParamV2(&sw, logOp, "container") || !logOp.Responses.StatusCodeResponses[200].Schema.Type.Contains("string") {
		t.Errorf("log = %+v", logOp)
	}
}

// hasQueryParamV2 resolves shared #/parameters/ references like kubectl's verifier does.
func hasQueryParamV2(sw *spec.Swagger, op *spec.Operation, name string) bool {
	for _, p := range op.Parameters {
		if ref, ok := strings.CutPrefix(p.Ref.String(), "#/parameters/"); ok {
			p = sw.Parameters[ref]
		}
		if p.In == "query" && p.Name == name {
			return true
		}
	}
	return false
}

// checkRefs asserts that every $ref in a document resolves inside it.
func checkRefs(t *testing.T, what string, data []byte, exists func(ref string) bool) {
	t.Helper()
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if ref, ok := e.(string); ok && k == "$ref" {
					if !exists(ref) {
						t.Errorf("%s: dangling $ref %q", what, ref)
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc)
}

func TestV3Documents(t *testing.T) {
	svc := newTestService(t)
	srv := newTestServer(t, svc)
	resp, body := get(t, srv, "/openapi/v3", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("index: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}
	for _, gv := range []string{"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1"} {
		if _, ok := index.Paths[gv]; !ok {
			t.Errorf("index lacks %s: %s", gv, body)
		}
	}
	if len(index.Paths) != 4 {
		t.Errorf("index has %d entries, want 4", len(index.Paths))
	}

	for _, tc := range []struct {
		gv        string
		gvk       schema.GroupVersionKind
		patchPath string
		schemas   []string
	}{
		{"api/v1", core("Pod"), "/api/v1/namespaces/{namespace}/pods/{name}",
			[]string{"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "io.k8s.api.core.v1.Binding", "io.k8s.api.policy.v1.Eviction", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"}},
		{"apis/apps/v1", apps("Deployment"), "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
			[]string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.PodSpec", "io.k8s.api.autoscaling.v1.Scale", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"}},
	} {
		t.Run(tc.gv, func(t *testing.T) {
			url := index.Paths[tc.gv].ServerRelativeURL
			if !strings.HasPrefix(url, "/openapi/v3/"+tc.gv+"?hash=") {
				t.Fatalf("serverRelativeURL = %q", url)
			}
			resp, body := get(t, srv, url, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", url, resp.StatusCode)
			}
			for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "public, immutable", "Vary": "Accept"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if resp.Header.Get("Expires") == "" || resp.Header.Get("Etag") == "" {
				t.Errorf("headers = %v", resp.Header)
			}
			var doc spec3.OpenAPI
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Version != "3.0.0" || doc.Info.Version != "v1.37.2" {
				t.Errorf("openapi %q info %+v", doc.Version, doc.Info)
			}
			if _, err := openapiv3.ParseDocument(body); err != nil {
				t.Errorf("gnostic rejects the v3 document: %v", err)
			}
			checkRefs(t, tc.gv, body, func(ref string) bool {
				name, ok := strings.CutPrefix(ref, "#/components/schemas/")
				return ok && doc.Components.Schemas[name] != nil
			})
			for _, name := range tc.schemas {
				if doc.Components.Schemas[name] == nil {
					t.Errorf("schema %s missing", name)
				}
			}
			// Each group-version document carries only what its paths reach.
			if tc.gv == "apis/apps/v1" && doc.Components.Schemas["io.k8s.api.core.v1.Pod"] != nil {
				t.Error("apps/v1 document carries core/v1 Pod")
			}
			for path, item := range doc.Paths.Paths {
				if !strings.HasPrefix(path, "/"+tc.gv+"/") {
					t.Errorf("path %s in %s document", path, tc.gv)
				}
				if item.Patch != nil && !hasQueryParamV3(item.Patch, "fieldValidation") {
					t.Errorf("PATCH %s lacks fieldValidation", path)
				}
			}
			patch := doc.Paths.Paths[tc.patchPath].Patch
			var gvk map[string]string
			if err := patch.Extensions.GetObject(extGVK, &gvk); err != nil || gvk["kind"] != tc.gvk.Kind || gvk["version"] != tc.gvk.Version || gvk["group"] != tc.gvk.Group {
				t.Errorf("patch %s = %v (%v)", extGVK, gvk, err)
			}
			if patch.RequestBody == nil || patch.RequestBody.Content["application/strategic-merge-patch+json"] == nil {
				t.Errorf("patch request body = %+v", patch.RequestBody)
			}
			if patch.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String() != "#/components/schemas/"+definitionName(mustType(t, tc.gvk)) {
				t.Errorf("patch 200 response = %+v", patch.Responses.StatusCodeResponses[200])
			}
		})
	}

	// Unknown documents and a stale hash behave like kube-apiserver.
	if resp, _ := get(t, srv, "/openapi/v3/apis/nope/v1", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown group version: %d", resp.StatusCode)
	}
	resp, _ = get(t, srv, "/openapi/v3/api/v1?hash=stale", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != index.Paths["api/v1"].ServerRelativeURL {
		t.Errorf("stale hash: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, srv, "/openapi/v3/api/v1", nil); resp.Header.Get("Cache-Control") != "" {
		t.Errorf("unhashed request must not be marked immutable: %q", resp.Header.Get("Cache-Control"))
	}
	if resp, _ := get(t, srv, "/openapi/v3/api/v1", map[string]string{"Accept": "text/html"}); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("text/html: %d", resp.StatusCode)
	}
}

func mustType(t *testing.T, gvk schema.GroupVersionKind) reflect.Type {
	t.Helper()
	typ, err := typeOf(testScheme(t), gvk)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

func hasQueryParamV3(op *spec3.Operation, name string) bool {
	for _, p := range op.Parameters {
		if p.In == "query" && p.Name == name {
			return true
		}
	}
	return false
}

func TestProtobuf(t *testing.T) {
	svc := newTestService(t)
	srv := newTestServer(t, svc)
	for _, tc := range []struct {
		name, path, accept, contentType string
		want                            func() (proto.Message, error)
		into                            proto.Message
	}{
		{"v2", "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
			func() (proto.Message, error) { return openapiv2.ParseDocument(svc.v2JSON.data) }, &openapiv2.Document{}},
		{"v2 new media type", "/openapi/v2", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json;q=0.5", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
			func() (proto.Message, error) { return openapiv2.ParseDocument(svc.v2JSON.data) }, &openapiv2.Document{}},
		{"v3", "/openapi/v3/apis/apps/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
			func() (proto.Message, error) { return openapiv3.ParseDocument(svc.base["apis/apps/v1"].json.data) }, &openapiv3.Document{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, srv, tc.path, map[string]string{"Accept": tc.accept})
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType {
				t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if err := proto.Unmarshal(body, tc.into); err != nil {
				t.Fatal(err)
			}
			want, err := tc.want()
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(tc.into, want) {
				t.Error("protobuf does not round-trip to the JSON document")
			}
		})
	}
	v2, _ := proto.Marshal(must(openapiv2.ParseDocument(svc.v2JSON.data)))
	var doc openapiv2.Document
	if err := proto.Unmarshal(v2, &doc); err != nil || doc.GetInfo().GetVersion() != "v1.37.2" || len(doc.GetDefinitions().GetAdditionalProperties()) == 0 {
		t.Errorf("round trip: %v %v", err, doc.GetInfo())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestETags(t *testing.T) {
	svc := newTestService(t)
	srv := newTestServer(t, svc)
	pb := "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	for _, tc := range []struct {
		name, path, accept string
	}{
		{"v2 json", "/openapi/v2", "application/json"},
		{"v2 default", "/openapi/v2", ""},
		{"v2 protobuf", "/openapi/v2", pb},
		{"v3 index", "/openapi/v3", ""},
		{"v3 doc", "/openapi/v3/api/v1", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, srv, tc.path, map[string]string{"Accept": tc.accept})
			etag := resp.Header.Get("Etag")
			if resp.StatusCode != http.StatusOK || etag == "" || len(body) == 0 {
				t.Fatalf("%d etag %q, %d bytes", resp.StatusCode, etag, len(body))
			}
			resp, body = get(t, srv, tc.path, map[string]string{"Accept": tc.accept, "If-None-Match": etag})
			if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
				t.Errorf("If-None-Match: %d, %d bytes", resp.StatusCode, len(body))
			}
			if resp, _ := get(t, srv, tc.path, map[string]string{"Accept": tc.accept, "If-None-Match": `"other"`}); resp.StatusCode != http.StatusOK {
				t.Errorf("stale If-None-Match: %d", resp.StatusCode)
			}
		})
	}
	jsonResp, _ := get(t, srv, "/openapi/v2", map[string]string{"Accept": "application/json"})
	pbResp, _ := get(t, srv, "/openapi/v2", map[string]string{"Accept": pb})
	if jsonResp.Header.Get("Etag") == pbResp.Header.Get("Etag") {
		t.Error("JSON and protobuf share an ETag")
	}
	if resp, _ := get(t, srv, "/openapi/v2", map[string]string{"Accept": "text/plain"}); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("text/plain: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/openapi/v2", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %v %v", resp, err)
	}
}

func TestNegotiate(t *testing.T) {
	offers := []string{"json", protoV2Legacy, protoV2}
	for _, tc := range []struct{ accept, want string }{
		{"", "json"},
		{"*/*", "json"},
		{"application/*", "json"},
		{"application/json", "json"},
		{"application/com.github.proto-openapi.spec.v2@v1.0+protobuf", protoV2Legacy},
		{"application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf", protoV2},
		{"application/com.github.proto-openapi.spec.v2@v1.0+protobuf;q=0.1, application/json", "json"},
		{"text/html", ""},
		{"application/json;q=0", ""},
	} {
		if got := negotiate(tc.accept, offers...); got != tc.want {
			t.Errorf("negotiate(%q) = %q, want %q", tc.accept, got, tc.want)
		}
	}
}
