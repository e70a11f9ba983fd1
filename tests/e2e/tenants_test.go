package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTenants runs docs/multi-tenancy.md on the real binary: two users with client
// certificate kubeconfigs from `wasmplane kubeconfig`, each with a namespace and a validate
// plugin they install themselves; everything through the built-in kubectl and `wasmplane
// plugin apply`.
func TestTenants(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t, 3*time.Minute)
	admin := c.adminKubeconfig()
	module := artifacts.plugin(t, requireLabels, false)
	c.importImage(artifacts.workload(t, "counter"), "counter:1")

	type tenant struct{ user, ns, plugin, label, kubeconfig string }
	alice := &tenant{user: "alice", ns: "tenant-a", plugin: "require-owner", label: "owner"}
	bob := &tenant{user: "bob", ns: "tenant-b", plugin: "require-cost", label: "cost-center"}
	for _, tn := range []*tenant{alice, bob} {
		c.mustKubectl(admin, "", "create", "namespace", tn.ns)
		c.mustKubectl(admin, "", "-n", tn.ns, "create", "rolebinding", tn.user+"-edit", "--clusterrole=edit", "--user="+tn.user)
		c.mustKubectl(admin, "", "create", "clusterrolebinding", tn.user+"-modules", "--clusterrole=wasmplane:module-uploader", "--user="+tn.user)
		tn.kubeconfig = filepath.Join(c.root, tn.user+".kubeconfig")
		if _, err := c.wp("", "kubeconfig", "--data-dir", c.dir, "--user", tn.user, "--group", tn.ns, "-o", tn.kubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range []*tenant{alice, bob} {
		c.waitCan(tn.kubeconfig, "create", "wasmplugins.wasmplane.io", "-n", tn.ns)
		// The tenant pushes the module and installs its own validate plugin.
		c.mustPluginApply(tn.kubeconfig, tn.plugin, tn.ns, "--module", module, "--hooks", "validate", "--rules", "pods:CREATE",
			"--config", c.writeFile(tn.plugin+".json", `{"labels":["`+tn.label+`"]}`))
	}
	sum := sha256.Sum256(mustRead(t, module))
	digest := "sha256:" + hex.EncodeToString(sum[:])

	forbidden := func(verb, resource, ns string) string {
		if ns == "" {
			return `User "alice" cannot ` + verb + ` resource "` + resource + `"`
		}
		return `User "alice" cannot ` + verb + ` resource "` + resource + `" in API group "" in the namespace "` + ns + `"`
	}
	for _, tc := range []struct {
		name string
		as   *tenant
		// args are wasmplane's; "KC" stands for the tenant's kubeconfig.
		args    []string
		wantOut []string // substrings of stdout on success
		wantErr []string // substrings of the error; nil means success
		notErr  string   // must not appear in the error
	}{
		{name: "whoami", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"},
			wantOut: []string{"alice ", "tenant-a", "system:authenticated"}},
		{name: "own plugin denies in own namespace", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-a", "run", "a1", "--image=counter:1", "--restart=Never"},
			wantErr: []string{`"tenant-a/require-owner"`, `label "owner" is required`}, notErr: "cost-center"},
		{name: "own plugin admits in own namespace, the other's is silent", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-a", "run", "a2", "--image=counter:1", "--restart=Never", "--labels=owner=alice"},
			wantOut: []string{"pod/a2 created"}},
		{name: "the other tenant's plugin denies there only", as: bob, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-b", "run", "b1", "--image=counter:1", "--restart=Never", "--labels=owner=bob"},
			wantErr: []string{`"tenant-b/require-cost"`, `label "cost-center" is required`}, notErr: "require-owner"},
		{name: "the other tenant admits its own", as: bob, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-b", "run", "b2", "--image=counter:1", "--restart=Never", "--labels=cost-center=42"},
			wantOut: []string{"pod/b2 created"}},
		{name: "list pods of the other tenant", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "get", "pods", "-n", "tenant-b"},
			wantErr: []string{`pods is forbidden: ` + forbidden("list", "pods", "tenant-b")}},
		{name: "get a pod of the other tenant", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "get", "pod", "b2", "-n", "tenant-b"},
			wantErr: []string{forbidden("get", "pods", "tenant-b")}},
		{name: "delete a pod of the other tenant", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "delete", "pod", "b2", "-n", "tenant-b"},
			wantErr: []string{forbidden("delete", "pods", "tenant-b")}},
		{name: "watch the other tenant", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "get", "pods", "-n", "tenant-b", "--watch-only", "--request-timeout=5s"},
			wantErr: []string{"forbidden"}},
		{name: "create in the other tenant", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-b", "create", "configmap", "x", "--from-literal=a=b"},
			wantErr: []string{forbidden("create", "configmaps", "tenant-b")}},
		{name: "the other tenant's plugin", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-b", "delete", "wasmplugin", "require-cost"},
			wantErr: []string{`User "alice" cannot delete resource "wasmplugins" in API group "wasmplane.io" in the namespace "tenant-b"`}},
		{name: "secrets in all namespaces", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "get", "secrets", "-A"},
			wantErr: []string{forbidden("list", "secrets", "")}},
		{name: "secrets in kube-system", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "get", "secrets", "-n", "kube-system"},
			wantErr: []string{forbidden("list", "secrets", "kube-system")}},
		{name: "nodes", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "get", "nodes"},
			wantErr: []string{forbidden("list", "nodes", "")}},
		{name: "a ClusterWasmPlugin", as: alice, args: []string{"plugin", "apply", "evil", "--cluster", "--kubeconfig", "KC", "--digest", digest, "--hooks", "validate"},
			wantErr: []string{"forbidden", "clusterwasmplugins"}},
		{name: "a namespaced authenticator", as: alice, args: []string{"plugin", "apply", "tokens", "-n", "tenant-a", "--kubeconfig", "KC", "--digest", digest, "--hooks", "authenticate"},
			wantErr: []string{"ClusterWasmPlugin"}},
		{name: "delete a module", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "delete", "wasmmodule", "sha256-" + strings.TrimPrefix(digest, "sha256:")},
			wantErr: []string{`User "alice" cannot delete resource "wasmmodules"`}},
		{name: "bind itself to cluster-admin", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-a", "create", "rolebinding", "escalate", "--clusterrole=cluster-admin", "--user=alice"},
			wantErr: []string{"forbidden"}},
		{name: "delete the other tenant's namespace", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "delete", "namespace", "tenant-b"},
			wantErr: []string{forbidden("delete", "namespaces", "")}},
		{name: "a token of the other tenant's ServiceAccount", as: alice, args: []string{"kubectl", "--kubeconfig", "KC", "-n", "tenant-b", "create", "token", "default"},
			wantErr: []string{"forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				if a == "KC" {
					a = tc.as.kubeconfig
				}
				args[i] = a
			}
			out, err := c.wp("", args...)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("as %s: %v", tc.as.user, err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("as %s: succeeded (%q), want an error containing %q", tc.as.user, out, tc.wantErr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("as %s: output %q lacks %q", tc.as.user, out, w)
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("as %s: error %q lacks %q", tc.as.user, err, w)
				}
			}
			if tc.notErr != "" && err != nil && strings.Contains(err.Error(), tc.notErr) {
				t.Errorf("as %s: error %q mentions %q: the other tenant's plugin acted", tc.as.user, err, tc.notErr)
			}
		})
	}

	t.Run("the admitted pods run", func(t *testing.T) {
		for _, p := range []struct{ ns, name string }{{"tenant-a", "a2"}, {"tenant-b", "b2"}} {
			waitfor.Condition(t, 60*time.Second, p.ns+"/"+p.name+" Running", func(ctx context.Context) (bool, error) {
				pod, err := c.admin.CoreV1().Pods(p.ns).Get(ctx, p.name, metav1.GetOptions{})
				return err == nil && podRunning(pod), nil
			})
		}
		// Nothing was stored for the denied requests, and nothing was deleted.
		for ns, want := range map[string]string{"tenant-a": "a2", "tenant-b": "b2"} {
			l, err := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != 1 || l.Items[0].Name != want {
				t.Errorf("pods in %s: %v %v, want only %s", ns, l, err, want)
			}
		}
		if _, err := c.admin.CoreV1().Namespaces().Get(ctx, "tenant-b", metav1.GetOptions{}); err != nil {
			t.Errorf("namespace tenant-b: %v", err)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
