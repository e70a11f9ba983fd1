package filters_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequestInfo(t *testing.T) {
	tests := []struct {
		method, url string
		want        filters.RequestInfo
	}{
		{"GET", "/api/v1/namespaces/b/pods", filters.RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/b/pods?watch=true", filters.RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/b/pods?watch=1&resourceVersion=5", filters.RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/b/pods?watch=false", filters.RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/b/pods/p", filters.RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p"}},
		{"GET", "/api/v1/namespaces/b/pods/p/log", filters.RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p", Subresource: "log"}},
		{"POST", "/api/v1/namespaces/b/pods/p/binding", filters.RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p", Subresource: "binding"}},
		{"PUT", "/api/v1/namespaces/b/pods/p/status", filters.RequestInfo{IsResourceRequest: true, Verb: "update", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p", Subresource: "status"}},
		{"PATCH", "/apis/apps/v1/namespaces/b/deployments/d/scale", filters.RequestInfo{IsResourceRequest: true, Verb: "patch", APIPrefix: "apis", APIGroup: "apps", APIVersion: "v1", Namespace: "b", Resource: "deployments", Name: "d", Subresource: "scale"}},
		{"POST", "/api/v1/namespaces/b/pods", filters.RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"DELETE", "/api/v1/namespaces/b/pods/p", filters.RequestInfo{IsResourceRequest: true, Verb: "delete", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p"}},
		{"DELETE", "/api/v1/namespaces/b/pods", filters.RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"GET", "/api/v1/pods", filters.RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "pods"}},
		{"GET", "/api/v1/nodes/n1", filters.RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Resource: "nodes", Name: "n1"}},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&watch=true", filters.RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Resource: "nodes", Name: "n1"}},
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", filters.RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "pods"}},
		{"GET", "/api/v1/namespaces", filters.RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "namespaces"}},
		{"GET", "/api/v1/namespaces/b", filters.RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "namespaces", Name: "b"}},
		{"PUT", "/api/v1/namespaces/b/finalize", filters.RequestInfo{IsResourceRequest: true, Verb: "update", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "namespaces", Name: "b", Subresource: "finalize"}},
		{"GET", "/api/v1/namespaces/b/status", filters.RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "namespaces", Name: "b", Subresource: "status"}},
		{"GET", "/api/v1/watch/namespaces/b/pods", filters.RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/b/pods/p", filters.RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p"}},
		{"GET", "/api/v1/proxy/namespaces/b/pods/p/some/path", filters.RequestInfo{IsResourceRequest: true, Verb: "proxy", APIPrefix: "api", APIVersion: "v1", Namespace: "b", Resource: "pods", Name: "p"}},
		{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", filters.RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "apis", APIGroup: "rbac.authorization.k8s.io", APIVersion: "v1", Resource: "clusterroles"}},
		{"POST", "/apis/wasmplane.io/v1alpha1/wasmmodules", filters.RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "apis", APIGroup: "wasmplane.io", APIVersion: "v1alpha1", Resource: "wasmmodules"}},
		// non-resource requests
		{"GET", "/api", filters.RequestInfo{Verb: "get"}},
		{"GET", "/api/v1", filters.RequestInfo{Verb: "get"}},
		{"GET", "/apis", filters.RequestInfo{Verb: "get"}},
		{"GET", "/apis/apps", filters.RequestInfo{Verb: "get"}},
		{"GET", "/apis/apps/v1", filters.RequestInfo{Verb: "get", APIPrefix: "apis"}}, // as Kubernetes: the prefix was consumed
		{"GET", "/healthz", filters.RequestInfo{Verb: "get"}},
		{"POST", "/metrics", filters.RequestInfo{Verb: "post"}},
		{"GET", "/openapi/v3/apis/apps/v1", filters.RequestInfo{Verb: "get"}},
		{"GET", "/version", filters.RequestInfo{Verb: "get"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.url, nil)
			got := filters.NewRequestInfo(req)
			want := tt.want
			want.Path = req.URL.Path
			got.Parts = nil
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}

// testAuthenticator reads the user from X-Test-User and X-Test-Group headers.
type testAuthenticator struct{}

func (testAuthenticator) AuthenticateRequest(req *http.Request) (*authn.User, []string, bool, error) {
	name := req.Header.Get("X-Test-User")
	if name == "" {
		return nil, nil, false, nil
	}
	return &authn.User{Name: name, Groups: req.Header.Values("X-Test-Group")}, nil, true, nil
}

func TestWithAuthorization(t *testing.T) {
	codecs := endpoints.NewCodecs(api.MustScheme())
	// alice may list pods in namespace a and get /healthz; nothing else.
	a := authz.AuthorizerFunc(func(_ context.Context, at authz.Attributes) (authz.Decision, string, error) {
		if at.User.Name == "alice" && ((at.ResourceRequest && at.Verb == "list" && at.Resource == "pods" && at.Namespace == "a") || at.Path == "/healthz") {
			return authz.DecisionAllow, "", nil
		}
		if at.User.Name == "mallory" {
			return authz.DecisionDeny, "mallory is banned", nil
		}
		return authz.DecisionNoOpinion, "", nil
	})
	var seen *filters.RequestInfo
	inner := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen, _ = filters.RequestInfoFrom(req.Context())
		w.WriteHeader(http.StatusOK)
	})
	h := filters.WithAuthentication(filters.WithRequestInfo(filters.WithAuthorization(inner, a, codecs.WriteError)), testAuthenticator{}, codecs.WriteError)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	tests := []struct {
		name, user, method, path string
		code                     int
		message                  string
		details                  *metav1.StatusDetails
	}{
		{"allowed", "alice", "GET", "/api/v1/namespaces/a/pods", 200, "", nil},
		{"allowed non-resource", "alice", "GET", "/healthz", 200, "", nil},
		{"list elsewhere", "alice", "GET", "/api/v1/namespaces/b/pods", 403,
			`pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "b"`,
			&metav1.StatusDetails{Kind: "pods"}},
		{"named object with group", "alice", "DELETE", "/apis/apps/v1/namespaces/b/deployments/web", 403,
			`deployments.apps "web" is forbidden: User "alice" cannot delete resource "deployments" in API group "apps" in the namespace "b"`,
			&metav1.StatusDetails{Name: "web", Group: "apps", Kind: "deployments"}},
		{"subresource", "alice", "GET", "/api/v1/namespaces/a/pods/p/log", 403,
			`pods "p" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "a"`,
			&metav1.StatusDetails{Name: "p", Kind: "pods"}},
		{"cluster scope", "alice", "GET", "/api/v1/nodes", 403,
			`nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope`,
			&metav1.StatusDetails{Kind: "nodes"}},
		{"non-resource", "alice", "GET", "/metrics", 403, `forbidden: User "alice" cannot get path "/metrics"`, &metav1.StatusDetails{}},
		{"deny with reason", "mallory", "GET", "/api/v1/namespaces/a/pods", 403,
			`pods is forbidden: User "mallory" cannot list resource "pods" in API group "" in the namespace "a": mallory is banned`,
			&metav1.StatusDetails{Kind: "pods"}},
		{"unauthenticated", "", "GET", "/api/v1/namespaces/a/pods", 401, "Unauthorized", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if tt.user != "" {
				req.Header.Set("X-Test-User", tt.user)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("code %d, want %d", resp.StatusCode, tt.code)
			}
			if tt.code == 200 {
				if seen == nil || seen.Path != tt.path {
					t.Errorf("request info not passed on: %+v", seen)
				}
				return
			}
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || int(st.Code) != tt.code || st.Message != tt.message {
				t.Errorf("status %+v\nwant message %q", st, tt.message)
			}
			if tt.code == 403 {
				if st.Reason != metav1.StatusReasonForbidden {
					t.Errorf("reason %q", st.Reason)
				}
				if st.Details == nil || !reflect.DeepEqual(*st.Details, *tt.details) {
					t.Errorf("details %+v, want %+v", st.Details, tt.details)
				}
			}
		})
	}
}

func TestWithAuthorizationError(t *testing.T) {
	codecs := endpoints.NewCodecs(api.MustScheme())
	broken := authz.AuthorizerFunc(func(context.Context, authz.Attributes) (authz.Decision, string, error) {
		return authz.DecisionNoOpinion, "", context.DeadlineExceeded
	})
	h := filters.WithAuthorization(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served") }), broken, codecs.WriteError)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/v1/pods", nil)
	h.ServeHTTP(rec, req.WithContext(authn.WithUser(req.Context(), &authn.User{Name: "x"})))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("code %d, want 500", rec.Code)
	}
}
