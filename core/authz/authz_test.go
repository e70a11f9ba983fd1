package authz_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/controller/clusterroleaggregation"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func sl(s ...string) []string { return s }

func subj(kind, name string) rbacv1.Subject {
	s := rbacv1.Subject{Kind: kind, Name: name}
	if kind != rbacv1.ServiceAccountKind {
		s.APIGroup = rbacv1.GroupName
	}
	return s
}

func roleBinding(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}, Subjects: subjects}
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// aggregate fills the aggregated bootstrap roles with the aggregation controller's own
// function, repeating until nothing changes (edit feeds admin).
func aggregate(t testing.TB, roles []*rbacv1.ClusterRole) {
	t.Helper()
	for changed, pass := true, 0; changed; pass++ {
		if pass > 5 {
			t.Fatal("aggregation does not converge")
		}
		changed = false
		for _, r := range roles {
			if r.AggregationRule == nil {
				continue
			}
			rules, err := clusterroleaggregation.AggregatedRules(r, roles)
			if err != nil {
				t.Fatal(err)
			}
			if len(rules) != len(r.Rules) {
				r.Rules, changed = rules, true
			}
		}
	}
}

type fixture struct {
	rbac  *authz.RBAC
	node  *authz.NodeAuthorizer
	union authz.Authorizer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	roles, rbs, crs, crbs := newIndexer(), newIndexer(), newIndexer(), newIndexer()
	var clusterRoles []*rbacv1.ClusterRole
	for _, r := range authz.ClusterRoles() {
		clusterRoles = append(clusterRoles, r.DeepCopy())
	}
	clusterRoles = append(clusterRoles,
		// An extension's role that joins view (and so edit and admin) by label.
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{authz.AggregateToView: "true"}},
			Rules: []rbacv1.PolicyRule{rule(sl("get", "list", "watch"), sl("example.com"), sl("widgets"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			Rules: []rbacv1.PolicyRule{{Verbs: sl("get"), NonResourceURLs: sl("/metrics", "/logs/*")}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "status-updater"},
			Rules: []rbacv1.PolicyRule{rule(sl("update"), sl(""), sl("*/status"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pods-star"},
			Rules: []rbacv1.PolicyRule{rule(sl("get"), sl(""), sl("pods/*"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "role-escalator"},
			Rules: []rbacv1.PolicyRule{rule(sl("escalate", "create"), sl(rbacv1.GroupName), sl("roles"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin-binder"},
			Rules: []rbacv1.PolicyRule{rule(sl("bind"), sl(rbacv1.GroupName), sl("clusterroles"), "cluster-admin")}},
	)
	aggregate(t, clusterRoles)
	for _, r := range clusterRoles {
		must(t, crs.Add(r))
	}
	for _, b := range authz.ClusterRoleBindings() {
		must(t, crbs.Add(b.DeepCopy()))
	}
	crb := func(name, role string, s ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: s}
	}
	must(t, crbs.Add(crb("erin-metrics", "metrics-reader", subj(rbacv1.UserKind, "erin"))))
	must(t, crbs.Add(crb("frank-status", "status-updater", subj(rbacv1.UserKind, "frank"))))
	must(t, crbs.Add(crb("ivan-pods-star", "pods-star", subj(rbacv1.UserKind, "ivan"))))
	must(t, crbs.Add(crb("ghost", "does-not-exist", subj(rbacv1.UserKind, "ghost"))))
	must(t, crbs.Add(crb("ops-admin", "cluster-admin", subj(rbacv1.GroupKind, "ops"))))
	for _, b := range []*rbacv1.RoleBinding{
		roleBinding("a", "alice-admin", "ClusterRole", "admin", subj(rbacv1.UserKind, "alice")),
		roleBinding("a", "devs-edit", "ClusterRole", "edit", subj(rbacv1.GroupKind, "devs")),
		// No namespace on the ServiceAccount subject: the binding's namespace.
		roleBinding("a", "ci-view", "ClusterRole", "view", subj(rbacv1.ServiceAccountKind, "ci")),
		roleBinding("b", "dave-pods", "Role", "pod-reader", subj(rbacv1.UserKind, "dave")),
		roleBinding("b", "dave-cm", "Role", "cm-one", subj(rbacv1.UserKind, "dave")),
		roleBinding("a", "gina-escalate", "ClusterRole", "role-escalator", subj(rbacv1.UserKind, "gina")),
		roleBinding("a", "gina-view", "ClusterRole", "view", subj(rbacv1.UserKind, "gina")),
		roleBinding("a", "hank-bind", "ClusterRole", "admin-binder", subj(rbacv1.UserKind, "hank")),
		roleBinding("a", "hank-admin", "ClusterRole", "admin", subj(rbacv1.UserKind, "hank")),
	} {
		must(t, rbs.Add(b))
	}
	must(t, roles.Add(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{rule(sl("get", "list"), sl(""), sl("pods"))}}))
	must(t, roles.Add(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "cm-one"},
		Rules: []rbacv1.PolicyRule{rule(sl("get"), sl(""), sl("configmaps"), "one")}}))
	r := authz.NewRBAC(rbaclisters.NewRoleLister(roles), rbaclisters.NewRoleBindingLister(rbs),
		rbaclisters.NewClusterRoleLister(crs), rbaclisters.NewClusterRoleBindingLister(crbs))
	node := newNodeAuthorizer(t)
	return &fixture{rbac: r, node: node, union: authz.Union(authz.PrivilegedGroups(authn.GroupMasters), node, r)}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func pod(ns, name, node string, spec corev1.PodSpec) *corev1.Pod {
	spec.NodeName = node
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// newNodeAuthorizer runs a real pod informer over a fake clientset holding p1 (on n1)
// and p2 (on n2).
func newNodeAuthorizer(t testing.TB) *authz.NodeAuthorizer {
	t.Helper()
	p1 := pod("a", "p1", "n1", corev1.PodSpec{
		ServiceAccountName: "runner",
		Volumes: []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1"}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim1"}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c2"}}}}}}},
		},
		Containers: []corev1.Container{{Name: "c", Image: "x",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c1"}}}},
			Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "s3"}, Key: "k"}}}}}},
	})
	p2 := pod("a", "p2", "n2", corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s2"}}}},
		Containers: []corev1.Container{{Name: "c", Image: "x"}}})
	client := fake.NewClientset(p1, p2)
	// The server trims the authorizer's pods (authz.TrimPod): every case below must hold
	// on what is left.
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(authz.TrimPod))
	n, err := authz.NewNodeAuthorizer(f.Core().V1().Pods().Informer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
	})
	f.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	return n
}

func user(name string, groups ...string) *authn.User {
	return &authn.User{Name: name, Groups: append(groups, authn.GroupAuthenticated)}
}

func res(u *authn.User, verb, group, resource, sub, ns, name string) authz.Attributes {
	return authz.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1",
		Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func nonRes(u *authn.User, verb, path string) authz.Attributes {
	return authz.Attributes{User: u, Verb: verb, Path: path}
}

func TestAuthorize(t *testing.T) {
	f := newFixture(t)
	root := user("root", authn.GroupMasters)
	alice, bob, dave, erin, frank, ivan := user("alice"), user("bob", "devs"), user("dave"), user("erin"), user("frank"), user("ivan")
	ops := user("olga", "ops")
	ci := user(authz.ServiceAccountUsername("a", "ci"), authn.GroupServiceAccounts)
	ciOther := user(authz.ServiceAccountUsername("b", "ci"), authn.GroupServiceAccounts)
	n1 := user(authn.NodeUserPrefix+"n1", authn.GroupNodes)
	anon := &authn.User{Name: authn.Anonymous, Groups: []string{authn.GroupUnauthenticated}}
	tests := []struct {
		name  string
		attrs authz.Attributes
		want  bool
	}{
		{"masters anything", res(root, "delete", "", "nodes", "", "", "x"), true},
		{"masters non-resource", nonRes(root, "post", "/anything"), true},
		{"cluster-admin via group", res(ops, "create", "wasmplane.io", "clusterwasmplugins", "", "", ""), true},
		{"cluster-admin non-resource", nonRes(ops, "get", "/metrics"), true},
		// admin / edit / view through RoleBindings to aggregated ClusterRoles
		{"admin creates pods", res(alice, "create", "", "pods", "", "a", ""), true},
		{"admin reads secrets", res(alice, "get", "", "secrets", "", "a", "x"), true},
		// Kubernetes' admin and edit roles do not grant pods/ephemeralcontainers either.
		{"admin no ephemeral containers", res(alice, "patch", "", "pods", "ephemeralcontainers", "a", "p"), false},
		{"admin writes rolebindings", res(alice, "create", rbacv1.GroupName, "rolebindings", "", "a", ""), true},
		{"admin creates wasmplugins", res(alice, "create", "wasmplane.io", "wasmplugins", "", "a", ""), true},
		{"admin no clusterwasmplugins", res(alice, "create", "wasmplane.io", "clusterwasmplugins", "", "", ""), false},
		{"admin no wasmmodules", res(alice, "create", "wasmplane.io", "wasmmodules", "", "", ""), false},
		{"admin only in its namespace", res(alice, "list", "", "pods", "", "b", ""), false},
		{"admin not cluster-wide", res(alice, "list", "", "pods", "", "", ""), false},
		{"admin cannot touch nodes", res(alice, "get", "", "nodes", "", "", "n1"), false},
		{"edit via group", res(bob, "update", "apps", "deployments", "", "a", "web"), true},
		{"edit scale subresource", res(bob, "patch", "apps", "deployments", "scale", "a", "web"), true},
		{"edit no roles", res(bob, "create", rbacv1.GroupName, "roles", "", "a", ""), false},
		{"edit group elsewhere", res(bob, "get", "", "pods", "", "b", "x"), false},
		{"view via ServiceAccount", res(ci, "list", "", "pods", "", "a", ""), true},
		{"view pods/log", res(ci, "get", "", "pods", "log", "a", "p"), true},
		{"view no secrets", res(ci, "get", "", "secrets", "", "a", "x"), false},
		{"view no writes", res(ci, "create", "", "pods", "", "a", ""), false},
		{"view wasmplugins", res(ci, "get", "wasmplane.io", "wasmplugins", "", "a", "p"), true},
		{"view no wasmplugin writes", res(ci, "delete", "wasmplane.io", "wasmplugins", "", "a", "p"), false},
		{"same SA name other namespace", res(ciOther, "list", "", "pods", "", "a", ""), false},
		{"aggregated extension in view", res(ci, "get", "example.com", "widgets", "", "a", "w"), true},
		{"aggregated extension in admin", res(alice, "watch", "example.com", "widgets", "", "a", ""), true},
		{"aggregated extension read-only", res(alice, "delete", "example.com", "widgets", "", "a", "w"), false},
		// Role + RoleBinding, resourceNames
		{"role grants get", res(dave, "get", "", "pods", "", "b", "x"), true},
		{"role verb missing", res(dave, "delete", "", "pods", "", "b", "x"), false},
		{"role subresource not granted", res(dave, "get", "", "pods", "log", "b", "x"), false},
		{"resourceName match", res(dave, "get", "", "configmaps", "", "b", "one"), true},
		{"resourceName mismatch", res(dave, "get", "", "configmaps", "", "b", "two"), false},
		{"resourceName list refused", res(dave, "list", "", "configmaps", "", "b", ""), false},
		// wildcards
		{"*/status", res(frank, "update", "", "pods", "status", "x", "p"), true},
		{"*/status not main resource", res(frank, "update", "", "pods", "", "x", "p"), false},
		{"*/status other group", res(frank, "update", "apps", "deployments", "status", "x", "d"), false},
		{"pods/* is not a wildcard", res(ivan, "get", "", "pods", "log", "x", "p"), false},
		// nonResourceURLs
		{"nonResource exact", nonRes(erin, "get", "/metrics"), true},
		{"nonResource prefix", nonRes(erin, "get", "/logs/kubelet.log"), true},
		{"nonResource verb", nonRes(erin, "post", "/metrics"), false},
		{"nonResource other", nonRes(erin, "get", "/debug/pprof"), false},
		{"discovery for authenticated", nonRes(dave, "get", "/apis/apps/v1"), true},
		{"healthz for anonymous", nonRes(anon, "get", "/healthz"), true},
		{"no discovery for anonymous", nonRes(anon, "get", "/api"), false},
		{"basic-user self review", res(dave, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""), true},
		{"anonymous nothing", res(anon, "list", "", "pods", "", "a", ""), false},
		// the node authorizer
		{"node own Node", res(n1, "get", "", "nodes", "", "", "n1"), true},
		{"node other Node", res(n1, "get", "", "nodes", "", "", "n2"), false},
		{"node list all nodes", res(n1, "list", "", "nodes", "", "", ""), false},
		{"node own status", res(n1, "patch", "", "nodes", "status", "", "n1"), true},
		{"node other status", res(n1, "patch", "", "nodes", "status", "", "n2"), false},
		{"node registers", res(n1, "create", "", "nodes", "", "", ""), true},
		{"node deletes Node", res(n1, "delete", "", "nodes", "", "", "n1"), false},
		{"node own lease", res(n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), true},
		{"node other lease", res(n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), false},
		{"node lease elsewhere", res(n1, "get", "coordination.k8s.io", "leases", "", "default", "n1"), false},
		{"node lists pods", res(n1, "watch", "", "pods", "", "", ""), true},
		{"node gets bound pod", res(n1, "get", "", "pods", "", "a", "p1"), true},
		{"node gets other pod", res(n1, "get", "", "pods", "", "a", "p2"), false},
		{"node status of bound pod", res(n1, "patch", "", "pods", "status", "a", "p1"), true},
		{"node status of other pod", res(n1, "update", "", "pods", "status", "a", "p2"), false},
		// A kubelet runs ephemeral containers; only users add them, as in Kubernetes.
		{"node ephemeral containers of bound pod", res(n1, "patch", "", "pods", "ephemeralcontainers", "a", "p1"), false},
		{"node deletes bound pod", res(n1, "delete", "", "pods", "", "a", "p1"), true},
		{"node deletes other pod", res(n1, "delete", "", "pods", "", "a", "p2"), false},
		{"node creates pods", res(n1, "create", "", "pods", "", "a", ""), false},
		{"node secret volume", res(n1, "get", "", "secrets", "", "a", "s1"), true},
		{"node secret env", res(n1, "watch", "", "secrets", "", "a", "s3"), true},
		{"node secret of other node's pod", res(n1, "get", "", "secrets", "", "a", "s2"), false},
		{"node secret unreferenced", res(n1, "get", "", "secrets", "", "a", "zzz"), false},
		{"node secret wrong namespace", res(n1, "get", "", "secrets", "", "b", "s1"), false},
		{"node lists all secrets", res(n1, "list", "", "secrets", "", "a", ""), false},
		{"node configmap envFrom", res(n1, "get", "", "configmaps", "", "a", "c1"), true},
		{"node configmap projected", res(n1, "get", "", "configmaps", "", "a", "c2"), true},
		{"node pvc", res(n1, "get", "", "persistentvolumeclaims", "", "a", "claim1"), true},
		{"node pvc unreferenced", res(n1, "get", "", "persistentvolumeclaims", "", "a", "claim2"), false},
		{"node serviceaccount", res(n1, "get", "", "serviceaccounts", "", "a", "runner"), true},
		{"node token for its SA", res(n1, "create", "", "serviceaccounts", "token", "a", "runner"), true},
		{"node token for default SA of p2", res(n1, "create", "", "serviceaccounts", "token", "a", "default"), false},
		{"node events", res(n1, "create", "", "events", "", "a", ""), true},
		{"node no deployments", res(n1, "list", "apps", "deployments", "", "", ""), false},
		{"node still gets RBAC discovery", nonRes(n1, "get", "/api"), true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, reason, err := f.union.Authorize(ctx, tt.attrs)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got := d == authz.DecisionAllow; got != tt.want {
				t.Errorf("decision %v (reason %q), want allowed=%v", d, reason, tt.want)
			}
		})
	}
}

func TestRBACReasons(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d, reason, _ := f.rbac.Authorize(ctx, res(user("alice"), "get", "", "pods", "", "a", "p"))
	if d != authz.DecisionAllow || reason != `RBAC: allowed by RoleBinding "alice-admin/a" of ClusterRole "admin" to User "alice"` {
		t.Errorf("allow: %v %q", d, reason)
	}
	d, reason, _ = f.rbac.Authorize(ctx, res(user("ghost"), "get", "", "pods", "", "a", "p"))
	if d != authz.DecisionNoOpinion || !strings.Contains(reason, `clusterrole.rbac.authorization.k8s.io "does-not-exist" not found`) {
		t.Errorf("missing role: %v %q", d, reason)
	}
	if d, _, _ := f.union.Authorize(ctx, res(user("nobody"), "get", "", "pods", "", "a", "p")); d != authz.DecisionNoOpinion {
		t.Errorf("union without opinion: %v", d)
	}
	// A Deny stops the union even when a later authorizer would allow.
	deny := authz.AuthorizerFunc(func(context.Context, authz.Attributes) (authz.Decision, string, error) {
		return authz.DecisionDeny, "no", nil
	})
	if d, reason, _ := authz.Union(deny, f.rbac).Authorize(ctx, res(user("alice"), "get", "", "pods", "", "a", "p")); d != authz.DecisionDeny || reason != "no" {
		t.Errorf("deny first: %v %q", d, reason)
	}
}

func TestRulesFor(t *testing.T) {
	f := newFixture(t)
	rules, err := f.rbac.RulesFor(context.Background(), user("dave"), "b")
	if err != nil {
		t.Fatal(err)
	}
	var hasPods, hasCM, hasDiscovery bool
	for _, r := range rules {
		hasPods = hasPods || (len(r.Resources) == 1 && r.Resources[0] == "pods")
		hasCM = hasCM || (len(r.ResourceNames) == 1 && r.ResourceNames[0] == "one")
		hasDiscovery = hasDiscovery || len(r.NonResourceURLs) > 0
	}
	if !hasPods || !hasCM || !hasDiscovery {
		t.Errorf("rules of dave in b: %v", rules)
	}
	if _, err := f.rbac.RulesFor(context.Background(), user("ghost"), ""); err == nil {
		t.Error("a binding to a missing role should make the rules incomplete")
	}
}

func TestEscalation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice, gina, hank, root := user("alice"), user("gina"), user("hank"), user("root", authn.GroupMasters)
	clusterAdmin := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}
	view := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	podsRW := []rbacv1.PolicyRule{rule(sl("get", "create", "delete"), sl(""), sl("pods"))}
	nodesCreate := []rbacv1.PolicyRule{rule(sl("create"), sl(""), sl("nodes"))}
	tests := []struct {
		name    string
		check   func() error
		wantErr string
	}{
		{"admin creates a role it holds", func() error { return authz.CheckRoleWrite(ctx, f.union, f.rbac, alice, "a", "r", podsRW) }, ""},
		{"admin cannot grant verbs it lacks", func() error {
			return authz.CheckRoleWrite(ctx, f.union, f.rbac, alice, "a", "r", nodesCreate)
		}, `user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n" + `{APIGroups:[""], Resources:["nodes"], Verbs:["create"]}`},
		{"admin cannot grant in another namespace", func() error { return authz.CheckRoleWrite(ctx, f.union, f.rbac, alice, "b", "r", podsRW) }, "not currently held"},
		{"view holder cannot grant create", func() error { return authz.CheckRoleWrite(ctx, f.union, f.rbac, user("carol"), "a", "r", podsRW) }, "not currently held"},
		{"escalate allows any rules", func() error {
			return authz.CheckRoleWrite(ctx, f.union, f.rbac, gina, "a", "r", []rbacv1.PolicyRule{rule(sl("*"), sl("*"), sl("*"))})
		}, ""},
		{"escalate is per namespace", func() error { return authz.CheckRoleWrite(ctx, f.union, f.rbac, gina, "b", "r", podsRW) }, "not currently held"},
		{"escalate on roles is not on clusterroles", func() error { return authz.CheckRoleWrite(ctx, f.union, f.rbac, gina, "", "r", podsRW) }, "not currently held"},
		{"masters bypass", func() error { return authz.CheckRoleWrite(ctx, f.union, f.rbac, root, "", "r", nodesCreate) }, ""},
		{"admin binds view", func() error { return authz.CheckBindingWrite(ctx, f.union, f.rbac, alice, "a", view) }, ""},
		{"admin cannot bind cluster-admin", func() error { return authz.CheckBindingWrite(ctx, f.union, f.rbac, alice, "a", clusterAdmin) }, "not currently held"},
		{"bind allows cluster-admin", func() error { return authz.CheckBindingWrite(ctx, f.union, f.rbac, hank, "a", clusterAdmin) }, ""},
		{"bind is per namespace", func() error { return authz.CheckBindingWrite(ctx, f.union, f.rbac, hank, "", clusterAdmin) }, "not currently held"},
		{"bind names one role", func() error {
			return authz.CheckBindingWrite(ctx, f.union, f.rbac, hank, "a", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"})
		}, "not currently held"},
		{"missing role", func() error {
			return authz.CheckBindingWrite(ctx, f.union, f.rbac, alice, "a", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nope"})
		}, "not found"},
		{"masters bind anything", func() error { return authz.CheckBindingWrite(ctx, f.union, f.rbac, root, "", clusterAdmin) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestEnsureBootstrapPolicy(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	must(t, authz.EnsureBootstrapPolicy(ctx, client))
	roles, err := client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(roles.Items) != len(authz.ClusterRoles()) {
		t.Fatalf("%d roles, want %d", len(roles.Items), len(authz.ClusterRoles()))
	}
	for _, r := range roles.Items {
		if r.Labels[authz.BootstrappingLabel] != authz.BootstrappingValue || r.Annotations[rbacv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("%s: labels %v annotations %v", r.Name, r.Labels, r.Annotations)
		}
	}
	// Damage: a role loses a rule, a binding a subject, a third opts out of auto-update.
	basic, _ := client.RbacV1().ClusterRoles().Get(ctx, "system:basic-user", metav1.GetOptions{})
	basic.Rules = basic.Rules[:1]
	_, err = client.RbacV1().ClusterRoles().Update(ctx, basic, metav1.UpdateOptions{})
	must(t, err)
	viewer, _ := client.RbacV1().ClusterRoleBindings().Get(ctx, "system:public-info-viewer", metav1.GetOptions{})
	viewer.Subjects = viewer.Subjects[:1]
	_, err = client.RbacV1().ClusterRoleBindings().Update(ctx, viewer, metav1.UpdateOptions{})
	must(t, err)
	disc, _ := client.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{})
	disc.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
	disc.Rules = nil
	_, err = client.RbacV1().ClusterRoles().Update(ctx, disc, metav1.UpdateOptions{})
	must(t, err)
	// An admin-created rule on an auto-updated role survives reconciliation.
	extra, _ := client.RbacV1().ClusterRoles().Get(ctx, "system:node-proxier", metav1.GetOptions{})
	extra.Rules = append(extra.Rules, rule(sl("get"), sl("example.com"), sl("things")))
	_, err = client.RbacV1().ClusterRoles().Update(ctx, extra, metav1.UpdateOptions{})
	must(t, err)

	must(t, authz.EnsureBootstrapPolicy(ctx, client))
	basic, _ = client.RbacV1().ClusterRoles().Get(ctx, "system:basic-user", metav1.GetOptions{})
	if !authz.RulesAllow(res(user("x"), "create", "authentication.k8s.io", "selfsubjectreviews", "", "", ""), basic.Rules...) {
		t.Errorf("system:basic-user not reconciled: %v", basic.Rules)
	}
	viewer, _ = client.RbacV1().ClusterRoleBindings().Get(ctx, "system:public-info-viewer", metav1.GetOptions{})
	if len(viewer.Subjects) != 2 {
		t.Errorf("system:public-info-viewer subjects not reconciled: %v", viewer.Subjects)
	}
	disc, _ = client.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{})
	if len(disc.Rules) != 0 {
		t.Errorf("a role without auto-update was changed: %v", disc.Rules)
	}
	extra, _ = client.RbacV1().ClusterRoles().Get(ctx, "system:node-proxier", metav1.GetOptions{})
	if !authz.RulesAllow(res(user("x"), "get", "example.com", "things", "", "", ""), extra.Rules...) {
		t.Error("reconciliation removed an admin's rule")
	}
	// A third run changes nothing.
	before := len(client.Actions())
	must(t, authz.EnsureBootstrapPolicy(ctx, client))
	for _, a := range client.Actions()[before:] {
		if a.GetVerb() != "get" {
			t.Errorf("steady state wrote: %v", a)
		}
	}
}

// TestTrimPod: the node authorizer's copy of a pod keeps every reference it checks, from
// init and ephemeral containers too, and drops the rest.
func TestTrimPod(t *testing.T) {
	full := pod("a", "p", "n1", corev1.PodSpec{
		ServiceAccountName: "runner",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
		InitContainers: []corev1.Container{{Name: "i", Image: "init:1", Command: []string{"sh", "-c", "true"},
			Env: []corev1.EnvVar{{Name: "PLAIN", Value: "v"}, {Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-init"}, Key: "k"}}}}}},
		Containers: []corev1.Container{{Name: "c", Image: "app:1", Args: []string{"--long-flag=value"}, Env: []corev1.EnvVar{{Name: "PLAIN", Value: "v"}}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "dbg",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s-debug"}}}}}}},
	})
	full.Labels = map[string]string{"app": "web"}
	full.Annotations = map[string]string{"note": strings.Repeat("x", 512)}
	full.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}
	full.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s-projected"}}},
		}}}},
	}
	out, err := authz.TrimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out.(*authz.PodRefs)
	if !ok {
		t.Fatalf("TrimPod returned %T, want *authz.PodRefs", out)
	}
	want := &authz.PodRefs{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", ResourceVersion: full.ResourceVersion},
		NodeName:   "n1", ServiceAccount: "runner",
		Secrets:    []string{"pull", "s-debug", "s-projected"},
		ConfigMaps: []string{"cm-init", "kube-root-ca.crt"},
		Claims:     []string{"claim", "p-scratch"},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("TrimPod:\n got %+v\nwant %+v", got, want)
	}
	if c := got.DeepCopyObject().(*authz.PodRefs); !equality.Semantic.DeepEqual(c, got) || &c.Secrets[0] == &got.Secrets[0] {
		t.Error("DeepCopyObject is not a deep copy")
	}
	if full.Spec.Containers[0].Image != "app:1" || len(full.Labels) != 1 {
		t.Error("TrimPod changed its input")
	}
	if other, _ := authz.TrimPod(&corev1.Node{}); other == nil {
		t.Error("a non-pod object must pass unchanged")
	}
}
