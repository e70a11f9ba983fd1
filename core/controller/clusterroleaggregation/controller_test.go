package clusterroleaggregation

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAggregatedRules(t *testing.T) {
	sel := func(k string) *rbacv1.AggregationRule {
		return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{k: "true"}}}}
	}
	r1 := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	r2 := rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	tests := []struct {
		name string
		role *rbacv1.ClusterRole
		all  []*rbacv1.ClusterRole
		want int
	}{
		{"no aggregation keeps rules", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Rules: []rbacv1.PolicyRule{r1}}, nil, 1},
		{"matching roles in, others out", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: sel("a")},
			[]*rbacv1.ClusterRole{
				{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"a": "true"}}, Rules: []rbacv1.PolicyRule{r1}},
				{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "true"}}, Rules: []rbacv1.PolicyRule{r1, r2}},
				{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}}}},
			}, 2},
		{"itself excluded", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg", Labels: map[string]string{"a": "true"}}, AggregationRule: sel("a"), Rules: []rbacv1.PolicyRule{r1}},
			[]*rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "agg", Labels: map[string]string{"a": "true"}}, Rules: []rbacv1.PolicyRule{r1}}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AggregatedRules(tt.role, tt.all)
			if err != nil || len(got) != tt.want {
				t.Errorf("got %v (%v), want %d rules", got, err, tt.want)
			}
		})
	}
}

// TestController runs the controller on the bootstrap policy and checks, through the RBAC
// authorizer, that admin/edit/view fill up and follow a newly labelled role.
func TestController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	if err := authz.EnsureBootstrapPolicy(ctx, client); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	rbac := authz.NewRBACFromInformers(factory)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	wg.Go(func() { c.Run(ctx, 2) })

	_, err = client.RbacV1().RoleBindings("a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alice := &authn.User{Name: "alice", Groups: []string{authn.GroupAuthenticated}}
	can := func(verb, group, resource string) bool {
		d, _, _ := rbac.Authorize(ctx, authz.Attributes{User: alice, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Namespace: "a"})
		return d == authz.DecisionAllow
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	// admin = aggregate-to-admin + edit (= aggregate-to-edit + view (= aggregate-to-view)).
	waitFor("admin to hold view, edit and admin rules", func() bool {
		return can("list", "", "pods") && can("create", "apps", "deployments") && can("create", rbacv1.GroupName, "roles")
	})
	if can("get", "example.com", "widgets") {
		t.Fatal("widgets allowed before any role grants them")
	}
	_, err = client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{authz.AggregateToView: "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("a new aggregate-to-view role to reach admin", func() bool { return can("get", "example.com", "widgets") })
	if err := client.RbacV1().ClusterRoles().Delete(ctx, "widgets-view", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a deleted role to leave admin", func() bool { return !can("get", "example.com", "widgets") })
}
