// The authorization tests drive RBAC, the node authorizer and the multi-tenancy recipe of
// docs/multi-tenancy.md against a real server over TLS, with users holding real client
// certificates.

package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// user is a client of one identity.
type user struct {
	name string
	cfg  *rest.Config
	cs   kubernetes.Interface
	dyn  dynamic.Interface
}

func newUser(t *testing.T, s *testserver.Server, name string, groups ...string) *user {
	t.Helper()
	certPEM, keyPEM, err := s.IssueClientCertificate(name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: s.URL(), QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: s.CA(), CertData: certPEM, KeyData: keyPEM}}
	return &user{name: name, cfg: cfg, cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
}

var (
	wasmPlugins        = wasmv1.SchemeGroupVersion.WithResource("wasmplugins")
	clusterWasmPlugins = wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins")
)

func plugin(kind, ns, name, digest string, hooks []wasmv1.Hook, config string) *unstructured.Unstructured {
	p := &wasmv1.WasmPlugin{TypeMeta: metav1.TypeMeta{APIVersion: wasmv1.SchemeGroupVersion.String(), Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + digest}, SHA256: digest, Hooks: hooks,
			Rules:  []wasmv1.Rule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Operations: []wasmv1.Operation{"CREATE"}}},
			Config: &runtime.RawExtension{Raw: []byte(config)}}}
	obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	return &unstructured.Unstructured{Object: obj}
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:1"}}}}
}

// TestTenants is the recipe of docs/multi-tenancy.md: two tenants, each with its own user,
// namespace and namespaced WASM admission plugin.
func TestTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	s := testserver.Start(t)
	ctx := context.Background()
	admin := s.Clientset(t, false)
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bindings := []struct{ user, ns string }{{"alice", "tenant-a"}, {"bob", "tenant-b"}}
	for _, b := range bindings {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.user + "-edit", Namespace: b.ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: b.user}}}
		if _, err := admin.RbacV1().RoleBindings(b.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.user + "-modules"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wasmplane:module-uploader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: b.user}}}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := newUser(t, s, "alice", "tenant-a-devs"), newUser(t, s, "bob")
	// The aggregation controller fills "edit" and the authorizer's informers catch up.
	waitfor.Condition(t, time.Minute, "alice to be able to create pods in tenant-a", func(ctx context.Context) (bool, error) {
		r, err := alice.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "tenant-a", Verb: "create", Resource: "pods"}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	waitfor.Condition(t, time.Minute, "bob's binding", func(ctx context.Context) (bool, error) {
		_, err := bob.cs.CoreV1().Pods("tenant-b").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})

	// Each tenant ships its own admission plugin into its own namespace.
	mod := wasmtest.Go(t, "./examples/plugins/go/require-labels")
	digest := upload(t, alice, mod, "tenant-a")
	if d := upload(t, bob, mod, "tenant-b"); d != digest {
		t.Fatalf("same module, different digests %s %s", d, digest)
	}
	for _, u := range []*user{alice, bob} {
		ns := "tenant-a"
		if u == bob {
			ns = "tenant-b"
		}
		cfg := fmt.Sprintf(`{"labels":["owner-%s"]}`, u.name)
		if _, err := u.dyn.Resource(wasmPlugins).Namespace(ns).Create(ctx, plugin("WasmPlugin", ns, "require-owner", digest, []wasmv1.Hook{wasmv1.HookValidate}, cfg), metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s installing a plugin in %s: %v", u.name, ns, err)
		}
		waitfor.Condition(t, time.Minute, u.name+"'s plugin to load", func(ctx context.Context) (bool, error) {
			cur, err := u.dyn.Resource(wasmPlugins).Namespace(ns).Get(ctx, "require-owner", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
			return phase == "Loaded", nil
		})
	}

	forbidden := func(t *testing.T, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("%s: want 403 Forbidden, got %v", what, err)
		}
	}
	t.Run("tenant A cannot reach B's namespace", func(t *testing.T) {
		_, err := alice.cs.CoreV1().Pods("tenant-b").List(ctx, metav1.ListOptions{})
		forbidden(t, "list", err)
		if want := `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "tenant-b"`; !strings.Contains(err.Error(), want) {
			t.Fatalf("message %q, want %q", err.Error(), want)
		}
		_, err = alice.cs.CoreV1().Pods("tenant-b").Get(ctx, "x", metav1.GetOptions{})
		forbidden(t, "get", err)
		_, err = alice.cs.CoreV1().Pods("tenant-b").Watch(ctx, metav1.ListOptions{})
		forbidden(t, "watch", err)
		_, err = alice.cs.CoreV1().ConfigMaps("tenant-b").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		forbidden(t, "create", err)
		err = alice.cs.CoreV1().Pods("tenant-b").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		forbidden(t, "deletecollection", err)
		forbidden(t, "delete B's plugin", alice.dyn.Resource(wasmPlugins).Namespace("tenant-b").Delete(ctx, "require-owner", metav1.DeleteOptions{}))
	})
	t.Run("tenant A cannot see cluster-wide secrets or other namespaces' objects", func(t *testing.T) {
		_, err := alice.cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		forbidden(t, "list all secrets", err)
		_, err = alice.cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		forbidden(t, "list kube-system secrets", err)
		_, err = alice.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		forbidden(t, "list pods in all namespaces", err)
		_, err = alice.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		forbidden(t, "list nodes", err)
	})
	t.Run("tenant A cannot install cluster plugins or escalate", func(t *testing.T) {
		_, err := alice.dyn.Resource(clusterWasmPlugins).Create(ctx, plugin("ClusterWasmPlugin", "", "mine", digest, []wasmv1.Hook{wasmv1.HookValidate}, `{"labels":["x"]}`), metav1.CreateOptions{})
		forbidden(t, "create ClusterWasmPlugin", err)
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "grab", Namespace: "tenant-a"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}
		_, err = alice.cs.RbacV1().RoleBindings("tenant-a").Create(ctx, rb, metav1.CreateOptions{})
		forbidden(t, "bind cluster-admin", err)
		err = alice.cs.CoreV1().Namespaces().Delete(ctx, "tenant-b", metav1.DeleteOptions{})
		forbidden(t, "delete B's namespace", err)
	})
	t.Run("each tenant's plugin judges only its namespace", func(t *testing.T) {
		_, err := alice.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("unlabelled", nil), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "owner-alice") {
			t.Fatalf("alice's plugin: want a 403 about owner-alice, got %v", err)
		}
		if _, err := alice.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("labelled", map[string]string{"owner-alice": "y"}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a pod alice's plugin accepts: %v", err)
		}
		// Bob's plugin wants owner-bob; alice's label means nothing to it, and alice's
		// plugin never sees bob's pods.
		_, err = bob.cs.CoreV1().Pods("tenant-b").Create(ctx, pod("alices-label", map[string]string{"owner-alice": "y"}), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "owner-bob") || strings.Contains(err.Error(), "owner-alice") {
			t.Fatalf("bob's pod: want only bob's plugin's 403, got %v", err)
		}
		if _, err := bob.cs.CoreV1().Pods("tenant-b").Create(ctx, pod("bobs", map[string]string{"owner-bob": "y"}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("alice's plugin ran on bob's pod: %v", err)
		}
	})
	t.Run("a ServiceAccount has only what it is bound to", func(t *testing.T) {
		waitfor.Condition(t, time.Minute, "tenant-a's default ServiceAccount", func(ctx context.Context) (bool, error) {
			_, err := admin.CoreV1().ServiceAccounts("tenant-a").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		tr, err := alice.cs.CoreV1().ServiceAccounts("tenant-a").CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("alice requesting a token for her ServiceAccount: %v", err)
		}
		sa := kubernetes.NewForConfigOrDie(&rest.Config{Host: s.URL(), BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: s.CA()}})
		_, err = sa.CoreV1().Pods("tenant-a").List(ctx, metav1.ListOptions{})
		forbidden(t, "unbound ServiceAccount listing pods", err)
		_, err = alice.cs.CoreV1().ServiceAccounts("tenant-b").CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		forbidden(t, "a token for B's ServiceAccount", err)
	})
}

// upload pushes a module as u, shared with namespace ns ("" for none).
func upload(t *testing.T, u *user, wasm []byte, ns string) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(u.cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := u.cfg.Host + "/apis/wasmplane.io/v1alpha1/wasmmodules"
	if ns != "" {
		url += "?namespace=" + ns
	}
	resp, err := hc.Post(url, "application/wasm", bytes.NewReader(wasm))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m wasmv1.WasmModule
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s uploading a module: %d %v", u.name, resp.StatusCode, err)
	}
	return strings.TrimPrefix(m.Spec.Digest, "sha256:")
}
