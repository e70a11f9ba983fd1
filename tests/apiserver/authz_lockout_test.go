package apiserver

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// tenant makes namespace ns and a user with edit there and the right to upload modules.
func tenant(t *testing.T, s *testserver.Server, admin kubernetes.Interface, name, ns string) *user {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-edit", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-modules"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wasmplane:module-uploader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := newUser(t, s, name)
	waitfor.Condition(t, time.Minute, name+"'s rights in "+ns, func(ctx context.Context) (bool, error) {
		_, err := u.dyn.Resource(wasmPlugins).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	return u
}

// everything is the rule "*:*" of `wasmplane plugin apply --rules '*:*'`.
var everything = []wasmv1.Rule{{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Operations: []wasmv1.Operation{"*"}}}

func wasmPlugin(ns, name, digest string, rules []wasmv1.Rule, limits *wasmv1.Limits) *unstructured.Unstructured {
	p := &wasmv1.WasmPlugin{TypeMeta: metav1.TypeMeta{APIVersion: wasmv1.SchemeGroupVersion.String(), Kind: "WasmPlugin"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + digest}, SHA256: digest,
			Hooks: []wasmv1.Hook{wasmv1.HookValidate}, Rules: rules, Limits: limits}}
	obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	return &unstructured.Unstructured{Object: obj}
}

func waitLoaded(t *testing.T, u *user, ns, name string) {
	t.Helper()
	waitfor.Condition(t, time.Minute, ns+"/"+name+" to load", func(ctx context.Context) (bool, error) {
		cur, err := u.dyn.Resource(wasmPlugins).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
		return phase == "Loaded", nil
	})
}

func authzConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestTenantLockout is the attack of docs/multi-tenancy.md: a tenant with edit rights
// installs a plugin that denies every request in its namespace. The tenant's policy
// applies to everyone's ordinary writes there, the admin's too — but the admin can still
// change and delete the plugin, its deletion ends enforcement at once, and deleting the
// namespace finishes.
func TestTenantLockout(t *testing.T) {
	s := testserver.Start(t)
	ctx := context.Background()
	admin := s.Clientset(t, false)
	adminDyn := newUser(t, s, "root", "system:masters")
	alice := tenant(t, s, admin, "alice", "tenant-a")

	digest := upload(t, alice, wasmtest.WAT(t, "deny"), "tenant-a")
	if _, err := alice.cs.CoreV1().ConfigMaps("tenant-a").Create(ctx, authzConfigMap("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	install := func(name string) {
		t.Helper()
		if _, err := alice.dyn.Resource(wasmPlugins).Namespace("tenant-a").Create(ctx, wasmPlugin("tenant-a", name, digest, everything, nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("alice installing %s: %v", name, err)
		}
		waitLoaded(t, alice, "tenant-a", name)
	}
	install("deny-all")

	// The tenant's policy holds for ordinary objects, whoever writes them.
	for who, cs := range map[string]kubernetes.Interface{"alice": alice.cs, "the admin": admin} {
		_, err := cs.CoreV1().ConfigMaps("tenant-a").Create(ctx, authzConfigMap("after"), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "denied by deny-all") {
			t.Fatalf("%s creating a configmap under deny-all: %v, want the plugin's denial", who, err)
		}
	}

	// The admin changes the plugin, in a dry run and for real: plugins never see plugins.
	patch := []byte(`{"metadata":{"labels":{"reviewed":"no"}}}`)
	for _, dry := range [][]string{{metav1.DryRunAll}, nil} {
		if _, err := adminDyn.dyn.Resource(wasmPlugins).Namespace("tenant-a").Patch(ctx, "deny-all", types.MergePatchType, patch, metav1.PatchOptions{DryRun: dry}); err != nil {
			t.Fatalf("the admin patching the plugin (dryRun %v): %v", dry, err)
		}
	}
	if err := adminDyn.dyn.Resource(wasmPlugins).Namespace("tenant-a").Delete(ctx, "deny-all", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the admin deleting the plugin in a dry run: %v", err)
	}

	// Deleting the plugin ends its enforcement within 2 s.
	if err := adminDyn.dyn.Resource(wasmPlugins).Namespace("tenant-a").Delete(ctx, "deny-all", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("the admin deleting the plugin: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ConfigMaps("tenant-a").Create(ctx, authzConfigMap("freed"), metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("a create in tenant-a still refused 2 s after the plugin's deletion: %v", err)
	}

	// With the plugin back, deleting the namespace still finishes: the namespace
	// controller's deletes and the garbage collector's are not the tenant's to refuse.
	install("deny-all-again")
	if err := admin.CoreV1().ConfigMaps("tenant-a").Delete(ctx, "before", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "denied by deny-all") {
		t.Fatalf("the admin deleting a configmap under deny-all: %v, want the plugin's denial", err)
	}
	if err := admin.CoreV1().Namespaces().Delete(ctx, "tenant-a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting namespace tenant-a: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "tenant-a", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		left, _ := admin.CoreV1().ConfigMaps("tenant-a").List(ctx, metav1.ListOptions{})
		t.Fatalf("namespace tenant-a not gone within 30 s (%d configmaps left): %v", len(left.Items), err)
	}
}

// TestTenantCeilings: a tenant's plugin limits stay under the cluster's ceilings, a
// namespace holds a bounded number of plugins and, with a ResourceQuota, a bounded
// amount of plugin memory; and a tenant runs only modules shared with its namespace.
func TestTenantCeilings(t *testing.T) {
	s := testserver.Start(t)
	ctx := context.Background()
	admin := s.Clientset(t, false)
	adminDyn := newUser(t, s, "root", "system:masters")
	alice := tenant(t, s, admin, "alice", "tenant-a")
	bob := tenant(t, s, admin, "bob", "tenant-b")
	good := wasmtest.WAT(t, "good")
	digest := upload(t, alice, good, "tenant-a")
	plugins := alice.dyn.Resource(wasmPlugins).Namespace("tenant-a")

	t.Run("limits above a ceiling are refused with 422", func(t *testing.T) {
		for _, tt := range []struct {
			limits *wasmv1.Limits
			want   string
		}{
			{&wasmv1.Limits{Timeout: &metav1.Duration{Duration: time.Hour}}, `spec.limits.timeout: Invalid value: "1h0m0s": must be at most 10s (the cluster's ceiling for namespaced plugins)`},
			{&wasmv1.Limits{MemoryPages: 65536}, `spec.limits.memoryPages: Invalid value: 65536: must be at most 1024 (64Mi per instance) (the cluster's ceiling for namespaced plugins)`},
			{&wasmv1.Limits{MaxInstances: 64}, `spec.limits.maxInstances: Invalid value: 64: must be at most 4 (the cluster's ceiling for namespaced plugins)`},
			{&wasmv1.Limits{MaxInputBytes: 1 << 30}, `spec.limits.maxInputBytes: Invalid value: 1073741824: must be at most 16777216 (16Mi)`},
			{&wasmv1.Limits{MaxOutputBytes: 1 << 30}, `spec.limits.maxOutputBytes: Invalid value: 1073741824: must be at most 4194304 (4Mi)`},
		} {
			_, err := plugins.Create(ctx, wasmPlugin("tenant-a", "greedy", digest, nil, tt.limits), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("limits %+v: %v, want 422 %q", *tt.limits, err, tt.want)
			}
		}
	})

	t.Run("unset limits take the defaults under the ceilings", func(t *testing.T) {
		created, err := plugins.Create(ctx, wasmPlugin("tenant-a", "plain", digest, nil, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var p wasmv1.WasmPlugin
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, &p); err != nil {
			t.Fatal(err)
		}
		l := p.Spec.Limits
		if l == nil || l.MemoryPages != 1024 || l.MaxInstances != 4 || l.Timeout == nil || l.Timeout.Duration != time.Second {
			t.Fatalf("stored limits %+v, want memoryPages 1024, maxInstances 4, timeout 1s", l)
		}
		waitLoaded(t, alice, "tenant-a", "plain")
	})

	t.Run("a cluster plugin is not capped", func(t *testing.T) {
		cp := wasmPlugin("", "roomy", digest, nil, &wasmv1.Limits{MaxInstances: 64, Timeout: &metav1.Duration{Duration: time.Minute}})
		cp.SetKind("ClusterWasmPlugin")
		if _, err := adminDyn.dyn.Resource(clusterWasmPlugins).Create(ctx, cp, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the admin's ClusterWasmPlugin: %v", err)
		}
	})

	t.Run("plugins per namespace", func(t *testing.T) {
		for _, name := range []string{"p2", "p3", "p4"} {
			if _, err := plugins.Create(ctx, wasmPlugin("tenant-a", name, digest, nil, nil), metav1.CreateOptions{}); err != nil {
				t.Fatalf("plugin %s of 4: %v", name, err)
			}
		}
		_, err := plugins.Create(ctx, wasmPlugin("tenant-a", "p5", digest, nil, nil), metav1.CreateOptions{})
		want := "metadata.namespace: Forbidden: namespace tenant-a already holds 4 WasmPlugins: at most 4 per namespace"
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a fifth plugin: %v, want 422 %q", err, want)
		}
	})

	t.Run("another tenant's module is refused", func(t *testing.T) {
		_, err := bob.dyn.Resource(wasmPlugins).Namespace("tenant-b").Create(ctx, wasmPlugin("tenant-b", "borrowed", digest, nil, nil), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is not shared with namespace tenant-b") {
			t.Fatalf("bob pinning alice's module: %v, want 403 not shared", err)
		}
		if _, err := bob.cs.CoreV1().RESTClient().Get().AbsPath("/apis/wasmplane.io/v1alpha1/wasmmodules", "sha256-"+digest, "blob").DoRaw(ctx); !apierrors.IsForbidden(err) {
			t.Fatalf("bob downloading alice's module: %v, want 403", err)
		}
		// Holding the bytes is owning them: bob's own upload shares them with tenant-b.
		if d := upload(t, bob, good, "tenant-b"); d != digest {
			t.Fatalf("same bytes, digest %s, want %s", d, digest)
		}
		if _, err := bob.dyn.Resource(wasmPlugins).Namespace("tenant-b").Create(ctx, wasmPlugin("tenant-b", "own", digest, nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("bob pinning the module he uploaded: %v", err)
		}
	})

	t.Run("ResourceQuota on plugin count and memory", func(t *testing.T) {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "plugins", Namespace: "tenant-b"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
				"count/wasmplugins.wasmplane.io": resource.MustParse("3"),
				"wasmplane.io/plugin-memory":     resource.MustParse("300Mi"),
			}}}
		if _, err := admin.CoreV1().ResourceQuotas("tenant-b").Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		usedMemory := func(want string) {
			t.Helper()
			waitfor.Condition(t, time.Minute, "quota usage "+want, func(ctx context.Context) (bool, error) {
				cur, err := admin.CoreV1().ResourceQuotas("tenant-b").Get(ctx, "plugins", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				m, ok := cur.Status.Used["wasmplane.io/plugin-memory"]
				return ok && m.Cmp(resource.MustParse(want)) == 0, nil
			})
		}
		usedMemory("256Mi") // "own": 4 instances × 64 MiB
		_, err := bob.dyn.Resource(wasmPlugins).Namespace("tenant-b").Create(ctx, wasmPlugin("tenant-b", "second", digest, nil, nil), metav1.CreateOptions{})
		want := "exceeded quota: plugins, requested: wasmplane.io/plugin-memory=256Mi, used: wasmplane.io/plugin-memory=256Mi, limited: wasmplane.io/plugin-memory=300Mi"
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a plugin past the memory quota: %v, want 403 %q", err, want)
		}
		small := &wasmv1.Limits{MemoryPages: 64, MaxInstances: 2} // 8 MiB
		if _, err := bob.dyn.Resource(wasmPlugins).Namespace("tenant-b").Create(ctx, wasmPlugin("tenant-b", "small", digest, nil, small), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a plugin within the quota: %v", err)
		}
		// Growing a plugin is charged too.
		grown := `{"spec":{"limits":{"memoryPages":1024,"maxInstances":4}}}`
		_, err = bob.dyn.Resource(wasmPlugins).Namespace("tenant-b").Patch(ctx, "small", types.MergePatchType, []byte(grown), metav1.PatchOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: plugins") {
			t.Fatalf("growing a plugin past the memory quota: %v, want 403 exceeded quota", err)
		}
		// Deleting a plugin gives its memory back.
		if err := bob.dyn.Resource(wasmPlugins).Namespace("tenant-b").Delete(ctx, "own", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		usedMemory("8Mi")
	})
}
