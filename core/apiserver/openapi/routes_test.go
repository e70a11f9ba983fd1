package openapi

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestSubresourceMethods(t *testing.T) {
	for _, tc := range []struct {
		sub  Subresource
		want []string
	}{
		{Subresource{Name: "status"}, []string{"GET", "PUT", "PATCH"}},
		{Subresource{Name: "scale"}, []string{"GET", "PUT", "PATCH"}},
		{Subresource{Name: "binding"}, []string{"POST"}},
		{Subresource{Name: "log"}, []string{"GET"}},
		{Subresource{Name: "finalize", Verbs: []string{"update"}}, []string{"PUT"}},
		{Subresource{Name: "status", Verbs: []string{"PATCH", "GET"}}, []string{"GET", "PATCH"}},
		{Subresource{Name: "exec", Verbs: []string{"connect"}}, []string{"GET", "POST"}},
		{Subresource{Name: "x", Verbs: []string{"list"}}, nil},
	} {
		if got := subresourceMethods(tc.sub); !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.sub.Name, tc.sub.Verbs, got, tc.want)
		}
	}
}

func TestOperationNaming(t *testing.T) {
	for _, tc := range []struct {
		gv      schema.GroupVersion
		id, tag string
		path    string
	}{
		{schema.GroupVersion{Version: "v1"}, "CoreV1", "core_v1", "api/v1"},
		{schema.GroupVersion{Group: "apps", Version: "v1"}, "AppsV1", "apps_v1", "apis/apps/v1"},
		{schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, "CoordinationV1", "coordination_v1", "apis/coordination.k8s.io/v1"},
		{schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1beta1"}, "RbacAuthorizationV1beta1", "rbacauthorization_v1beta1", "apis/rbac.authorization.k8s.io/v1beta1"},
	} {
		if got := groupID(tc.gv); got != tc.id {
			t.Errorf("groupID(%v) = %q, want %q", tc.gv, got, tc.id)
		}
		if got := gvTag(tc.gv); got != tc.tag {
			t.Errorf("gvTag(%v) = %q, want %q", tc.gv, got, tc.tag)
		}
		if got := gvPath(tc.gv); got != tc.path {
			t.Errorf("gvPath(%v) = %q, want %q", tc.gv, got, tc.path)
		}
	}
}

// TestVerbRestriction checks that Resource.Verbs removes operations, and a route with
// none left disappears.
func TestVerbRestriction(t *testing.T) {
	routes, err := buildRoutes(testScheme(t), []Resource{{GVK: core("ConfigMap"), Plural: "configmaps", Namespaced: true, Verbs: []string{"get", "list"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range routes {
		for _, op := range r.ops {
			got = append(got, op.method+" "+r.path+" "+op.id)
			if op.watch {
				t.Errorf("%s advertises watch without the watch verb", op.id)
			}
		}
	}
	want := []string{
		"GET /api/v1/configmaps listCoreV1ConfigMapForAllNamespaces",
		"GET /api/v1/namespaces/{namespace}/configmaps listCoreV1NamespacedConfigMap",
		"GET /api/v1/namespaces/{namespace}/configmaps/{name} readCoreV1NamespacedConfigMap",
	}
	if !slices.Equal(got, want) {
		t.Errorf("operations:\n%v\nwant\n%v", got, want)
	}
}
