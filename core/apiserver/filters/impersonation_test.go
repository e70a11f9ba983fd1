package filters_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// grants allows exactly the listed checks, each written
// "user verb group resource[/sub] namespace name", "-" for an empty field and a name of
// "*" matching any name.
func grants(rules ...string) authz.Authorizer {
	return authz.AuthorizerFunc(func(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		got := []string{a.User.Name, a.Verb, a.APIGroup, res, a.Namespace, a.Name}
		for _, r := range rules {
			f := strings.Fields(r)
			for i := range f {
				if f[i] == "-" {
					f[i] = ""
				}
			}
			if slices.Equal(f[:5], got[:5]) && (f[5] == "*" || f[5] == got[5]) {
				return authz.DecisionAllow, "", nil
			}
		}
		return authz.DecisionNoOpinion, "", nil
	})
}

func TestWithImpersonation(t *testing.T) {
	codecs := endpoints.NewCodecs(api.MustScheme())
	az := grants(
		// dana: legacy impersonation of jane, one group, a uid and one extra value.
		"dana impersonate - users - jane",
		"dana impersonate - groups - devs",
		"dana impersonate authentication.k8s.io uids - 42",
		"dana impersonate authentication.k8s.io userextras/example.com/team - blue",
		"dana impersonate - serviceaccounts ns1 builder",
		"dana impersonate - users - system:anonymous",
		"dana impersonate - groups - system:masters",
		// carl: constrained user-info impersonation of jane, only to list pods.
		"carl impersonate-on:user-info:list - pods ns1 *",
		"carl impersonate:user-info authentication.k8s.io users - jane",
		"carl impersonate:user-info authentication.k8s.io groups - system:masters",
		// nora: constrained impersonation of node n1 for get nodes.
		"nora impersonate-on:arbitrary-node:get - nodes - *",
		"nora impersonate:arbitrary-node authentication.k8s.io nodes - n1",
	)

	var seen *authn.User
	var seenHeaders http.Header
	inner := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen, _ = filters.UserFrom(req.Context())
		seenHeaders = req.Header.Clone()
		w.WriteHeader(http.StatusOK)
	})
	h := filters.WithAuthentication(filters.WithRequestInfo(filters.WithImpersonation(inner, az, codecs.WriteError)), testAuthenticator{}, codecs.WriteError)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	tests := []struct {
		name, requester, method, path string
		headers                       map[string][]string
		code                          int
		want                          *authn.User // the user the inner handler sees
		message                       string
	}{
		{name: "no impersonation", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 200,
			want: &authn.User{Name: "dana"}},
		{name: "legacy user", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 200,
			headers: map[string][]string{"Impersonate-User": {"jane"}},
			want:    &authn.User{Name: "jane", Groups: []string{"system:authenticated"}}},
		{name: "legacy user, group, uid and percent-encoded extra", requester: "dana", method: "POST", path: "/api/v1/namespaces/ns1/configmaps", code: 200,
			headers: map[string][]string{"Impersonate-User": {"jane"}, "Impersonate-Group": {"devs"}, "Impersonate-Uid": {"42"}, "Impersonate-Extra-Example.com%2fteam": {"blue"}},
			want:    &authn.User{Name: "jane", UID: "42", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"example.com/team": {"blue"}}}},
		{name: "a group not granted", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 403,
			headers: map[string][]string{"Impersonate-User": {"jane"}, "Impersonate-Group": {"devs", "ops"}},
			// user-info is tried first and is refused first: its refusal is the answer.
			message: `pods is forbidden: User "dana" cannot impersonate-on:user-info:list resource "pods" in API group "" in the namespace "ns1"`},
		{name: "a user not granted", requester: "dana", method: "GET", path: "/api/v1/nodes", code: 403,
			headers: map[string][]string{"Impersonate-User": {"bob"}},
			message: `nodes is forbidden: User "dana" cannot impersonate-on:user-info:list resource "nodes" in API group "" at the cluster scope`},
		{name: "an extra value not granted", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 403,
			headers: map[string][]string{"Impersonate-User": {"jane"}, "Impersonate-Extra-Example.com%2fteam": {"red"}}},
		{name: "a uid not granted", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 403,
			headers: map[string][]string{"Impersonate-User": {"jane"}, "Impersonate-Uid": {"43"}}},
		{name: "legacy service account gets its groups", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 200,
			headers: map[string][]string{"Impersonate-User": {"system:serviceaccount:ns1:builder"}},
			want:    &authn.User{Name: "system:serviceaccount:ns1:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"}}},
		{name: "another namespace's service account", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 403,
			headers: map[string][]string{"Impersonate-User": {"system:serviceaccount:ns2:builder"}},
			message: `pods is forbidden: User "dana" cannot impersonate-on:serviceaccount:list resource "pods" in API group "" in the namespace "ns1"`},
		{name: "anonymous is unauthenticated", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 200,
			headers: map[string][]string{"Impersonate-User": {"system:anonymous"}},
			want:    &authn.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "legacy may impersonate system:masters", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 200,
			headers: map[string][]string{"Impersonate-User": {"jane"}, "Impersonate-Group": {"system:masters"}},
			want:    &authn.User{Name: "jane", Groups: []string{"system:masters", "system:authenticated"}}},
		{name: "constrained user-info for the granted verb", requester: "carl", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 200,
			headers: map[string][]string{"Impersonate-User": {"jane"}},
			want:    &authn.User{Name: "jane", Groups: []string{"system:authenticated"}}},
		{name: "constrained user-info for another verb", requester: "carl", method: "DELETE", path: "/api/v1/namespaces/ns1/pods/p", code: 403,
			headers: map[string][]string{"Impersonate-User": {"jane"}},
			message: `pods "p" is forbidden: User "carl" cannot impersonate-on:user-info:delete resource "pods" in API group "" in the namespace "ns1"`},
		{name: "constrained never grants system:masters", requester: "carl", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 403,
			headers: map[string][]string{"Impersonate-User": {"jane"}, "Impersonate-Group": {"system:masters"}},
			message: `groups.authentication.k8s.io "system:masters" is forbidden: User "carl" cannot impersonate:user-info resource "groups" in API group "authentication.k8s.io" at the cluster scope: impersonating the system:masters group is not allowed`},
		{name: "constrained node", requester: "nora", method: "GET", path: "/api/v1/nodes/n1", code: 200,
			headers: map[string][]string{"Impersonate-User": {"system:node:n1"}},
			want:    &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}},
		{name: "constrained node, another node", requester: "nora", method: "GET", path: "/api/v1/nodes/n2", code: 403,
			headers: map[string][]string{"Impersonate-User": {"system:node:n2"}},
			message: `nodes.authentication.k8s.io "n2" is forbidden: User "nora" cannot impersonate:arbitrary-node resource "nodes" in API group "authentication.k8s.io" at the cluster scope`},
		{name: "groups without a user", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 400,
			headers: map[string][]string{"Impersonate-Group": {"devs"}},
			message: `requested &user.DefaultInfo{Name:"", UID:"", Groups:[]string{"devs"}, Extra:map[string][]string(nil)} without impersonating a user name`},
		{name: "extra without a user", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 400,
			headers: map[string][]string{"Impersonate-Extra-Scopes": {"x"}}},
		{name: "uid without a user", requester: "dana", method: "GET", path: "/api/v1/namespaces/ns1/pods", code: 400,
			headers: map[string][]string{"Impersonate-Uid": {"42"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, seenHeaders = nil, nil
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			req.Header.Set("X-Test-User", tt.requester)
			for k, vs := range tt.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("code %d, want %d", resp.StatusCode, tt.code)
			}
			if tt.code != 200 {
				var st metav1.Status
				if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
					t.Fatal(err)
				}
				if tt.message != "" && st.Message != tt.message {
					t.Fatalf("message\n got %q\nwant %q", st.Message, tt.message)
				}
				if seen != nil {
					t.Fatalf("refused request reached the handler as %v", seen)
				}
				return
			}
			if seen == nil || seen.Name != tt.want.Name || seen.UID != tt.want.UID || !slices.Equal(seen.Groups, tt.want.Groups) ||
				(len(tt.want.Extra) > 0 && !reflect.DeepEqual(seen.Extra, tt.want.Extra)) {
				t.Fatalf("handler saw %+v, want %+v", seen, tt.want)
			}
			for k := range seenHeaders {
				if strings.HasPrefix(k, "Impersonate-") {
					t.Fatalf("header %s reached the handler", k)
				}
			}
		})
	}
}

// TestImpersonationPrimaryRefusal pins the refusal when the impersonate-on check passes
// but the user check does not: the authorizer's reason is appended as Kubernetes does.
func TestImpersonationPrimaryRefusal(t *testing.T) {
	codecs := endpoints.NewCodecs(api.MustScheme())
	// Only impersonate-on is granted: user-info's users check is the first refusal.
	az := authz.AuthorizerFunc(func(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
		if a.Verb == "impersonate-on:user-info:list" {
			return authz.DecisionAllow, "", nil
		}
		return authz.DecisionNoOpinion, fmt.Sprintf("no rule for %s", a.Verb), nil
	})
	h := filters.WithAuthentication(filters.WithRequestInfo(filters.WithImpersonation(http.NotFoundHandler(), az, codecs.WriteError)), testAuthenticator{}, codecs.WriteError)
	req := httptest.NewRequest("GET", "/api/v1/namespaces/ns1/pods", nil)
	req.Header.Set("X-Test-User", "dana")
	req.Header.Set("Impersonate-User", "jane")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var st metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	want := `users.authentication.k8s.io "jane" is forbidden: User "dana" cannot impersonate:user-info resource "users" in API group "authentication.k8s.io" at the cluster scope: no rule for impersonate:user-info`
	if rec.Code != http.StatusForbidden || st.Message != want {
		t.Fatalf("%d %q, want 403 %q", rec.Code, st.Message, want)
	}
}
