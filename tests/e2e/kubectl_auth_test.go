package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// TestKubectlAuth runs `kubectl auth whoami` and `auth can-i` over TLS as the admin and as
// a tenant holding a client-certificate kubeconfig, and checks the tenant's 403s.
func TestKubectlAuth(t *testing.T) {
	s := testserver.Start(t)
	ctx := context.Background()
	admin := s.Clientset(t, false)
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dana-edit", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dana"}}}
	if _, err := admin.RbacV1().RoleBindings("team-a").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPEM, keyPEM, err := s.IssueClientCertificate("dana", "team-a-devs")
	if err != nil {
		t.Fatal(err)
	}
	data, err := server.Kubeconfig(&rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: s.CA(), CertData: certPEM, KeyData: keyPEM}}, "dana")
	if err != nil {
		t.Fatal(err)
	}
	dana := &kubectl{kubeconfig: writeFile(t, dir, "dana.kubeconfig", string(data)), home: t.TempDir(), ns: "team-a"}
	root := &kubectl{kubeconfig: filepath.Join(s.DataDir, "admin.kubeconfig"), home: t.TempDir(), ns: "default"}

	out, err := root.run(t, "", "auth", "whoami")
	if err != nil || !strings.Contains(out, "system:admin") || !strings.Contains(out, "system:masters") {
		t.Fatalf("admin whoami: %q %v", out, err)
	}
	out, err = dana.run(t, "", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil || out != "dana" {
		t.Fatalf("dana whoami: %q %v", out, err)
	}
	// The aggregation controller fills "edit"; wait until dana holds it.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		out, _ := dana.run(t, "", "auth", "can-i", "create", "pods")
		return strings.TrimSpace(out) == "yes", nil
	})
	if err != nil {
		t.Fatalf("dana never could create pods in team-a: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "can-i", "create", "deployments.apps"}, "yes"},
		{[]string{"auth", "can-i", "list", "pods", "-n", "team-b"}, "no"},
		{[]string{"auth", "can-i", "create", "clusterwasmplugins.wasmplane.io"}, "no"},
		{[]string{"auth", "can-i", "create", "wasmplugins.wasmplane.io"}, "yes"},
		{[]string{"auth", "can-i", "create", "rolebindings.rbac.authorization.k8s.io"}, "no"},
		{[]string{"auth", "can-i", "delete", "nodes"}, "no"},
	} {
		out, _ := dana.run(t, "", c.args...)
		if strings.TrimSpace(out) != c.want {
			t.Errorf("kubectl %s: %q, want %q", strings.Join(c.args, " "), strings.TrimSpace(out), c.want)
		}
	}
	_, err = dana.run(t, "", "get", "pods", "-n", "team-b")
	if err == nil || !strings.Contains(err.Error(), `pods is forbidden: User "dana" cannot list resource "pods" in API group "" in the namespace "team-b"`) {
		t.Fatalf("dana listing team-b: %v", err)
	}
	if _, err := dana.run(t, configMapYAML, "apply", "-f", "-"); err != nil {
		t.Fatalf("dana applying a ConfigMap in her namespace: %v", err)
	}
}

// TestKubectlImpersonation runs kubectl's --as and --as-group: the admin may impersonate
// anyone, a user holding the impersonate verb on one name only that name, and the
// impersonated request has the impersonated user's rights.
func TestKubectlImpersonation(t *testing.T) {
	s := testserver.StartAPI(t)
	ctx := context.Background()
	admin := s.Clientset(t, false)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "impersonate-jane"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"jane"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dana-impersonates-jane"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "impersonate-jane"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dana"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := s.IssueClientCertificate("dana")
	if err != nil {
		t.Fatal(err)
	}
	data, err := server.Kubeconfig(&rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: s.CA(), CertData: certPEM, KeyData: keyPEM}}, "dana")
	if err != nil {
		t.Fatal(err)
	}
	dana := &kubectl{kubeconfig: writeFile(t, t.TempDir(), "dana.kubeconfig", string(data)), home: t.TempDir(), ns: "default"}
	root := &kubectl{kubeconfig: filepath.Join(s.DataDir, "admin.kubeconfig"), home: t.TempDir(), ns: "default"}

	out, err := root.run(t, "", "auth", "whoami", "--as=jane", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if err != nil || out != `jane ["system:authenticated"]` {
		t.Fatalf("admin whoami --as=jane: %q %v", out, err)
	}
	out, err = root.run(t, "", "auth", "whoami", "--as=jane", "--as-group=devs", "--as-group=ops", "-o", "jsonpath={.status.userInfo.groups}")
	if err != nil || out != `["devs","ops","system:authenticated"]` {
		t.Fatalf("admin whoami --as=jane --as-group: %q %v", out, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "can-i", "delete", "nodes"}, "yes"},
		{[]string{"auth", "can-i", "delete", "nodes", "--as=jane"}, "no"},
		{[]string{"auth", "can-i", "delete", "nodes", "--as=jane", "--as-group=system:masters"}, "yes"},
	} {
		out, _ := root.run(t, "", c.args...)
		if strings.TrimSpace(out) != c.want {
			t.Errorf("kubectl %s: %q, want %q", strings.Join(c.args, " "), strings.TrimSpace(out), c.want)
		}
	}
	_, err = root.run(t, configMapYAML, "create", "-f", "-", "--as=jane")
	if err == nil || !strings.Contains(err.Error(), `configmaps is forbidden: User "jane" cannot create resource "configmaps" in API group "" in the namespace "default"`) {
		t.Fatalf("a create as jane: want 403 for jane, got %v", err)
	}
	// dana may impersonate jane (once the authorizer has seen the binding), not bob.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		out, err := dana.run(t, "", "auth", "whoami", "--as=jane", "-o", "jsonpath={.status.userInfo.username}")
		return err == nil && out == "jane", nil
	})
	if err != nil {
		t.Fatalf("dana never could impersonate jane: %v", err)
	}
	// kubectl's discovery is refused first; it prints the 403 without its message.
	_, err = dana.run(t, "", "get", "configmaps", "--as=bob")
	if err == nil || !strings.Contains(err.Error(), "Error from server (Forbidden)") {
		t.Fatalf("dana as bob: want 403, got %v", err)
	}
}
