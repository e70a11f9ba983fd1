package resources_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/controller/clusterroleaggregation"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/storagetest"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// headerAuthenticator reads the user from X-Test-User and X-Test-Group headers.
type headerAuthenticator struct{}

func (headerAuthenticator) AuthenticateRequest(req *http.Request) (*authn.User, []string, bool, error) {
	name := req.Header.Get("X-Test-User")
	if name == "" {
		return nil, nil, false, nil
	}
	return &authn.User{Name: name, Groups: append(req.Header.Values("X-Test-Group"), authn.GroupAuthenticated)}, nil, true, nil
}

// policy is the bootstrap policy (aggregated with the controller's function) plus:
// alice admin in a, dave a Role reading pods in b, gina escalate on roles in a, hank bind
// on cluster-admin in a, and ghost bound to a missing role.
func policy(t *testing.T) (authz.Authorizer, *authz.RBAC) {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	roles, rbs, crs, crbs := idx(), idx(), idx(), idx()
	var all []*rbacv1.ClusterRole
	for _, r := range authz.ClusterRoles() {
		all = append(all, r.DeepCopy())
	}
	all = append(all,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "role-escalator"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"escalate", "create", "update", "get"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin-binder"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"cluster-admin"}}}})
	for range 3 { // view feeds edit feeds admin
		for _, r := range all {
			if r.AggregationRule != nil {
				rules, err := clusterroleaggregation.AggregatedRules(r, all)
				if err != nil {
					t.Fatal(err)
				}
				r.Rules = rules
			}
		}
	}
	for _, r := range all {
		_ = crs.Add(r)
	}
	for _, b := range authz.ClusterRoleBindings() {
		_ = crbs.Add(b.DeepCopy())
	}
	_ = crbs.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ghost"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "missing"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "ghost"}}})
	rb := func(ns, name, kind, role, user string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}, Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	}
	for _, b := range []*rbacv1.RoleBinding{
		rb("a", "alice", "ClusterRole", "admin", "alice"), rb("b", "dave", "Role", "pod-reader", "dave"),
		rb("a", "gina", "ClusterRole", "role-escalator", "gina"), rb("a", "hank", "ClusterRole", "admin-binder", "hank"),
		rb("a", "hank-admin", "ClusterRole", "admin", "hank"),
	} {
		_ = rbs.Add(b)
	}
	_ = roles.Add(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}})
	r := authz.NewRBAC(rbaclisters.NewRoleLister(roles), rbaclisters.NewRoleBindingLister(rbs),
		rbaclisters.NewClusterRoleLister(crs), rbaclisters.NewClusterRoleBindingLister(crbs))
	return authz.Union(authz.PrivilegedGroups(authn.GroupMasters), r), r
}

// serve builds the handler chain the API server uses (authentication, request info,
// authorization) in front of the routes of defs; newStorage nil = no storage.
func serve(t *testing.T, a authz.Authorizer, defs []resources.Definition, newStorage func(res *registry.Resource, prefix string) storage.Interface) (*httptest.Server, map[schema.GroupVersion][]*endpoints.APIResource) {
	t.Helper()
	codecs := endpoints.NewCodecs(api.MustScheme())
	byGV := map[schema.GroupVersion][]*endpoints.APIResource{}
	var all []*endpoints.APIResource
	for _, d := range defs {
		prefix := "/registry/" + d.Resource.GroupVersion.Group + "/" + d.Resource.Name
		var st storage.Interface
		if newStorage != nil {
			st = newStorage(d.Resource, prefix)
		}
		scope := &endpoints.Scope{Store: registry.NewStore(d.Resource, st, prefix), Codecs: codecs}
		ar := &endpoints.APIResource{Scope: scope}
		if d.CreateHandler != nil {
			ar.CreateHandler = d.CreateHandler(scope)
		}
		byGV[d.Resource.GroupVersion] = append(byGV[d.Resource.GroupVersion], ar)
		all = append(all, ar)
	}
	h := filters.WithAuthorization(endpoints.NewRoutes(codecs, all), a, codecs.WriteError)
	h = filters.WithRequestInfo(h)
	h = filters.WithAuthentication(h, headerAuthenticator{}, codecs.WriteError)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, byGV
}

// call sends body (JSON-encoded unless nil) as user in groups, and decodes the answer
// into out when it is non-nil; it returns the status code and raw body.
func call(t *testing.T, srv *httptest.Server, user string, groups []string, method, path string, body, out any, header ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-User", user)
	for _, g := range groups {
		req.Header.Add("X-Test-Group", g)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("decoding %s: %v", data, err)
		}
	}
	return resp.StatusCode, string(data)
}

func TestAccessReviews(t *testing.T) {
	a, r := policy(t)
	srv, byGV := serve(t, a, resources.Authorization(a, r), nil)
	const base = "/apis/authorization.k8s.io/v1"
	ra := func(verb, group, resource, ns string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns}
	}
	masters := []string{authn.GroupMasters}
	tests := []struct {
		name, user  string
		groups      []string
		path        string
		body        any
		code        int
		allowed     bool
		errContains string
	}{
		{"self allowed", "alice", nil, base + "/selfsubjectaccessreviews",
			authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra("list", "", "pods", "a")}}, 201, true, ""},
		{"self denied", "alice", nil, base + "/selfsubjectaccessreviews",
			authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra("create", "", "nodes", "")}}, 201, false, ""},
		{"self non-resource", "dave", nil, base + "/selfsubjectaccessreviews",
			authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/api"}}}, 201, true, ""},
		{"self needs attributes", "alice", nil, base + "/selfsubjectaccessreviews",
			authorizationv1.SelfSubjectAccessReview{}, 422, false, "spec.resourceAttributes"},
		{"self not both", "alice", nil, base + "/selfsubjectaccessreviews",
			authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra("get", "", "pods", "a"),
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/"}}}, 422, false, "spec.nonResourceAttributes"},
		{"subject review by admin", "root", masters, base + "/subjectaccessreviews",
			authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: ra("get", "", "pods", "b")}}, 201, true, ""},
		{"subject review of a group", "root", masters, base + "/subjectaccessreviews",
			authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "zed", Groups: []string{authn.GroupMasters}, ResourceAttributes: ra("delete", "", "nodes", "")}}, 201, true, ""},
		{"subject review denied", "root", masters, base + "/subjectaccessreviews",
			authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: ra("delete", "", "pods", "b")}}, 201, false, ""},
		{"subject review needs a subject", "root", masters, base + "/subjectaccessreviews",
			authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: ra("get", "", "pods", "b")}}, 422, false, "spec.user"},
		{"subject review is privileged", "alice", nil, base + "/subjectaccessreviews",
			authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: ra("get", "", "pods", "b")}}, 403, false,
			`User \"alice\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope`},
		{"local review by namespace admin", "alice", nil, base + "/namespaces/a/localsubjectaccessreviews",
			authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: ra("get", "", "pods", "a")}}, 201, false, ""},
		{"local review namespace mismatch", "alice", nil, base + "/namespaces/a/localsubjectaccessreviews",
			authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: ra("get", "", "pods", "b")}}, 400, false, "must match namespace"},
		{"local review elsewhere forbidden", "alice", nil, base + "/namespaces/b/localsubjectaccessreviews",
			authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: ra("get", "", "pods", "b")}}, 403, false, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out struct {
				Status authorizationv1.SubjectAccessReviewStatus `json:"status"`
			}
			code, body := call(t, srv, tt.user, tt.groups, http.MethodPost, tt.path, tt.body, &out)
			if code != tt.code {
				t.Fatalf("code %d, want %d: %s", code, tt.code, body)
			}
			if code == 201 && out.Status.Allowed != tt.allowed {
				t.Errorf("allowed %v, want %v: %s", out.Status.Allowed, tt.allowed, body)
			}
			if tt.errContains != "" && !strings.Contains(body, tt.errContains) {
				t.Errorf("body %s does not contain %q", body, tt.errContains)
			}
		})
	}

	t.Run("rules review", func(t *testing.T) {
		var ssrr authorizationv1.SelfSubjectRulesReview
		code, body := call(t, srv, "dave", nil, http.MethodPost, base+"/selfsubjectrulesreviews",
			authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "b"}}, &ssrr)
		if code != 201 || ssrr.Status.Incomplete {
			t.Fatalf("code %d: %s", code, body)
		}
		var pods, ssar, discovery bool
		for _, r := range ssrr.Status.ResourceRules {
			pods = pods || (slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "list"))
			ssar = ssar || slices.Contains(r.Resources, "selfsubjectaccessreviews")
		}
		for _, r := range ssrr.Status.NonResourceRules {
			discovery = discovery || slices.Contains(r.NonResourceURLs, "/api")
		}
		if !pods || !ssar || !discovery {
			t.Errorf("rules of dave in b: %s", body)
		}
		code, body = call(t, srv, "ghost", nil, http.MethodPost, base+"/selfsubjectrulesreviews",
			authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "b"}}, &ssrr)
		if code != 201 || !ssrr.Status.Incomplete || !strings.Contains(ssrr.Status.EvaluationError, "not found") {
			t.Errorf("ghost's rules should be incomplete: %d %s", code, body)
		}
	})

	t.Run("create only", func(t *testing.T) {
		for _, res := range byGV[authorizationv1.SchemeGroupVersion] {
			if v := res.Verbs(); !slices.Equal(v, []string{"create"}) {
				t.Errorf("%s verbs %v", res.Scope.Store.Resource.Name, v)
			}
		}
		disc := endpoints.Discovery(authorizationv1.SchemeGroupVersion, byGV[authorizationv1.SchemeGroupVersion])
		if len(disc.APIResources) != 4 {
			t.Errorf("discovery: %+v", disc.APIResources)
		}
		for _, path := range []string{base + "/selfsubjectaccessreviews", base + "/selfsubjectaccessreviews/x", base + "/namespaces/a/localsubjectaccessreviews"} {
			if code, body := call(t, srv, "root", masters, http.MethodGet, path, nil, nil); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
				t.Errorf("GET %s: %d %s", path, code, body)
			}
		}
	})
}

func startEtcd(t *testing.T) func(res *registry.Resource, prefix string) storage.Interface {
	t.Helper()
	client := storagetest.Client(t)
	codec := storage.NewCodec(api.MustScheme())
	return func(res *registry.Resource, prefix string) storage.Interface {
		return storage.NewEtcd(client, storage.ResourceConfig{GroupResource: res.GroupResource(), Prefix: prefix,
			NewFunc: res.NewFunc, NewListFunc: res.NewListFunc, Codec: codec, GetAttrs: registry.StorageAttrs(res)})
	}
}

func TestRBACResources(t *testing.T) {
	a, r := policy(t)
	srv, _ := serve(t, a, resources.RBAC(a, r), startEtcd(t))
	const base = "/apis/rbac.authorization.k8s.io/v1"
	role := func(ns, name string, rules ...rbacv1.PolicyRule) rbacv1.Role {
		return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	}
	podsRule := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	nodesRule := rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"nodes"}}
	binding := func(ns, name, kind, ref string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: ref}, Subjects: subjects}
	}
	bob := rbacv1.Subject{Kind: "User", Name: "bob"}
	tests := []struct {
		name, user, method, path string
		body                     any
		code                     int
		contains                 string
	}{
		{"admin creates a role it holds", "alice", "POST", base + "/namespaces/a/roles", role("a", "readers", podsRule), 201, ""},
		{"colon names allowed", "alice", "POST", base + "/namespaces/a/roles", role("a", "team:readers", podsRule), 201, ""},
		{"escalation refused", "alice", "POST", base + "/namespaces/a/roles", role("a", "nodes", nodesRule), 403,
			`roles.rbac.authorization.k8s.io \"nodes\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"create\"]}`},
		{"escalate verb allows", "gina", "POST", base + "/namespaces/a/roles", role("a", "nodes", nodesRule), 201, ""},
		{"validation: verbs", "alice", "POST", base + "/namespaces/a/roles", role("a", "bad", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}}), 422, "rules[0].verbs"},
		{"validation: URLs in a Role", "alice", "POST", base + "/namespaces/a/roles", role("a", "bad", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}), 422, "namespaced rules cannot apply to non-resource URLs"},
		{"bind a held role", "alice", "POST", base + "/namespaces/a/rolebindings", binding("a", "bob-view", "ClusterRole", "view", bob), 201, ""},
		{"cannot bind cluster-admin", "alice", "POST", base + "/namespaces/a/rolebindings", binding("a", "bob-root", "ClusterRole", "cluster-admin", bob), 403, "is attempting to grant RBAC permissions not currently held"},
		{"bind verb allows cluster-admin", "hank", "POST", base + "/namespaces/a/rolebindings", binding("a", "bob-root", "ClusterRole", "cluster-admin", bob), 201, ""},
		{"validation: subject kind", "alice", "POST", base + "/namespaces/a/rolebindings", binding("a", "x", "ClusterRole", "view", rbacv1.Subject{Kind: "Robot", Name: "r"}), 422, "subjects[0].kind"},
		{"validation: roleRef kind", "root", "POST", base + "/clusterrolebindings",
			rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}}, 422, "roleRef.kind"},
		{"validation: SA namespace in cluster binding", "root", "POST", base + "/clusterrolebindings",
			rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}}, 422, "subjects[0].namespace"},
		{"non-admin cannot create roles at all", "dave", "POST", base + "/namespaces/b/roles", role("b", "r", podsRule), 403,
			`roles.rbac.authorization.k8s.io is forbidden: User \"dave\" cannot create resource \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"b\"`},
		{"masters create cluster roles", "root", "POST", base + "/clusterroles",
			rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:custom"}, Rules: []rbacv1.PolicyRule{nodesRule}}, 201, ""},
		{"validation: aggregation selector", "root", "POST", base + "/clusterroles",
			rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: &rbacv1.AggregationRule{}}, 422, "aggregationRule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var groups []string
			if tt.user == "root" {
				groups = []string{authn.GroupMasters}
			}
			code, body := call(t, srv, tt.user, groups, tt.method, tt.path, tt.body, nil)
			if code != tt.code {
				t.Fatalf("code %d, want %d: %s", code, tt.code, body)
			}
			if tt.contains != "" && !strings.Contains(body, tt.contains) {
				t.Errorf("body %s\ndoes not contain %s", body, tt.contains)
			}
		})
	}

	t.Run("roleRef is immutable", func(t *testing.T) {
		var b rbacv1.RoleBinding
		if code, body := call(t, srv, "alice", nil, "GET", base+"/namespaces/a/rolebindings/bob-view", nil, &b); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		b.RoleRef.Name = "edit"
		if code, body := call(t, srv, "alice", nil, "PUT", base+"/namespaces/a/rolebindings/bob-view", b, nil); code != 422 || !strings.Contains(body, "cannot change roleRef") {
			t.Errorf("%d %s", code, body)
		}
	})
	t.Run("escalation on update", func(t *testing.T) {
		var ro rbacv1.Role
		if code, body := call(t, srv, "alice", nil, "GET", base+"/namespaces/a/roles/readers", nil, &ro); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		ro.Rules = append(ro.Rules, nodesRule)
		if code, body := call(t, srv, "alice", nil, "PUT", base+"/namespaces/a/roles/readers", ro, nil); code != 403 {
			t.Errorf("%d %s", code, body)
		}
		ro.Rules = ro.Rules[:1]
		ro.Labels = map[string]string{"team": "x"}
		if code, body := call(t, srv, "alice", nil, "PUT", base+"/namespaces/a/roles/readers", ro, nil); code != 200 {
			t.Errorf("metadata-only update: %d %s", code, body)
		}
	})
	t.Run("table", func(t *testing.T) {
		var table metav1.Table
		code, body := call(t, srv, "alice", nil, "GET", base+"/namespaces/a/rolebindings", nil, &table,
			"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if got := strings.Join(cols, ","); got != "Name,Role,Age,Users,Groups,ServiceAccounts" {
			t.Errorf("columns %s", got)
		}
		found := false
		for _, row := range table.Rows {
			found = found || (fmt.Sprint(row.Cells[0]) == "bob-view" && fmt.Sprint(row.Cells[1]) == "ClusterRole/view" && fmt.Sprint(row.Cells[3]) == "bob")
		}
		if !found {
			t.Errorf("rows %s", body)
		}
	})
}

// TestReviewStorageSetUp checks that the storage the server builds for every resource (an
// etcd store behind a watch cache) comes up for the reviews, which are never stored and
// have no list kind of their own.
func TestReviewStorageSetUp(t *testing.T) {
	newStorage := startEtcd(t)
	a, r := policy(t)
	for _, d := range resources.Authorization(a, r) {
		etcd := newStorage(d.Resource, "/registry/authorization.k8s.io/"+d.Resource.Name).(*storage.Etcd)
		c := storage.NewCacher(etcd, storage.CacherConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Ready(ctx)
		cancel()
		c.Stop()
		if err != nil {
			t.Errorf("%s: watch cache not ready: %v", d.Resource.Name, err)
		}
	}
}
